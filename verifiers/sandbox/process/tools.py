"""The system programs the ``process`` sandbox runs, looked up once on PATH.

A missing program is ``None``; the sandbox then skips the method that needs it (see
``ProcessSandbox``), and ``doctor`` says which package brings it back. Looking a program up
does NOT check that it works here (user namespaces may be off, say): only a probe run does.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from tasksieve.verifiers.sandbox.process.runs import PATH


@dataclass(frozen=True)
class HostTools:
    """Where each program the sandbox may run lives (``None``: not found).

    ``bwrap``, ``unshare`` and ``pdeathsig`` (util-linux ``setpriv``, which ties an
    ``unshare`` run to its host thread) come from the caller's PATH; ``prlimit`` and
    ``setpriv`` (which drops a run to its uid, root only) from the sandbox's own ``PATH``,
    since they run inside it.
    """

    bwrap: str | None
    unshare: str | None
    pdeathsig: str | None
    prlimit: str | None
    setpriv: str | None

    @classmethod
    def find(cls, root: bool) -> HostTools:
        """Look every program up now; ``root`` decides whether ``setpriv`` drops uids."""
        return cls(
            bwrap=shutil.which("bwrap"),
            unshare=shutil.which("unshare"),
            pdeathsig=shutil.which("setpriv"),
            prlimit=shutil.which("prlimit", path=PATH),
            setpriv=shutil.which("setpriv", path=PATH) if root else None,
        )
