"""Isolation probes remembered per boot, so a sandbox start need not repeat a cold probe run.

A cold probe (``ProcessSandbox._probe`` without the fork server) starts one real run of a
namespace method (bwrap, or unshare plus the guest) to learn whether it works here; that
costs a bwrap or unshare process and a fresh interpreter on every start of the command.
A method that worked is recorded in a per-user cache directory under a key made of
everything the answer depends on, read fresh on every start:

- the boot (``/proc/sys/kernel/random/boot_id``) and the kernel release and build;
- the user and mount namespaces this process lives in (their inode numbers: another container
  or ``unshare`` session is another key) and its effective uid and gid;
- the knobs that switch user namespaces and confinement on or off while the machine runs
  (``USERNS_KNOBS``: ``unprivileged_userns_clone``, ``max_*_namespaces``, the AppArmor
  user-namespace restriction and its policy revision, SELinux enforcement, seccomp actions);
- each system program the method runs (path, inode, size, mode, mtime: an upgrade or a
  re-install of bwrap is another key, as would be its version) and the interpreter's;
- the mount plan (bind arguments) and the seccomp filter's bytes; the method's name.

Only successes are recorded: a failed probe runs again next time. A stale record can only
make runs fail loudly (``infra_error`` "sandbox start failed"), never run them with less
isolation: every run still applies its method's namespaces itself and fails if it cannot.
The directory is created 0700; records not owned by this user, or not a regular file, are
ignored. ``TASKSIEVE_PROBE_CACHE`` names another directory, or ``off`` to always probe.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

CACHE_ENV = "TASKSIEVE_PROBE_CACHE"
USERNS_KNOBS = (
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/user/max_mnt_namespaces",
    "/proc/sys/user/max_pid_namespaces",
    "/proc/sys/user/max_net_namespaces",
    "/proc/sys/user/max_ipc_namespaces",
    "/proc/sys/user/max_uts_namespaces",
    "/proc/sys/kernel/seccomp/actions_avail",
    "/sys/kernel/security/apparmor/revision",
    "/sys/fs/selinux/enforce",
)
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def cache_dir() -> Path | None:
    """Where records live (``$TASKSIEVE_PROBE_CACHE``, else the user cache dir); None: off."""
    env = os.environ.get(CACHE_ENV, "")
    if env.lower() == "off":
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tasksieve" / "probes"


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(4096).decode(errors="replace").strip()
    except OSError:
        return None


def _identity(path: str | None) -> list[object] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return [path, "missing"]
    return [path, st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns]


def _ns(kind: str) -> int | None:
    try:
        return os.stat(f"/proc/self/ns/{kind}").st_ino
    except OSError:
        return None


def probe_key(
    method: str,
    programs: list[str | None],
    python: str,
    binds: list[str],
    seccomp: bytes | None,
    knobs: tuple[str, ...] = USERNS_KNOBS,
) -> str | None:
    """The record's name for this probe now, or None when the boot cannot be identified."""
    boot = _read(BOOT_ID)
    if not boot:
        return None
    uname = os.uname()
    parts = {
        "boot": boot,
        "kernel": [uname.release, uname.version, uname.machine],
        "ns": [_ns("user"), _ns("mnt")],
        "ids": [os.geteuid(), os.getegid()],
        "knobs": {k: _read(k) for k in knobs},
        "programs": [_identity(p) for p in programs],
        "python": _identity(python),
        "binds": binds,
        "seccomp": hashlib.sha256(seccomp or b"").hexdigest(),
        "method": method,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def known_good(key: str | None, where: Path | None = None) -> bool:
    """Whether a probe with this key succeeded before (in a record this user owns)."""
    where = where if where is not None else cache_dir()
    if key is None or where is None:
        return False
    try:
        st = os.lstat(where / f"{key}.ok")
    except OSError:
        return False
    return st.st_uid == os.geteuid() and (st.st_mode & 0o170000) == 0o100000


def remember(key: str | None, method: str, where: Path | None = None) -> None:
    """Record a successful probe; a cache that cannot be written is skipped silently."""
    where = where if where is not None else cache_dir()
    if key is None or where is None:
        return
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = where / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(method + "\n")
        os.replace(tmp, where / f"{key}.ok")
    except OSError:
        return


def forget(where: Path | None = None) -> int:
    """Remove every record (``doctor`` does, before it probes for real); how many went."""
    where = where if where is not None else cache_dir()
    gone = 0
    if where is None or not where.is_dir():
        return gone
    for rec in where.glob("*.ok"):
        try:
            rec.unlink()
            gone += 1
        except OSError:
            continue
    return gone
