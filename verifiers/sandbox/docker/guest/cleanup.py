"""Guest: what the docker server does after each run: kill, reap, find leftovers, collect files.

Runs inside the container as part of the server (inlined by ``verifiers.sandbox.guest.bundle``;
standard library only). Files are opened without following symlinks and read up to a cap.
It does NOT undo what a run changed inside files it was allowed to write; a container with
leftovers is replaced by the host instead.
"""

from __future__ import annotations

import base64
import contextlib
import os
import select
import signal
import stat

SCRATCH = "/scratch"
UID = os.getuid()
_CHUNK = 65536


def _others(spare: set[int]) -> list[int]:
    """Live (non-zombie) processes of this uid, except the ones in ``spare``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in spare:
            continue
        if process_state(int(name)) not in ("", "Z", "X"):
            found.append(int(name))
    return found


def process_state(pid: int) -> str:
    """The state letter of ``pid`` when its real uid is ours, else "" (the owner of ``/proc/N``
    is root for non-dumpable processes, so the uid is read from ``status``)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            fields = dict(ln.split(b":", 1) for ln in fh.read().splitlines() if b":" in ln)
        if int(fields[b"Uid"].split()[0]) != UID:
            return ""
        return fields[b"State"].split()[0].decode()
    except (OSError, KeyError, ValueError, IndexError):
        return ""


def kill_all(spare: set[int]) -> int:
    """SIGSTOP then SIGKILL every other process of this uid until none is left; the first count."""
    first = -1
    for i in range(2000):
        pids = _others(spare)
        if first < 0:
            first = len(pids)
        if not pids:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for p in pids:
                with contextlib.suppress(OSError):
                    os.kill(p, sig)
        reap()
        if i > 3:
            select.select([], [], [], 0.002)
    return first


def reap() -> list[tuple[int, int]]:
    """Reap every exited child (orphans of runs are re-parented here)."""
    done: list[tuple[int, int]] = []
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done.append((pid, st))


def remove_owned(top: str) -> None:
    """Remove what this uid can under ``top`` (making its own dirs searchable first)."""
    stack: list[str] = [top]
    order: list[str] = []
    while stack and len(order) < 100_000:
        path = stack.pop()
        order.append(path)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                continue
            if st.st_uid == UID:
                os.chmod(path, 0o700)
            stack.extend(os.path.join(path, n) for n in os.listdir(path))
        except OSError:
            continue
    for path in reversed(order[1:]):
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.rmdir(path)
            else:
                os.unlink(path)


def leftovers(cwd: str) -> list[str]:
    """What a run left behind: own files in its dir, other scratch entries, queues, SysV IPC."""
    found: list[str] = []
    for root, dirs, files in os.walk(cwd):
        for n in dirs + files:
            with contextlib.suppress(OSError):
                if os.lstat(os.path.join(root, n)).st_uid != 0:
                    found.append(os.path.join(root, n))
        if len(found) > 20:
            break
    base = os.path.basename(cwd)
    found += [f"{SCRATCH}/{n}" for n in os.listdir(SCRATCH) if n != base]
    with contextlib.suppress(OSError):
        found += [f"/dev/mqueue/{n}" for n in os.listdir("/dev/mqueue")]
    for kind in ("shm", "msg", "sem"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as fh:
            found += [f"sysv {kind}"] * max(0, len(fh.read().splitlines()) - 1)
    return found


def collect(cwd: str, names: list[str], cap: int) -> dict[str, str]:
    """Regular files ``names`` of the run dir (no final symlink), base64, each at most ``cap``."""
    got: dict[str, str] = {}
    for name in names:
        try:
            fd = os.open(os.path.join(cwd, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            data = bytearray()
            while len(data) <= cap and (chunk := os.read(fd, _CHUNK)):
                data += chunk
            if len(data) <= cap:
                got[name] = base64.b64encode(data).decode()
        except OSError:
            pass
        finally:
            os.close(fd)
    return got


# --------------------------------------------------------------------------- the server
