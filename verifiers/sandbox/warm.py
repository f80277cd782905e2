"""Trusted scripts that backends with ``capabilities.warm_scripts`` compile before any run.

A family registers its guest harness here at import time; a backend reads ``warm_sources()``
when it starts its warm interpreter (fork server, container server) and catches up when the
list has grown since: the process fork server is handed the new scripts while it runs, the
docker pool retires containers started before. Only trusted
project code belongs here: a registered script is compiled and executed (as module
``__warm__``) in the warm parent that every later run is forked from. A script that defines
``warm_main()`` is then run warm by calling only that function in its warm namespace, so its
top level must do nothing but define things (see ``verifiers.sandbox.guest.warmrun``).
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_SOURCES: list[str] = []


def register_warm_script(source: str) -> None:
    """Have warm backends compile ``source`` once so runs of it skip the compile."""
    with _LOCK:
        if source not in _SOURCES:
            _SOURCES.append(source)


def warm_sources() -> list[str]:
    """The scripts registered so far, in registration order."""
    with _LOCK:
        return list(_SOURCES)
