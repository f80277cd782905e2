"""Guest: one session step: unpack the session's files, run a command, pack the files again.

Runs inside the sandbox (standard library only) as ``python -I -S session_exec.py``. It
reads ``.tasksieve_in.json`` ({"files": {name: base64}, "argv": [...], "timeout_s": t,
"max_bytes": n}), writes the files into the scratch directory (so they are the run's own
and writable), runs ``argv`` with the run's stdio, then writes ``.tasksieve_out.json``:
{"files": {...}, "dropped": [names]} holding every regular file under the scratch directory
(symlinks and other special files are skipped, and files beyond ``max_bytes`` in total are
dropped), and exits with the command's exit status (124 when it timed out). Nothing here is
a security boundary, nor trusted: the code it runs can overwrite the report or kill this
process, so the host measures the status and counts the files itself.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys

IN_NAME = ".tasksieve_in.json"
OUT_NAME = ".tasksieve_out.json"
SELF_NAME = ".tasksieve_exec.py"
RESERVED = (IN_NAME, OUT_NAME, SELF_NAME)


def unpack(files: dict[str, str]) -> None:
    """Write each file (base64 content) below the current directory."""
    for name, data in files.items():
        parent = os.path.dirname(name)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(name, "wb") as fh:
            fh.write(base64.b64decode(data))


def pack(max_bytes: int) -> tuple[dict[str, str], list[str]]:
    """Every regular file below the current directory as base64, and the names over budget."""
    out: dict[str, str] = {}
    dropped: list[str] = []
    total = 0
    for root, dirs, names in os.walk(".", followlinks=False):
        dirs.sort()
        for n in sorted(names):
            path = os.path.normpath(os.path.join(root, n))
            if path in RESERVED or os.path.islink(path) or not os.path.isfile(path):
                continue
            size = os.path.getsize(path)
            if total + size > max_bytes:
                dropped.append(path)
                continue
            with open(path, "rb") as fh:
                out[path] = base64.b64encode(fh.read()).decode("ascii")
            total += size
    return out, dropped


def run(argv: list[str], timeout_s: float) -> tuple[int | None, bool]:
    """Run ``argv`` in its own process group; kill the group at the timeout."""
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s), False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None, True


def main() -> int:
    with open(IN_NAME, encoding="utf-8") as fh:
        request = json.load(fh)
    unpack(request["files"])
    sys.stdout.flush()
    try:
        code, timed_out = run(request["argv"], float(request["timeout_s"]))
    except OSError as exc:
        print(f"cannot start {request['argv'][:1]}: {exc}", file=sys.stderr)
        code, timed_out = 127, False
    files, dropped = pack(int(request["max_bytes"]))
    with open(OUT_NAME, "w", encoding="utf-8") as fh:
        json.dump({"files": files, "dropped": dropped}, fh)
    if timed_out or code is None:
        return 124
    return code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    sys.exit(main())
