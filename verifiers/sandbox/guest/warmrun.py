"""The guest warm-run runtime shared by both warm servers: warm up once, run each job warm.

Runs inside the sandbox (standard library only), inlined by
``tasksieve.verifiers.sandbox.guest.bundle`` into the process backend's fork server and the
docker backend's container server, which share this one life cycle of a warm run:

1. ``warm_up`` (in the server, before any request): compile each trusted registered script
   (``tasksieve.verifiers.sandbox.warm``) and execute it once as module ``__warm__``, import
   the preloaded modules, then freeze the heap so forked runs never scan (and so never
   copy-on-write) it.
2. In the forked job, after the backend's own isolation steps (fds, uid, namespaces):
   ``set_rlimits`` applies the request's rlimits in the guest and ``hand_over`` gives the job
   its environment and default signal dispositions, then either execs the command or, for
   ``python -I -S script|-c code ...`` of this interpreter, returns to run it warm;
   ``job_failed`` ends a job that could not start (127 when the command cannot run, 126
   otherwise), as a shell would.
3. ``run_warm`` runs the script as a fresh ``__main__`` on the job's fds 0-2 (the backend
   captures them: pipes it reads, or pipes to the tests process). A registered script that
   defines ``warm_main`` is not executed again: its namespace from step 1 (a private
   copy-on-write copy in each run) is reused and only ``warm_main()`` runs. Anything else is
   compiled (or taken from the cache) and executed. The result is the process's exit status,
   as a fresh interpreter's: 0, the ``SystemExit`` code, 1 with the traceback on stderr, or
   death by SIGINT for an uncaught KeyboardInterrupt; each backend's server reports it to its
   host in its own frame (the fork server's status socket, the container server's ``x``).

Nothing here is a security boundary: it runs with the candidate's uid, after the backend set
the run up. It does NOT isolate runs from the warm heap (every run starts from the same
memory image, hash seed and preloaded modules) nor make a warm run identical to a fresh
interpreter beyond its exit status and output: ``sys.modules`` holds the preloaded modules,
a registered script's frames carry the file name ``harness.py`` (a ``warm_main``
traceback starts at ``warm_main``, not at the script's top level), and the job runs under the
frames of the server that forked it (up to nine), so it can recurse that many frames less deep
before ``RecursionError`` than the same script in a fresh interpreter.
"""

from __future__ import annotations

import _signal
import contextlib
import gc
import os
import resource
import signal
import sys
import types
from typing import Any, NoReturn

from tasksieve.verifiers.sandbox.guest.pyrun import (
    exec_command,
    exit_code,
    finish,
    fresh_main,
    script_of,
    warm_eligible,
)

WarmScripts = dict[str, tuple[types.CodeType, dict[str, Any]]]
WARM_FILENAME = "harness.py"
_REAL_EXE = os.path.realpath(sys.executable)
_JOB_SIGNALS = (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP)  # SIGPIPE, SIGXFSZ stay ignored


def warm_up(sources: list[str], preimport: list[str]) -> WarmScripts:
    """Compile and execute each trusted script once, import ``preimport``, freeze the heap."""
    warm: WarmScripts = {}
    for src in sources:
        code = compile(src, WARM_FILENAME, "exec", dont_inherit=True)
        ns: dict[str, Any] = {"__name__": "__warm__", "__builtins__": __builtins__}
        exec(code, ns)
        warm[src] = (code, ns)
    for mod in preimport:
        with contextlib.suppress(ImportError):
            __import__(mod)
    gc.collect()
    gc.freeze()
    return warm


def set_rlimits(rlimits: dict[str, Any], names: tuple[str, ...]) -> None:
    """Apply each of ``names`` (``RLIMIT_*``) from ``rlimits`` as (soft, hard); all required."""
    for name in names:
        soft, hard = rlimits[name]
        resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))


def hand_over(job: dict[str, Any]) -> dict[str, Any]:
    """Give the job its environment and default signals; exec its command, or return the job
    when its ``argv`` runs warm in this interpreter (``run_warm``)."""
    for sig in _JOB_SIGNALS:  # the C function: ``signal.signal`` also makes enums of both ends
        _signal.signal(sig, _signal.SIG_DFL)
    env = {str(k): str(v) for k, v in job["env"].items()}
    set_environ(env)
    argv = [str(a) for a in job["argv"]]
    if warm_eligible(argv, _REAL_EXE):
        return job
    exec_command(argv, env)


def set_environ(env: dict[str, str]) -> None:
    """Make ``os.environ`` and the C environment exactly ``env``, in its order.

    A forked job whose names are the server's, in the same order (the backends start their
    servers with the jobs' environment), only has changed values set in place; any other is
    cleared and rebuilt. Both leave the same environment: clearing and rebuilding it goes
    through the mapping ABCs and touches more of the warm heap, which a forked run pays for
    in copied pages.
    """
    if list(os.environ) == list(env):
        for key, value in env.items():
            if os.environ[key] != value:
                os.environ[key] = value
        return
    os.environ.clear()
    os.environ.update(env)


def job_failed(e: BaseException, argv: list[str]) -> NoReturn:
    """End a job that could not start: 127 when its command cannot run, else 126."""
    if isinstance(e, OSError):
        os.write(2, f"sandbox: cannot run {argv[:1]!r}: {e}\n".encode())
        os._exit(127)
    os.write(2, f"sandbox: job setup failed: {e!r}\n".encode())
    os._exit(126)


def run_warm(job: dict[str, Any], warm: WarmScripts) -> NoReturn:
    """Run ``python -I -S script|-c code ...`` in this interpreter as a fresh ``__main__``,
    or a warm script's ``warm_main()`` in its warm namespace, and exit with its status."""
    source, filename, sys.argv = script_of([str(a) for a in job["argv"]])
    cached = warm.get(source)
    warm.clear()
    main = fresh_main(filename)
    entry = cached[1].get("warm_main") if cached else None
    rc, interrupted = 0, False
    try:
        if callable(entry):
            entry()
        else:
            code = cached[0] if cached else compile(source, filename, "exec", dont_inherit=True)
            exec(code, main.__dict__)
    except SystemExit as e:
        rc = exit_code(e)
    except BaseException as e:
        tb = e.__traceback__  # starts at this frame: cut it, as a fresh interpreter shows none
        err = e.with_traceback(tb.tb_next if tb else None)
        sys.excepthook(type(err), err, err.__traceback__)
        rc, interrupted = 1, isinstance(e, KeyboardInterrupt)
    finish(rc, interrupted)
