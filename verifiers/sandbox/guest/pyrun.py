"""Guest primitives for running Python in a fork: which commands run warm, a fresh ``__main__``.

Runs inside the sandbox (standard library only). The warm-run runtime (``warmrun``) builds on
these, and the mount-namespace launcher uses ``exec_command``; none of them imports this
module: ``tasksieve.verifiers.sandbox.guest.bundle`` inlines it, so each guest program stays
one self-contained ``-c`` source. Nothing here is a security boundary: it runs with the
candidate's uid, after the sandbox is set up.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import types
from typing import NoReturn


def warm_eligible(argv: list[str], real_exe: str) -> bool:
    """Whether ``argv`` is ``python -I -S script|-c code ...`` for this interpreter, which a
    warm fork can run in place of an exec."""
    return (
        len(argv) >= 4
        and (argv[0] == sys.executable or os.path.realpath(argv[0]) == real_exe)
        and argv[1:3] == ["-I", "-S"]
        and ((argv[3] == "-c" and len(argv) >= 5) or not argv[3].startswith("-"))
    )


def exec_command(argv: list[str], env: dict[str, str]) -> NoReturn:
    """Exec ``argv`` with the signal dispositions a freshly started program expects."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    os.execvpe(argv[0], argv, env)


def script_of(argv: list[str]) -> tuple[str, str, list[str]]:
    """(source, filename, sys.argv) for ``python -I -S script|-c code ...``; exits 2 if the
    script cannot be read, as the interpreter would."""
    if argv[3] == "-c":
        return argv[4], "<string>", ["-c", *argv[5:]]
    try:
        with open(argv[3], "rb") as fh:
            return fh.read().decode(), argv[3], argv[3:]
    except OSError as e:
        os.write(2, f"python3: can't open file {argv[3]!r}: {e}\n".encode())
        os._exit(2)


def fresh_main(filename: str) -> types.ModuleType:
    """New text streams on fds 0-2 and a new ``__main__`` module, as a fresh interpreter has."""
    streams = {
        "stdin": io.TextIOWrapper(io.FileIO(0, "r", closefd=False)),
        "stdout": io.TextIOWrapper(io.FileIO(1, "w", closefd=False)),
        "stderr": io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True
        ),
    }
    for name, stream in streams.items():
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    if filename != "<string>":
        main.__file__ = filename
    sys.modules["__main__"] = main
    return main


def exit_code(e: SystemExit) -> int:
    """The status a fresh interpreter would exit with for ``e``."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    with contextlib.suppress(BaseException):
        print(e.code, file=sys.stderr)
    return 1


def finish(rc: int, interrupted: bool = False) -> NoReturn:
    """Exit like a fresh interpreter would (threads joined, atexit run, stdio flushed), but
    without tearing down every module: finalising the warm heap would cost ~10 ms a run.
    ``interrupted`` (an uncaught KeyboardInterrupt) ends it by SIGINT, as CPython does."""
    import atexit  # built in: no file to load

    # As CPython's own finalisation: threads are joined only where ``threading`` was
    # imported (no thread of it can exist otherwise). Importing it here would cost a run
    # ~2 ms of CPU, more than the rest of a short run's exit.
    threading = sys.modules.get("threading")
    if threading is not None:
        with contextlib.suppress(BaseException):
            threading._shutdown()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            rc = rc or 120
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(rc)
