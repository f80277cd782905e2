"""A test double of the ``Workspace`` protocol for the episode loop's bookkeeping, NOT a sandbox.

It copies a tree into a temporary directory and runs one persistent ``bash`` there (no
isolation, no limits beyond a command's wall time), so the loop's own logic (protocol, budgets,
truncation, conversation, rows) is tested without a workspace backend. Anything hostile runs
only against the real backends (``test_agent_sandbox.py``). Commands here must only use paths
relative to the workspace.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tasksieve.verifiers.sandbox.workspace import WORKSPACE_ROOT, CommandResult, WorkspaceError


class HostWorkspace:
    """A copied tree with a persistent shell (see the module docstring)."""

    def __init__(self, snapshot: str | Path) -> None:
        self.snapshot = Path(snapshot)
        self._dir = Path(tempfile.mkdtemp(prefix="hostws-"))
        self._root = self._dir / "w"
        shutil.copytree(self.snapshot, self._root, symlinks=True)
        for p in [self._root, *self._root.rglob("*")]:
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | 0o200)
        self._shell: subprocess.Popen[bytes] | None = None
        self.closed = False
        self._start()

    def _start(self) -> None:
        self._shell = subprocess.Popen(
            ["bash", "--norc", "--noprofile"],
            cwd=self._root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def root(self) -> str:
        return WORKSPACE_ROOT

    @property
    def alive(self) -> bool:
        return not self.closed and self._shell is not None and self._shell.poll() is None

    def exec(self, command: str, timeout_s: float | None = None) -> CommandResult:
        if not self.alive:
            return CommandResult(None, b"", b"", 0.0, ended="session")
        assert self._shell is not None and self._shell.stdin and self._shell.stdout
        mark = secrets.token_hex(8).encode()
        t0 = time.monotonic()
        script = f"{{\n{command}\n}} </dev/null 2>&1; __rc=$?; echo; echo {mark.decode()} $__rc\n"
        try:
            self._shell.stdin.write(script.encode())
            self._shell.stdin.flush()
        except BrokenPipeError:
            return CommandResult(None, b"", b"", 0.0, ended="session")
        out = b""
        fd = self._shell.stdout.fileno()
        os.set_blocking(fd, False)
        deadline = t0 + (timeout_s or 60.0)
        while mark not in out:
            if time.monotonic() > deadline:
                self._kill()
                self._start()
                return CommandResult(None, out, b"", time.monotonic() - t0, ended="wall")
            if self._shell.poll() is not None:
                return CommandResult(None, out, b"", time.monotonic() - t0, ended="session")
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                time.sleep(0.005)
                continue
            out += chunk
        body, _, rest = out.partition(b"\n" + mark + b" ")
        code = int(rest.split()[0]) if rest.split() else None
        return CommandResult(code, body, b"", time.monotonic() - t0)

    def run(
        self, argv: list[str], timeout_s: float | None = None, cwd: str = WORKSPACE_ROOT
    ) -> CommandResult:
        where = self._root / os.path.relpath(cwd, WORKSPACE_ROOT)
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, cwd=where, capture_output=True, timeout=timeout_s or 60)
        except subprocess.TimeoutExpired:
            return CommandResult(None, b"", b"", time.monotonic() - t0, ended="wall")
        return CommandResult(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)

    def _path(self, path: str) -> Path:
        p = (self._root / path).resolve()
        if not p.is_relative_to(self._root.resolve()):
            raise WorkspaceError(f"{path}: outside the workspace")
        return p

    def write_file(self, path: str, data: bytes) -> None:
        p = self._path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def read_file(self, path: str, max_bytes: int = 1_000_000) -> bytes | None:
        p = self._path(path)
        return p.read_bytes()[:max_bytes] if p.is_file() else None

    def diff(self) -> str:
        if self.closed:
            raise WorkspaceError("closed")
        names = {
            str(p.relative_to(d))
            for d in (self.snapshot, self._root)
            for p in d.rglob("*")
            if p.is_file()
        }
        out = []
        for rel in sorted(n for n in names if "__pycache__" not in n and ".pytest_cache" not in n):
            a, b = self.snapshot / rel, self._root / rel
            old = a.read_text().splitlines(keepends=True) if a.is_file() else []
            new = b.read_text().splitlines(keepends=True) if b.is_file() else []
            if old != new:
                src = f"a/{rel}" if a.is_file() else "/dev/null"
                dst = f"b/{rel}" if b.is_file() else "/dev/null"
                out.append("".join(difflib.unified_diff(old, new, src, dst)))
        return "".join(out)

    def _kill(self) -> None:
        if self._shell is not None and self._shell.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._shell.pid, signal.SIGKILL)
            self._shell.wait()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._kill()
        shutil.rmtree(self._dir, ignore_errors=True)
