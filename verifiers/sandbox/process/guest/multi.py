"""A multi-sample run of the fork server: K candidates of one task and one tests process.

Inlined into the fork server (``forkserver``) by ``bundle``; standard library only. An ``m``
request carries fds: results pipe, the tests' stderr pipe, status socket, payload memfd, then
one stderr pipe per sample. The payload is ``<Q header length>``, a JSON header (``tests``,
``cands``: one job per sample, each with its uid and its files' names and sizes; ``shared``:
files every candidate reads; ``scratch_bytes``), then the shared bytes, each candidate's bytes
in order, then the tests' bytes.

``multi_init`` is pid 1 of the run's namespaces (made once for all samples, as for a pair). It
reads only the header and the shared files itself; every other file is written by the
process that uses it, after it was forked, so no sample's or tests' bytes are in the memory
image later candidates are forked from. It then:

- forks the tests process once (its own uid, its 0700 directory ``/tmp/.t``, CPU limit
  summed over the samples), which runs the samples one after another (``harness``'s
  ``multi-tests`` mode) and tells init over a pipe when it is done with one
  (``{"end": i, "broken": bool}``);
- forks candidate ``i`` (the first at once, each next one when the one before ended) under
  its own uid, rlimits, no_new_privs and seccomp, in its own 0700 directory ``/tmp/c<i>`` (its
  cwd, HOME and TMPDIR), with only its two pipes to the tests process and its own stderr
  pipe, and starts that sample's wall clock;
- on the wall limit, or on ``end``, kills every process of the sample's uid (``_kill_uid``,
  with the server's CAP_KILL: exactly the processes of that uid in this pid namespace,
  whatever sessions or groups they made), reaps the candidate, removes what the uid left in
  ``/tmp`` and, when the candidate broke its pipe, answers the tests process with how it
  ended (``signal``, ``code``, ``wall``);
- reaps orphans, and exits with the tests process's status once it ends.

So one sample that hangs, crashes, forks without end or fills its scratch is killed and
cleaned up alone: the next sample starts with none of its processes, files or SysV IPC
objects (``ipclimits.remove_ipc``). A candidate
cannot signal or ptrace the tests process or another sample (other uids, ``hidepid=2``),
cannot enter their directories, and holds no fd but its own three.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import struct
import time
from collections.abc import Callable
from typing import Any

from tasksieve.verifiers.sandbox.process.guest.cputime import stat_cpu
from tasksieve.verifiers.sandbox.process.guest.ipclimits import remove_ipc
from tasksieve.verifiers.sandbox.process.guest.nsutil import _keep_only, _write_all, role

_BROKEN_GRACE_S = 1.0  # a candidate that broke its pipe gets this long to be reaped alone


def _payload_head(payload: int) -> tuple[dict[str, Any], int]:
    (hlen,) = struct.unpack("<Q", os.pread(payload, 8, 0))
    return json.loads(os.pread(payload, hlen, 8)), 8 + hlen


def _write_own(payload: int, pos: int, files: list[Any], dirpath: str, uid: int) -> None:
    """Write ``files`` from ``payload`` at ``pos`` into ``dirpath``, owned by ``uid``, 0400."""
    d = os.open(dirpath, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    for name, n in files:
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"bad file name {name!r}")
        f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400, dir_fd=d)
        _write_all(f, os.pread(payload, int(n), pos))
        os.fchown(f, uid, uid)
        os.close(f)
        pos += int(n)
    os.close(d)


def _own_dir(path: str, uid: int) -> None:
    os.mkdir(path, 0o700)
    os.chown(path, uid, uid)


def _kill_uid(uid: int) -> None:
    """SIGKILL every live process of ``uid`` in this pid namespace (never init, other uids).

    Init holds CAP_KILL and sees every process here (``/proc`` is this namespace's, and its
    processes are its own descendants): it kills each one whose real uid is ``uid`` and scans
    again until none is left alive, so one forked meanwhile is caught on a later pass
    (RLIMIT_NPROC bounds how many there are). Zombies are left for init's reaping.
    """
    want = f"Uid:\t{uid}\t".encode()
    for _ in range(10_000):
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or name == "1":
                continue
            try:  # bytes: a text read would import an encoding module into init per run
                with open(f"/proc/{name}/status", "rb") as fh:
                    text = fh.read()
                if want not in text or b"\nState:\tZ" in text:
                    continue
                os.kill(int(name), signal.SIGKILL)
                found = True
            except OSError:
                continue
        if not found:
            return
        time.sleep(0.0002)  # SIGKILL is asynchronous: let the targets die before rescanning


def _scrub(uid: int, keep: set[str]) -> None:
    """Remove what ``uid`` left at the top of /tmp (its own directory is removed whole)."""
    for name in os.listdir("/tmp"):
        if name in keep:
            continue
        path = os.path.join("/tmp", name)
        with contextlib.suppress(OSError):
            if os.lstat(path).st_uid == uid:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)


def multi_init(
    fds: list[int],
    cfg: dict[str, Any],
    server: int,
    setup: Callable[[dict[str, Any], bytes, bool], int],
    become: Callable[[dict[str, Any], list[int], dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Pid 1 of a multi-sample run; returns only in a forked job (tests or a candidate).

    ``setup`` makes the namespaces and the scratch (``forkserver._setup_scratch``), ``become``
    drops a forked child to its job (``forkserver._become_job``).
    """
    results, terr, status, payload, *errs = fds
    role(b"ts-multi-init")
    try:
        _keep_only({*fds, server})
        os.close(server)
        head, pos = _payload_head(payload)
        tests, cands = head["tests"], head["cands"]
        uids = [int(c["uid"]) for c in cands] + [int(tests["uid"])]
        if len(cands) != len(errs) or min(uids) < 1000 or len(set(uids)) != len(uids):
            raise ValueError("refusing privileged, shared or missing uids")
        shared_len = sum(int(n) for _, n in head["shared"])
        body = os.pread(payload, shared_len, pos)
        scratch = {"scratch_bytes": head["scratch_bytes"], "files": head["shared"]}
        scratch["rlimits"] = cands[0]["rlimits"] if cands else {}  # its IPC budget
        os.close(setup(scratch, body, True))
        del body
        starts = []
        pos += shared_len
        for i, c in enumerate(cands):
            _own_dir(f"/tmp/c{i}", int(c["uid"]))
            starts.append(pos)
            pos += sum(int(n) for _, n in c["files"])
        _own_dir("/tmp/.t", int(tests["uid"]))
        to_init, to_tests = os.pipe(), os.pipe()
        links = [(os.pipe(), os.pipe()) for _ in cands]  # (tests -> cand, cand -> tests)
    except BaseException as e:
        os.write(status, (json.dumps({"error": f"multi setup failed: {e}"}) + "\n").encode())
        os._exit(1)
    tests_pid = os.fork()
    if tests_pid == 0:
        role(b"ts-tests")
        try:
            for a, b in links:
                os.close(a[0])
                os.close(b[1])
            for f in (*errs, status, to_init[0], to_tests[1]):
                os.close(f)
            _write_own(payload, pos, tests["files"], "/tmp/.t", int(tests["uid"]))
            os.close(payload)
        except BaseException as e:
            os.write(terr, f"multi tests setup failed: {e!r}\n".encode())
            os._exit(1)
        mine = [to_tests[0], to_init[1], terr, results]
        for a, b in links:
            mine += [b[0], a[1]]
        argv = [*tests["argv"], str(len(cands))]
        job = {**tests, "argv": argv, "cwd": "/tmp/.t", "oom_score_adj": 500}  # after samples
        return become(job, mine, cfg)
    os.close(to_init[1])
    os.close(to_tests[0])
    for f in (results, terr):
        os.close(f)
    for a, b in links:
        os.close(b[0])
        os.close(a[1])
    tests_end = (tests_pid, status, int(tests["uid"]))
    return _supervise(
        tests_end, to_init[0], to_tests[1], cands, links, errs, payload, starts, cfg, become
    )


def _supervise(
    tests: tuple[int, int, int],
    ctl_in: int,
    ctl_out: int,
    cands: list[dict[str, Any]],
    links: list[tuple[tuple[int, int], tuple[int, int]]],
    errs: list[int],
    payload: int,
    starts: list[int],
    cfg: dict[str, Any],
    become: Callable[[dict[str, Any], list[int], dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Init's loop: start each sample once the one before ended, time it, end it when the
    tests process says so (answering only when the candidate broke its pipe: only then does
    the way it ended matter to the verdict); before exiting, report each sample's CPU time on
    the status socket (``tests``: its pid, that socket, its uid)."""
    tests_pid, status, tests_uid = tests
    ended: dict[int, int] = {}  # pid -> wait status, for pids init reaped early
    cpu: dict[int, float] = {}  # uid -> CPU seconds of its processes init has reaped
    shares: list[float | None] = []  # each sample's part of the tests process's CPU time
    tests_cpu: float | None = 0.0
    running: dict[str, Any] | None = None  # i, pid, deadline, wall
    buf = b""
    upcoming = 0
    while True:
        if running is None and upcoming < len(cands):
            i, upcoming = upcoming, upcoming + 1
            pid = os.fork()
            if pid == 0:
                return _candidate(i, cands[i], links, errs, payload, starts[i], cfg, become)
            (a, b), err = links[i], errs[i]
            for f in (a[0], b[1], err):
                os.close(f)
            wall = float(cands[i].get("wall_s", 10.0))
            running = {"i": i, "pid": pid, "deadline": time.monotonic() + wall, "wall": False}
        timed = running is not None and not running["wall"]
        left = max(0.0, running["deadline"] - time.monotonic()) if timed and running else None
        ready = select.select([ctl_in], [], [], left)[0]
        ended.update(_reap_all(cpu))
        gone = tests_pid in ended  # what it wrote before it exited is still read below
        if running is not None and not running["wall"] and time.monotonic() >= running["deadline"]:
            _kill_uid(int(cands[running["i"]]["uid"]))  # the tests see EOF and say "end"
            running["wall"] = True
        if not ready and not gone:
            continue
        chunk = _read_now(ctl_in) if gone else os.read(ctl_in, 4096)
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            if "end" in msg and running is not None and int(msg["end"]) == running["i"]:
                # the tests process's CPU so far: from /proc while it runs, wait4's once reaped
                now = cpu.get(tests_uid, 0.0) if tests_pid in ended else stat_cpu(tests_pid)
                share = None if now is None or tests_cpu is None else now - tests_cpu
                shares.append(share)
                tests_cpu = now
                broken = bool(msg.get("broken"))
                rep = _end(running, cands, (ended, cpu), broken)
                if broken:
                    with contextlib.suppress(OSError):  # the tests process may be gone
                        os.write(ctl_out, (json.dumps(rep) + "\n").encode())
                running = None
        if gone or not chunk:
            break
    if running is not None:  # the tests process is gone: no sample outlives it
        _kill_uid(int(cands[running["i"]]["uid"]))
    with contextlib.suppress(OSError):
        os.kill(tests_pid, signal.SIGKILL)
    st = ended.get(tests_pid)
    while st is None:
        try:
            got = _reap_one(cpu, True)
        except ChildProcessError:
            os._exit(1)
        if got is not None and got[0] == tests_pid:
            st = got[1]
    _reap_all(cpu)  # what the last kills left: every sample's processes are zombies by now
    _report_cpu(status, cands, cpu, shares)
    os._exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))


def _report_cpu(
    status: int, cands: list[dict[str, Any]], cpu: dict[int, float], shares: list[float | None]
) -> None:
    """Tell the host each sample's CPU seconds: its uid's processes plus its share of the tests
    process (None for a sample whose share could not be read or that never ended)."""
    out: list[float | None] = []
    for i, c in enumerate(cands):
        share = shares[i] if i < len(shares) else None
        out.append(None if share is None else round(cpu.get(int(c["uid"]), 0.0) + share, 6))
    with contextlib.suppress(OSError):
        os.write(status, (json.dumps({"samples_cpu_s": out}) + "\n").encode())
    os.close(status)


def _read_now(fd: int) -> bytes:
    """What ``fd`` holds now, without waiting (the tests process has exited; a child it left
    may still hold the pipe open, so EOF may never come)."""
    out = b""
    while len(out) < 1 << 20 and select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        out += chunk
    return out


def _reap_one(cpu: dict[int, float], block: bool) -> tuple[int, int] | None:
    """Reap one ended child (waiting for one with ``block``) and add its CPU time, with that
    of the children it reaped, to its real uid's: (pid, wait status), or None when none has
    ended. ``waitid`` with ``WNOWAIT`` names the child and its uid, ``wait4`` then reaps it."""
    flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, flags)
            if info is None:
                return None
            pid, st, use = os.wait4(info.si_pid, 0)
        except InterruptedError:
            continue
        cpu[info.si_uid] = cpu.get(info.si_uid, 0.0) + use.ru_utime + use.ru_stime
        return pid, st


def _reap_all(cpu: dict[int, float]) -> dict[int, int]:
    got: dict[int, int] = {}
    while True:
        try:
            one = _reap_one(cpu, False)
        except ChildProcessError:
            return got
        if one is None:
            return got
        got[one[0]] = one[1]


def _end(
    run: dict[str, Any],
    cands: list[dict[str, Any]],
    reaped: tuple[dict[int, int], dict[int, float]],
    broken: bool,
) -> dict[str, Any]:
    """End sample ``run``: let a broken candidate be reaped alone, kill its uid, clean up."""
    pid, uid = run["pid"], int(cands[run["i"]]["uid"])
    ended, cpu = reaped
    st = ended.pop(pid, None)
    if st is None and broken and not run["wall"]:
        until = time.monotonic() + _BROKEN_GRACE_S
        while st is None and time.monotonic() < until:
            ended.update(_reap_all(cpu))
            st = ended.pop(pid, None)
            if st is None:
                time.sleep(0.005)
    killed = st is None
    _kill_uid(uid)
    while st is None:
        try:
            _, s, use = os.wait4(pid, 0)
            cpu[uid] = cpu.get(uid, 0.0) + use.ru_utime + use.ru_stime
        except InterruptedError:
            continue
        except ChildProcessError:
            s = 9
        st = s
    remove_ipc(uid)  # its SysV objects too: the next sample finds none of them
    _scrub(uid, {".t"} | {f"c{j}" for j in range(len(cands)) if j != run["i"]})
    sig = code = None
    if not killed or run["wall"]:
        sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else None
        code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else None
    return {"signal": sig, "code": code, "wall": run["wall"]}


def _candidate(
    i: int,
    cand: dict[str, Any],
    links: list[tuple[tuple[int, int], tuple[int, int]]],
    errs: list[int],
    payload: int,
    pos: int,
    cfg: dict[str, Any],
    become: Callable[[dict[str, Any], list[int], dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Candidate ``i``'s process: its own files, then its job on its own three fds."""
    role(b"ts-candidate")
    (a, b), err = links[i], errs[i]
    here = f"/tmp/c{i}"
    try:
        _write_own(payload, pos, cand["files"], here, int(cand["uid"]))
    except BaseException as e:
        os.write(err, f"sandbox: sample setup failed: {e!r}\n".encode())
        os._exit(126)
    env = {**cand["env"], "HOME": here, "TMPDIR": here}
    return become({**cand, "cwd": here, "env": env}, [a[0], b[1], err], cfg)
