"""The root helper of a docker sandbox container: writes each run's input files root-owned.

Started once per container by ``docker exec -u 0:0 python3 -I -S -c <this source>`` (root
without capabilities: it owns what it creates but cannot override permissions). It reads
JSON lines ``{"op": "files", "dir": "/scratch/r-...", "files": {name: base64}}``, removes the
earlier runs' dirs, creates the new one and its files (dirs 0755, files 0444, no link
followed, nothing pre-existing reused), makes the run dir sticky and world-writable, and
answers with one ``f`` frame (``{"ok": true}`` or ``{"error": ...}``); ``{"op": "ping"}``
answers ``{"ok": true}``. Runs (uid 65534) can then create files beside their inputs but not
change them. Standard library only.

It does NOT guard against: a run that leaves files it owns inside an earlier run dir (the
host recycles such containers first); or names the host did not check (it refuses absolute
names and ``..`` again, nothing else).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import stat
import struct

FRAME = struct.Struct(">cI")
SCRATCH = "/scratch"


def reply(obj: dict[str, object]) -> None:
    """Write one ``f`` frame to the host."""
    payload = json.dumps(obj).encode()
    data = memoryview(FRAME.pack(b"f", len(payload)) + payload)
    while data:
        data = data[os.write(1, data) :]


def remove_tree(top: str) -> None:
    """Remove ``top`` and what is under it, without following links (iterative)."""
    stack: list[str] = [top]
    order: list[str] = []
    while stack:
        path = stack.pop()
        order.append(path)
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                stack.extend(os.path.join(path, n) for n in os.listdir(path))
    for path in reversed(order):
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.rmdir(path)
            else:
                os.unlink(path)


def write_files(run_dir: str, files: dict[str, str]) -> None:
    """Create ``run_dir`` holding ``files`` (base64), all root-owned and read-only."""
    name = run_dir[len(SCRATCH) + 1 :]
    if not run_dir.startswith(SCRATCH + "/r-") or "/" in name or name in ("r-", ""):
        raise ValueError(f"bad run dir {run_dir!r}")
    for old in os.listdir(SCRATCH):
        if old.startswith("r-"):
            remove_tree(os.path.join(SCRATCH, old))
    os.mkdir(run_dir, 0o755)
    for rel, data in files.items():
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"bad file name {rel!r}")
        path = run_dir
        for p in parts[:-1]:
            path = os.path.join(path, p)
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o755)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(os.path.join(run_dir, rel), flags, 0o444)
        try:
            view = memoryview(base64.b64decode(data, validate=True))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    os.chmod(run_dir, 0o1777)


def main() -> None:
    """Answer requests until the host closes the stream."""
    buf = bytearray()
    while chunk := os.read(0, 1 << 16):
        buf += chunk
        while (i := buf.find(b"\n")) >= 0:
            line = bytes(buf[:i])
            del buf[: i + 1]
            try:
                msg = json.loads(line)
                if msg.get("op") == "files":
                    write_files(str(msg["dir"]), dict(msg["files"]))
                elif msg.get("op") != "ping":
                    raise ValueError(f"unknown op {msg.get('op')!r}")
                reply({"ok": True})
            except Exception as e:
                reply({"error": f"{type(e).__name__}: {e}"[:500]})


if __name__ == "__main__":
    main()
