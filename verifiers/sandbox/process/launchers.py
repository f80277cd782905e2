"""The guest programs the per-run ``process`` path wraps around a command, as ``-c`` sources.

``RLIMIT_LAUNCHER`` is the fallback when the ``prlimit``/``setpriv`` tools are missing;
``COLLECTOR`` runs the command as a child, then streams the requested scratch files to a
pipe (see the guest modules for their argv and frames).
"""

from __future__ import annotations

from pathlib import Path

from tasksieve.verifiers.sandbox.guest import bundle

_GUEST = Path(__file__).parent / "guest"  # scripts: never imported on the host, only read
RLIMIT_LAUNCHER = bundle(str(_GUEST / "rlimit_launcher.py"))
COLLECTOR = bundle(str(_GUEST / "collector.py"))
MOUNTNS = bundle(str(_GUEST / "mountns.py"))
WSINIT = bundle(str(_GUEST / "wsinit.py"))
