"""The guest programs the per-run ``process`` path wraps around a command, as ``-c`` sources.

``RLIMIT_LAUNCHER`` is the fallback when the ``prlimit``/``setpriv`` tools are missing;
``COLLECTOR`` runs the command as a child, then streams the requested scratch files to a
pipe (see the guest modules for their argv and frames). ``UNDERTAKER`` is not wrapped around a
command: it runs on the host, once per host process, and sweeps up a dead host's cold runs
(``process.lifeline``).
"""

from __future__ import annotations

from pathlib import Path

from tasksieve.verifiers.sandbox.guest import bundle

_GUEST = Path(__file__).parent / "guest"  # scripts: never imported on the host, only read
RLIMIT_LAUNCHER = bundle(str(_GUEST / "rlimit_launcher.py"))
COLLECTOR = bundle(str(_GUEST / "collector.py"))
MOUNTNS = bundle(str(_GUEST / "mountns.py"))
WSINIT = bundle(str(_GUEST / "wsinit.py"))
UNDERTAKER = bundle(str(_GUEST / "undertaker.py"))
