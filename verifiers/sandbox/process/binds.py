"""Host-side helpers of the ``process`` backend: bubblewrap binds and its own error messages.

``bind_args`` shows the system dirs, the interpreter's prefix and a virtualenv's
site-packages read-only; it does NOT hide anything inside those dirs (world-readable system
files stay readable to a run).
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig


def infra_error(code: int, stderr: bytes, method: str) -> str | None:
    """The sandbox tool's own failure (not the command's); forgeable by the command's stderr."""
    if method == "bwrap" and code == 1 and stderr.startswith(b"bwrap: "):
        return stderr.decode(errors="replace").strip()[:500]
    if method == "unshare-mount" and (
        (code == 1 and stderr.startswith((b"unshare: ", b"setpriv: ")))
        or (code == 125 and stderr.startswith(b"sandbox-setup: "))
    ):
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


def mount_plan(python: str, system_dirs: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """What a run sees besides its scratch: ``("ro", source, target)`` read-only binds and
    ``("link", target, path)`` symlinks (system dirs, ``python``'s prefix, a virtualenv's
    site-packages at ``sandbox_site_paths()``, the loader cache)."""
    plan: list[tuple[str, str, str]] = []
    bound: list[str] = []
    for d in system_dirs:
        if os.path.islink(d):
            plan.append(("link", os.readlink(d), d))
        elif os.path.isdir(d):
            plan.append(("ro", d, d))
            bound.append(d)
    prefix = os.path.realpath(sys.base_prefix)
    for extra in (prefix, os.path.dirname(python)):
        if not any(extra == b or extra.startswith(b + "/") for b in bound):
            plan.append(("ro", extra, extra))
            bound.append(extra)
    plan += [("ro", s, d) for s, d in zip(venv_site_paths(), sandbox_site_paths(), strict=True)]
    if os.path.exists("/etc/ld.so.cache"):
        plan.append(("ro", "/etc/ld.so.cache", "/etc/ld.so.cache"))
    return plan


def bind_args(python: str, system_dirs: tuple[str, ...]) -> list[str]:
    """bwrap arguments for ``mount_plan``; parents outside the system dirs are empty dirs."""
    args: list[str] = []
    made: set[str] = set()
    for kind, src, dst in mount_plan(python, system_dirs):
        if kind == "link":
            args += ["--symlink", src, dst]
            continue
        if dst not in system_dirs and dst != "/etc/ld.so.cache":
            parents = dst.split("/")[1:-1]
            for i in range(1, len(parents) + 1):  # traversable, but empty, parents
                parent = "/" + "/".join(parents[:i])
                if parent not in made:
                    made.add(parent)
                    args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", src, dst]
    return args


def base_site_dirs(plan: list[tuple[str, str, str]]) -> list[str]:
    """The site-packages of the interpreter a virtualenv is built on, where ``plan`` shows them:
    what a workspace session covers with empty dirs (``guest/rootfs.hide_dirs``).

    A session's ``python3`` is the base interpreter itself (the virtualenv's ``bin`` is not in
    the sandbox), so without this it would load whatever was installed into that interpreter,
    start-up hooks of its ``.pth`` files included, which neither the tests (run with ``-I -S``
    and the task's paths) nor the docker backend's image see. Outside a virtualenv the base
    site-packages are the project's own environment and stay; a dir that holds another mount
    of ``plan`` stays too.
    """
    if sys.prefix == sys.base_prefix:
        return []
    shown = [d for kind, _, d in plan if kind == "ro"]
    dirs: list[str] = []
    for raw in site.getsitepackages([sys.base_prefix]):
        path = os.path.realpath(raw)
        if path in dirs or not os.path.isdir(path):
            continue
        if any(d == path or d.startswith(path + "/") for d in shown):
            continue  # something the plan mounts lies inside it
        if any(path.startswith(d + "/") for d in shown):
            dirs.append(path)
    return dirs


def under(plan: list[tuple[str, str, str]], directory: str) -> list[str]:
    """The targets of ``plan`` at or below ``directory`` (a mount there would hide them)."""
    return [d for _, _, d in plan if d == directory or d.startswith(directory.rstrip("/") + "/")]
