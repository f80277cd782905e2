"""The Python harness's JSON-line wire, and how an exception is described on it.

Runs inside the sandbox (standard library only; inlined into the harness by
``tasksieve.verifiers.sandbox.guest.bundle``). A ``Wire`` takes the protocol off fds 0/1 at
start, so the code under test reads /dev/null and writes to stderr, never to the protocol.
It does NOT authenticate lines: whoever holds the fds can write them (the callers make sure
only the intended process does).
"""

from __future__ import annotations

import json
import os
from typing import Any

_MAX_LINE = 4_000_000


class Wire:
    """Line-oriented JSON over two private fds; fds 0/1 are detached from the protocol."""

    def __init__(self, wfd: int | None = None, rfd: int = -1) -> None:
        if wfd is not None:  # a wire on fds of its own (pair results: write-only)
            self.rfd, self.wfd = rfd, wfd
            self._buf = b""
            return
        self.rfd, self.wfd = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        self._buf = b""

    def send(self, obj: Any) -> None:
        data = (json.dumps(obj, allow_nan=False) + "\n").encode()
        while data:
            data = data[os.write(self.wfd, data) :]

    def recv(self) -> Any:
        while b"\n" not in self._buf:
            if len(self._buf) > _MAX_LINE:
                raise EOFError("line too long")
            chunk = os.read(self.rfd, 1 << 16)
            if not chunk:
                raise EOFError("peer closed the pipe")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)


def describe(e: BaseException) -> list[str]:
    try:
        msg = str(e)[:500]
    except BaseException:  # a hostile __str__
        msg = "<unprintable>"
    return [type(e).__name__, msg]
