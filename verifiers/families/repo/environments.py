"""Environments of repo tasks: the tests' dependencies, built once per distinct value, read-only.

An environment is identified by the hash of its ``RepoEnvironment`` (``env_id``). ``resolve``
decides how a verification gets it:

- fast path: every requirement (and pytest) is already installed where the sandbox exposes the
  host's packages (``Capabilities.site_packages``, checked on the host with
  ``importlib.metadata`` against the same directories) and the Python version matches: those
  directories are used as they are, with no build and no network;
- otherwise it is built with ``pip install --target`` into ``<store>/envs/<id>/`` (pytest always
  included), once: a builder holds an exclusive lock on ``<store>/envs/<id>.lock``, installs
  into a temporary directory beside it, marks the tree read-only and renames it into place, so
  concurrent builders (threads or worker processes) never see a half-built tree and only one
  of them builds. A failed build raises ``EnvironmentBuildError`` with pip's last lines.

It does NOT guard against: a requirement whose installed version satisfies the specifier but
behaves differently (the fast path trusts the installed metadata), or a package that writes
outside its tree at import time (the sandbox's read-only view of the tree is what stops that).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from tasksieve.schemas.repo import RepoEnvironment

BUILD_TIMEOUT_S = 900.0
MARKER = "tasksieve-env.json"


class EnvironmentBuildError(Exception):
    """An environment could not be built; the message holds pip's last lines."""


@dataclass(frozen=True)
class ResolvedEnv:
    """How a verification gets its environment: ``paths`` to put on ``sys.path`` inside the
    sandbox (fast path) or ``tree``, a built host directory to mount or pack."""

    env_id: str
    paths: tuple[str, ...] = ()
    tree: Path | None = None

    @property
    def built(self) -> bool:
        return self.tree is not None


def env_id(env: RepoEnvironment) -> str:
    """The environment's identity: sha256 of its canonical JSON (first 24 hex digits)."""
    text = json.dumps(env.model_dump(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def requirements(env: RepoEnvironment) -> list[str]:
    """The requirement lines to install: the environment's, plus pytest when it names none."""
    reqs = list(env.requirements)
    names = set()
    for r in reqs:
        try:
            names.add(Requirement(r).name.lower())
        except InvalidRequirement as exc:
            raise EnvironmentBuildError(f"not a pip requirement: {r!r} ({exc})") from exc
    if "pytest" not in names:
        reqs.append("pytest")
    return reqs


def host_site_paths() -> list[str]:
    """The host directories a sandbox exposes as ``site_packages`` (this interpreter's)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(os.path.realpath(paths[k]) for k in ("purelib", "platlib")))


def satisfied(env: RepoEnvironment, host_paths: list[str]) -> bool:
    """Whether every requirement is installed in ``host_paths`` (and the Python matches)."""
    if env.python != f"{sys.version_info.major}.{sys.version_info.minor}" or not host_paths:
        return False
    installed: dict[str, str] = {}
    for dist in importlib.metadata.distributions(path=host_paths):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        installed.setdefault(name, dist.version)
    for line in requirements(env):
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        version = installed.get(req.name.lower().replace("_", "-"))
        if version is None or (req.specifier and not req.specifier.contains(version, True)):
            return False
    return True


def resolve(env: RepoEnvironment, store_root: Path, sandbox_site: tuple[str, ...]) -> ResolvedEnv:
    """The fast path when the sandbox's packages satisfy ``env``, else the built tree."""
    eid = env_id(env)
    if sandbox_site and satisfied(env, host_site_paths()):
        return ResolvedEnv(eid, paths=tuple(sandbox_site))
    return ResolvedEnv(eid, tree=build(env, store_root))


def build(env: RepoEnvironment, store_root: Path, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """``<store>/envs/<id>/``, built on first use (see the module docstring)."""
    eid = env_id(env)
    envs = Path(store_root) / "envs"
    dest = envs / eid
    if (dest / MARKER).is_file():
        return dest
    if env.python != f"{sys.version_info.major}.{sys.version_info.minor}":
        raise EnvironmentBuildError(
            f"environment wants Python {env.python} but the builder runs "
            f"{sys.version_info.major}.{sys.version_info.minor}; build it with that interpreter"
        )
    envs.mkdir(parents=True, exist_ok=True)
    with open(envs / f"{eid}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / MARKER).is_file():  # another builder finished while we waited
            return dest
        tmp = Path(tempfile.mkdtemp(prefix=f".build-{eid}-", dir=envs))
        try:
            _pip(requirements(env), tmp, timeout_s)
            (tmp / MARKER).write_text(json.dumps(env.model_dump(), sort_keys=True) + "\n")
            _read_only(tmp)
            if dest.exists():  # a stale, unmarked tree from a crashed builder
                _writable(dest)
                shutil.rmtree(dest)
            os.rename(tmp, dest)
        finally:
            if tmp.exists():
                _writable(tmp)
                shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _pip(reqs: list[str], target: Path, timeout_s: float) -> None:
    argv = [sys.executable, "-m", "pip", "install", "--target", str(target), "--no-input"]
    argv += ["--disable-pip-version-check", "--no-warn-script-location", "--quiet", *reqs]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentBuildError(f"pip install timed out after {timeout_s:.0f}s") from exc
    if done.returncode != 0:
        text = (done.stdout + done.stderr).decode("utf-8", "replace").strip().splitlines()
        tail = "\n".join(text[-8:]) or f"exit {done.returncode}"
        raise EnvironmentBuildError(f"pip install {' '.join(reqs)} failed:\n{tail}")


def _read_only(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath) / name
            if not p.is_symlink():
                p.chmod(p.stat().st_mode & ~0o222)
        Path(dirpath).chmod(0o555)


def _writable(root: Path) -> None:
    for dirpath, _dirnames, _filenames in os.walk(root):
        Path(dirpath).chmod(0o755)
