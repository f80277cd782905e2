"""Our process backend as an unprivileged user, driven round by round by the sandbox benchmark.

The fork server of the ``process`` backend needs root (it holds CAP_SYS_ADMIN and friends
inside bubblewrap to give each run its own uid); without root the backend starts one
bubblewrap sandbox and a fresh interpreter per process. To measure that path in the same run,
the benchmark (as root) starts this module as a child under ``setpriv`` as ``nobody``, in a
private mount namespace where directories on the way to the interpreter, the virtualenv and
the checkout that ``nobody`` may not traverse are replaced by a world-traversable tmpfs with
only the needed entry bound back (read-only views of the same files, nothing on the host
changes). The child then answers ``<workers>`` lines with one timed pass each.

    (root) python -m benchmarks.sandbox_throughput --setups nonroot   # starts this
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.humaneval_jobs import jobs
from benchmarks.sandbox_batch import batch_setup
from benchmarks.sandbox_setups import verifier_checker
from benchmarks.timing import timed_pass

USER, GROUP = "nobody", "nogroup"


def blocked(paths: list[str]) -> list[tuple[str, str]]:
    """(dir, entry) pairs where others cannot traverse ``dir`` on the way to a path."""
    out: list[tuple[str, str]] = []
    for p in paths:
        parts = Path(p).parts
        for i in range(1, len(parts) - 1):
            d = os.path.join(*parts[: i + 1])
            if not os.stat(d).st_mode & stat.S_IXOTH:
                pair = (d, parts[i + 1])
                if pair not in out:
                    out.append(pair)
    return out


def mount_script(paths: list[str], stash: str) -> str:
    """Shell commands that make ``paths`` reachable for others inside a new mount namespace."""
    lines = ["set -e"]
    by_dir: dict[str, list[str]] = {}
    for d, entry in blocked(paths):
        by_dir.setdefault(d, []).append(entry)
    for k, (d, entries) in enumerate(by_dir.items()):
        for m, e in enumerate(entries):
            lines.append(f"mkdir -p {stash}/{k}_{m}")
            lines.append(f"mount --bind {shlex.quote(os.path.join(d, e))} {stash}/{k}_{m}")
        lines.append(f"mount -t tmpfs -o mode=0755,size=1m tmpfs {shlex.quote(d)}")
        for m, e in enumerate(entries):
            target = shlex.quote(os.path.join(d, e))
            lines.append(f"mkdir -p {target}")
            lines.append(f"mount --bind {stash}/{k}_{m} {target}")
    return "\n".join(lines)


SUB_START, SUB_COUNT = 700_000_000, 65536  # the range ``nobody`` gets, in its namespace only


def subid_script(stash: str, uid: int, start: int = SUB_START, count: int = SUB_COUNT) -> str:
    """Shell commands that give ``uid`` subordinate ids inside a new mount namespace only.

    ``newuidmap`` and ``newgidmap`` read ``/etc/subuid`` and ``/etc/subgid`` in the mount
    namespace of their caller, so files bound over those paths there grant the range without
    changing the host's (a copy of /etc is bound over /etc first where the files are absent).
    """
    entry = shlex.quote(f"{uid}:{start}:{count}")
    lines = []
    if not (os.path.exists("/etc/subuid") and os.path.exists("/etc/subgid")):
        lines += [f"cp -a /etc {stash}/etc", f"touch {stash}/etc/subuid {stash}/etc/subgid",
                  f"mount --bind {stash}/etc /etc"]  # fmt: skip
    for name in ("subuid", "subgid"):
        lines += [f"echo {entry} > {stash}/{name}", f"mount --bind {stash}/{name} /etc/{name}"]
    return "\n".join(lines)


def as_nobody(argv: list[str], env: dict[str, str], stash: str, subids: bool) -> list[str]:
    """The command that runs ``argv`` as ``nobody`` in a private mount namespace where this
    interpreter and checkout are reachable (and, with ``subids``, ``nobody`` has a range)."""
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    if os.geteuid() != 0 or not unshare or not setpriv:
        raise RuntimeError("needs root, unshare and setpriv")
    here = str(Path(__file__).resolve().parent.parent)
    real_py = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    need = [real_py, sys.prefix, here, os.path.realpath(sys.prefix)]
    drop = [setpriv, f"--reuid={USER}", f"--regid={GROUP}", "--clear-groups", "--inh-caps=-all"]
    env_args = ["env", "-i", *(f"{k}={v}" for k, v in env.items())]
    script = [mount_script(need, stash)]
    if subids:
        script.append(subid_script(stash, pwd.getpwnam(USER).pw_uid))
    script.append("exec " + shlex.join([*drop, *env_args, *argv]))
    return [unshare, "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)]


class Child:
    """The unprivileged child: started as ``nobody``; ``ask`` runs one timed pass in it.

    ``subids``: ``nobody`` gets a subordinate range (so the sandbox runs its fork server in a
    user namespace); ``batch``: the child times the verify stage's path (``verify_batch`` per
    task, ``benchmarks.sandbox_batch``) instead of one verification per solution.
    """

    def __init__(self, n: int, subids: bool = False, batch_k: int = 0) -> None:
        here = str(Path(__file__).resolve().parent.parent)
        self.stash = tempfile.mkdtemp(prefix="bench-stash-")
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": here}
        child = [sys.executable, "-m", "benchmarks.sandbox_unprivileged", str(n), str(batch_k)]
        self.proc = subprocess.Popen(
            as_nobody(child, env, self.stash, subids),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=here,
        )
        assert self.proc.stdout
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            raise RuntimeError(f"unprivileged child exited with {self.proc.returncode}")
        self.describe: dict[str, object] = json.loads(line)

    def ask(self, workers: int) -> tuple[float, float, list[bool]]:
        """One timed pass in the child: rate, CPU ms per execution, verdicts."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{workers}\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return reply["rate"], reply["cpu_ms"], reply["verdicts"]

    def stop(self) -> None:
        """Close the child's stdin, wait for it to shut its sandbox down, drop the stash dir."""
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.stash, ignore_errors=True)


def serve(n: int, batch_k: int) -> None:
    """The child: build our verifier, then answer one timed pass per line of stdin."""
    work = jobs(n)
    if batch_k:
        label, run, note, close = batch_setup(work, batch_k)
        describe: dict[str, object] = {"setup": label, "sandbox": note}
    else:
        check, describe, close = verifier_checker("process", work)
        run = lambda workers: timed_pass(check, len(work), workers)  # noqa: E731
    print(json.dumps({**describe, "uid": os.geteuid()}), flush=True)
    try:
        for line in sys.stdin:
            p = run(int(line))
            reply = {"rate": p.rate, "cpu_ms": p.cpu_ms, "verdicts": p.verdicts}
            print(json.dumps(reply), flush=True)
    finally:
        close()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
