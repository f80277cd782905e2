"""A ``dask.distributed`` cluster on loopback: one scheduler and separate worker processes.

``local_dask()`` starts ``dask scheduler`` and ``dask worker`` (each worker under its nanny,
one process and ``threads`` threads per worker) as separate process groups, waits until every
worker has registered, yields the scheduler's address and ends every process group it
started when the block ends. ``python -m tasksieve.pipeline.curate.local_dask`` (or
``deploy/dask-cluster.sh``) runs the same cluster in the foreground until interrupted, for
``tasksieve curate --runner DaskRunner --dask_client_address=ADDRESS``.

Everything listens on 127.0.0.1 only; the dashboard is off. What it does NOT do: ship the
package (workers import tasksieve from this machine's environment: the interpreter given
here, with the environment, ``PYTHONPATH`` included, passed on), or secure the cluster
(no TLS, no authentication: loopback on a trusted host only).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasksieve.pipeline.curate.local_portable import _stop, _wait_listening, free_port

PR_SET_PDEATHSIG = 1
"""prctl option: a signal the kernel sends a process when the thread that started it ends."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the starting process dies, however it dies (a
    killed test run does not leave a cluster behind). Linux only; elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


@dataclass(frozen=True)
class DaskCluster:
    """Where the scheduler listens, the worker processes' ids and the log files."""

    address: str
    worker_pids: tuple[int, ...]
    logs: tuple[Path, ...]

    def beam_args(self) -> list[str]:
        """The pipeline options that send a curate run to this cluster."""
        return ["--runner=DaskRunner", f"--dask_client_address={self.address}"]


def _worker_pids(address: str, expected: int, timeout_s: float) -> tuple[int, ...]:
    """Wait for ``expected`` workers; their process ids (as the workers report them)."""
    from dask.distributed import Client

    with Client(address, timeout=timeout_s) as client:
        client.wait_for_workers(expected, timeout=timeout_s)
        pids = client.run(os.getpid)
    return tuple(sorted(int(p) for p in pids.values()))


@contextlib.contextmanager
def local_dask(
    workers: int = 2, threads: int = 1, python: str = sys.executable, timeout_s: float = 120.0
) -> Iterator[DaskCluster]:
    """Run a scheduler and ``workers`` worker processes for the ``with`` block."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
    env.setdefault("DASK_DISTRIBUTED__WORKER__DAEMON", "False")  # DoFns may start processes
    with tempfile.TemporaryDirectory(prefix="tasksieve-dask-") as tmp:
        root = Path(tmp)
        port = free_port()
        address = f"tcp://127.0.0.1:{port}"
        logs = (root / "scheduler.log", *(root / f"worker-{i}.log" for i in range(workers)))
        run = [python, "-m"]
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs.append(
                _start(
                    [
                        *run,
                        "distributed.cli.dask_scheduler",
                        "--host=127.0.0.1",
                        f"--port={port}",
                        "--no-dashboard",
                    ],
                    logs[0],
                    env,
                )
            )
            _wait_listening(port, procs[0], logs[0], timeout_s)
            for i in range(workers):
                argv = [*run, "distributed.cli.dask_worker", address]
                argv += ["--host=127.0.0.1", "--nworkers=1", f"--nthreads={threads}"]
                argv += ["--no-dashboard", f"--name=tasksieve-{i}", f"--local-directory={root}"]
                argv += ["--death-timeout=60"]  # gone a minute after the scheduler
                procs.append(_start(argv, logs[1 + i], env))
            pids = _worker_pids(address, workers, timeout_s)
            yield DaskCluster(address, pids, logs)
        finally:
            for proc in reversed(procs):
                _stop(proc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cluster in the foreground until SIGINT or SIGTERM."""
    ap = argparse.ArgumentParser(
        prog="python -m tasksieve.pipeline.curate.local_dask", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="threads per worker (default 1)")
    args = ap.parse_args(argv)
    stop = {"now": False}

    def ask_stop(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, ask_stop)
    signal.signal(signal.SIGINT, ask_stop)
    with local_dask(args.workers, args.threads) as cluster:
        print(f"scheduler {cluster.address}; worker processes {list(cluster.worker_pids)}")
        print("run: tasksieve curate ... " + " ".join(cluster.beam_args()), flush=True)
        while not stop["now"]:
            time.sleep(0.5)
    print("cluster stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
