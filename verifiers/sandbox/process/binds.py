"""Host-side helpers of the ``process`` backend: bubblewrap binds and its own error messages.

``bind_args`` shows the system dirs, the interpreter's prefix and a virtualenv's
site-packages read-only; it does NOT hide anything inside those dirs (world-readable system
files stay readable to a run).
"""

from __future__ import annotations

import os
import sys
import sysconfig


def infra_error(code: int, stderr: bytes, method: str) -> str | None:
    """The sandbox tool's own failure (not the command's); forgeable by the command's stderr."""
    if method == "bwrap" and code == 1 and stderr.startswith(b"bwrap: "):
        return stderr.decode(errors="replace").strip()[:500]
    if method == "unshare" and code == 1 and stderr.startswith(b"unshare: "):
        return stderr.decode(errors="replace").strip()[:500]
    return None


SANDBOX_SITE = "/.tasksieve/site"  # where a virtualenv's site-packages appear in the sandbox


def venv_site_paths() -> list[str]:
    """The host virtualenv's site-packages dirs (empty outside a virtualenv)."""
    if sys.prefix == sys.base_prefix:
        return []
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(os.path.realpath(paths[k]) for k in ("purelib", "platlib")))


def sandbox_site_paths() -> list[str]:
    """Where ``venv_site_paths()`` are bound inside the sandbox (a fixed path, so a venv that
    lives under a directory the sandbox replaces, such as /tmp, still shows)."""
    return [f"{SANDBOX_SITE}/{i}" for i in range(len(venv_site_paths()))]


def bind_args(python: str, system_dirs: tuple[str, ...]) -> list[str]:
    """bwrap arguments binding the system dirs and ``python``'s prefix read-only."""
    args: list[str] = []
    bound: list[str] = []
    for d in system_dirs:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
            bound.append(d)
    prefix = os.path.realpath(sys.base_prefix)
    for extra in (prefix, os.path.dirname(python)):
        if not any(extra == b or extra.startswith(b + "/") for b in bound):
            parents = extra.split("/")[1:-1]
            for i in range(1, len(parents) + 1):  # traversable, but empty, parents
                args += ["--perms", "0755", "--dir", "/" + "/".join(parents[:i])]
            args += ["--ro-bind", extra, extra]
            bound.append(extra)
    site = venv_site_paths()  # a virtualenv's packages, read-only (the API harness needs them)
    if site:
        args += ["--perms", "0755", "--dir", os.path.dirname(SANDBOX_SITE)]
        args += ["--perms", "0755", "--dir", SANDBOX_SITE]
        for src, dest in zip(site, sandbox_site_paths(), strict=True):
            args += ["--ro-bind", src, dest]
    if os.path.exists("/etc/ld.so.cache"):
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args
