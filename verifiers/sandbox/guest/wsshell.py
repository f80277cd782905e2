"""Guest: the persistent shell of a workspace session, and fresh processes beside it.

Standard library only (inlined into the guest agent). The agent may be pid 1 of its pid
namespace, so it reaps every child itself (``Children``) and waits on pidfds, never through
``subprocess``. ``Shell`` is one ``bash --noprofile --norc`` with job control on (``set -m``),
so each background job has a process group of its own. A command is sent as ``eval '...'``
(one single-quoted word: bash reads a script from a pipe one byte at a time, so the word is
kept as short as the command allows) with stdin from /dev/null, so a syntax error or a command
reading stdin cannot eat the next one; after it the shell reports its status, its background
jobs' process groups and its working directory on a private status pipe, with builtins only
(no subshell, so no fork per command beyond the command's own). A command over its wall time
or output cap is stopped by killing every process group of the shell's session except those
background jobs, the shell included; the next command then starts a new shell in the last
working directory (exported variables of the old shell are lost then). A shell that exits
(``exit``, ``kill $$``) is replaced the same way at the next command.

``start_fresh`` forks a process outside the shell (same drop to the unprivileged user); when
it ends, or its time runs out, everything left in its session is killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable

_READ = 65536


class Children:
    """Reaps every child of this process (a namespace's init inherits orphans)."""

    def __init__(self) -> None:
        self.status: dict[int, int] = {}

    def reap(self) -> None:
        """Collect every exited child's status without blocking."""
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.status[pid] = os.waitstatus_to_exitcode(st)

    def take(self, pid: int) -> int | None:
        """``pid``'s exit code (negative: killed by that signal) once it has exited."""
        self.reap()
        return self.status.pop(pid, None)


def session_groups(sid: int) -> set[int]:
    """The process groups of every process in session ``sid`` (read from /proc)."""
    groups: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:
            groups.add(int(fields[2]))
    return groups


def kill_groups(groups: set[int]) -> None:
    """SIGKILL each process group in ``groups``."""
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def bash_quote(text: str) -> str:
    """``text`` as one bash word: single-quoted (every byte literal; a ``'`` as ``'\\''``),
    or, for text holding a NUL (which no shell word can), a ``$'...'`` word of ``\\xHH``
    escapes, which bash cuts at the NUL as it would any other way of passing it."""
    if "\0" not in text:
        return "'" + text.replace("'", "'\\''") + "'"
    safe = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-./=:,"
    return "$'" + "".join(chr(b) if b in safe else f"\\x{b:02x}" for b in text.encode()) + "'"


# After each command: its status, then its background jobs (``jobs -p``, one per line) and its
# working directory, on fd 3, as ``JOBS \x1f RC \x1f PWD \x1e \n``; a group, not a subshell, and
# ``builtin`` so that a function the agent names ``jobs`` or ``printf`` does not answer instead.
_STATUS = (
    "__ts_rc=$?; { builtin jobs -p; builtin printf '\\037%s\\037%s\\036\\n' \"$__ts_rc\" "
    '"$PWD"; } >&3\n'
)
_END = b"\x1e\n"


def parse_status(status: bytes) -> tuple[int, set[int], str]:
    """(exit code, background jobs' process groups, working directory) of a status report."""
    jobs, rc, cwd = status[: -len(_END)].decode(errors="replace").split("\x1f", 2)
    return int(rc), {int(j) for j in jobs.split() if j.isdigit()}, cwd


def _fork(
    argv: list[str], env: dict[str, str], cwd: str, fds: dict[int, int], drop: Callable[[], None]
) -> int:
    """Fork ``argv`` with ``fds`` (target -> source) as its only descriptors, after ``drop``."""
    pid = os.fork()
    if pid != 0:
        return pid
    try:
        for target, source in fds.items():
            os.dup2(source, target + 100)
        for target in fds:
            os.dup2(target + 100, target)
        os.closerange(max(fds) + 1, 1 << 20)
        drop()
        os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    except BaseException as e:  # report it, whatever it was, and leave the child
        with contextlib.suppress(OSError):
            os.write(2, f"workspace: cannot start {argv[0]!r}: {e}\n".encode())
    os._exit(127)


class Output:
    """Reads a command's stdout and stderr under one cap (``over`` once it was passed)."""

    def __init__(self, out_fd: int, err_fd: int, cap: int) -> None:
        self.fds = {out_fd: bytearray(), err_fd: bytearray()}
        self.out_fd, self.err_fd, self.cap, self.over = out_fd, err_fd, cap, False
        for fd in self.fds:
            os.set_blocking(fd, False)

    def read(self, fd: int) -> None:
        """Take what ``fd`` holds now (drops the part over the cap)."""
        while True:
            try:
                chunk = os.read(fd, _READ)
            except BlockingIOError:
                return
            if not chunk:
                return
            buf = self.fds[fd]
            room = self.cap - len(self.fds[self.out_fd]) - len(self.fds[self.err_fd])
            if len(chunk) > room:
                self.over = True
            buf += chunk[: max(room, 0)]

    def drain(self) -> None:
        """Read whatever both pipes hold now."""
        for fd in self.fds:
            self.read(fd)

    def result(self) -> tuple[bytes, bytes]:
        """(stdout, stderr) read so far."""
        return bytes(self.fds[self.out_fd]), bytes(self.fds[self.err_fd])


def wait_output(
    output: Output, waits: list[int], deadline: float, done: Callable[[int], bool]
) -> str | None:
    """Read ``output`` until ``done(fd)`` says one of ``waits`` finished it (None), the
    deadline passes (``wall``) or the cap is passed (``output``)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "wall"
        ready, _, _ = select.select([*output.fds, *waits], [], [], min(left, 1.0))
        for fd in ready:
            if fd in output.fds:
                output.read(fd)
        if output.over:
            return "output"
        for fd in ready:
            if fd in waits and done(fd):
                output.drain()
                return "output" if output.over else None


class Shell:
    """The session's persistent bash (see the module doc)."""

    def __init__(
        self, env: dict[str, str], cwd: str, drop: Callable[[], None], kids: Children
    ) -> None:
        self.env, self.cwd, self.drop, self.kids = env, cwd, drop, kids
        self.in_r, self.in_w = os.pipe()
        self.out_r, self.out_w = os.pipe()
        self.err_r, self.err_w = os.pipe()
        self.st_r, self.st_w = os.pipe()
        os.set_blocking(self.st_r, False)
        self.pid = 0
        self.pidfd = -1
        self.jobs: set[int] = set()  # process groups of background jobs (kept on a kill)
        self.note = b""  # why the last shell went away, for the next command's stderr

    def start(self) -> None:
        """A new bash in ``cwd``, with job control on."""
        fds = {0: self.in_r, 1: self.out_w, 2: self.err_w, 3: self.st_w}
        argv = ["bash", "--noprofile", "--norc"]
        self.pid = _fork(argv, self.env, self.cwd, fds, self.drop)
        self.pidfd = os.pidfd_open(self.pid)
        self._send("set -m\n")

    def _send(self, text: str) -> None:
        data = memoryview(text.encode())
        while data:
            data = data[os.write(self.in_w, data) :]

    def _gone(self) -> int | None:
        """The shell's exit code if it has exited (and its pidfd closed), else None."""
        code = self.kids.take(self.pid)
        if code is not None:
            os.close(self.pidfd)
            self.pid, self.pidfd = 0, -1
        return code

    def stop(self) -> None:
        """Kill the shell and everything in its session but the background jobs."""
        if self.pid:
            kill_groups(session_groups(self.pid) - self.jobs)
            with contextlib.suppress(OSError):
                os.waitpid(self.pid, 0)
            os.close(self.pidfd)
            self.pid, self.pidfd = 0, -1

    def exec(self, cmd: str, deadline: float, cap: int) -> dict[str, object]:
        """Run ``cmd`` in the shell; (exit code, stdout, stderr, why it was stopped)."""
        if self.pid and self.kids.status.get(self.pid) is not None:
            self._gone()
        note, self.note = self.note, b""
        if not self.pid:
            self.start()
        output = Output(self.out_r, self.err_r, cap)
        output.drain()  # what background jobs wrote since the last command is theirs
        output.fds = {self.out_r: bytearray(), self.err_r: bytearray(note)}
        status = bytearray()
        self._send(f"eval {bash_quote(cmd)} </dev/null 3>&-; {_STATUS}")
        code: list[int | None] = [None]

        def done(fd: int) -> bool:
            if fd == self.st_r:
                with contextlib.suppress(BlockingIOError):
                    status.extend(os.read(self.st_r, _READ))
                return status.endswith(_END)
            self.kids.reap()
            if self.kids.status.get(self.pid) is None:
                return False
            code[0] = self._gone()
            return True

        why = wait_output(output, [self.st_r, self.pidfd], deadline, done)
        out, err = output.result()
        if why is not None:
            self.stop()
            return {"exit": None, "out": out, "err": err, "ended": why}
        if code[0] is not None or not status:
            died = code[0] if code[0] is None or code[0] >= 0 else 128 - code[0]
            self.note = f"[the shell exited ({died}); a new one starts here]\n".encode()
            return {"exit": died, "out": out, "err": err, "ended": None}
        rc, self.jobs, cwd = parse_status(bytes(status))
        self.cwd = cwd or self.cwd
        return {"exit": rc, "out": out, "err": err, "ended": None}


def run_fresh(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    drop: Callable[[], None],
    kids: Children,
    deadline: float,
    cap: int,
) -> dict[str, object]:
    """Run ``argv`` as a fresh process (its own session); kill what is left when it ends."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    null = os.open("/dev/null", os.O_RDONLY)
    try:
        pid = _fork(argv, env, cwd, {0: null, 1: out_w, 2: err_w}, drop)
    finally:
        for fd in (null, out_w, err_w):
            os.close(fd)
    pidfd = os.pidfd_open(pid)
    output = Output(out_r, err_r, cap)
    code: list[int | None] = [None]

    def done(fd: int) -> bool:
        code[0] = kids.take(pid)
        return code[0] is not None

    why = wait_output(output, [pidfd], deadline, done)
    kill_groups(session_groups(pid) | {pid})
    if code[0] is None:
        with contextlib.suppress(ChildProcessError):
            code[0] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    for fd in (out_r, err_r, pidfd):
        os.close(fd)
    out, err = output.result()
    exit_code = None if why == "wall" else code[0]
    if exit_code is not None and exit_code < 0:
        exit_code = 128 - exit_code
    return {"exit": exit_code, "out": out, "err": err, "ended": why}
