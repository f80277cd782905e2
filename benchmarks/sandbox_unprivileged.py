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
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.humaneval_jobs import jobs
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


class Child:
    """The unprivileged child: started as ``nobody``; ``ask`` runs one timed pass in it."""

    def __init__(self, n: int) -> None:
        unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
        if os.geteuid() != 0 or not unshare or not setpriv:
            raise RuntimeError("needs root, unshare and setpriv")
        here = str(Path(__file__).resolve().parent.parent)
        real_py = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
        need = [real_py, sys.prefix, here, os.path.realpath(sys.prefix)]
        self.stash = tempfile.mkdtemp(prefix="bench-stash-")
        env = ["env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", f"PYTHONPATH={here}"]
        drop = [setpriv, f"--reuid={USER}", f"--regid={GROUP}", "--clear-groups", "--inh-caps=-all"]
        child = [*drop, *env, sys.executable, "-m", "benchmarks.sandbox_unprivileged", str(n)]
        script = mount_script(need, self.stash) + "\nexec " + shlex.join(child)
        self.proc = subprocess.Popen(
            [unshare, "--mount", "--propagation", "private", "sh", "-c", script],
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


def serve(n: int) -> None:
    """The child: build our verifier, then answer one timed pass per line of stdin."""
    work = jobs(n)
    check, describe, close = verifier_checker("process", work)
    print(json.dumps({**describe, "uid": os.geteuid()}), flush=True)
    try:
        for line in sys.stdin:
            p = timed_pass(check, len(work), int(line))
            reply = {"rate": p.rate, "cpu_ms": p.cpu_ms, "verdicts": p.verdicts}
            print(json.dumps(reply), flush=True)
    finally:
        close()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
