"""``python -m vllm.entrypoints.openai.api_server`` for tests: ``transformers serve`` on the CPU.

Beam's vLLM handlers start this module with vLLM's command line (``--model M --port P`` and
the extra server flags) and then talk to it with the ``openai`` client. This stand-in maps
that command line onto a real OpenAI-compatible server, ``transformers serve M`` on
127.0.0.1:P, so the requests, ``n``, the batching and the errors the sampler meets are real
ones; only the engine differs (``transformers serve`` answers one choice whatever ``n`` asks).

Flags it does not know end it with exit status 2, as vLLM's own parser does; engine flags that
mean nothing on a CPU (``--max-model-len``, ``--gpu-memory-utilization``, ...) are accepted
and ignored, and said so in its output (stdout, or the file named by ``$VLLM_STANDIN_LOG``, where
tests read what the server logged). It runs the server as its child and stops it when it is
told to stop (SIGTERM, SIGINT) or when the process that started it goes away.
What it does NOT do: honour ``n``, tensor parallelism, quantization or any engine setting,
or serve under another name than ``--model`` (``--served-model-name`` is refused).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

IGNORED_WITH_VALUE = (
    "--max-model-len",
    "--gpu-memory-utilization",
    "--max-num-seqs",
    "--tensor-parallel-size",
    "--dtype",
    "--seed",
    "--chat-template",
)
IGNORED_SWITCHES = ("--enforce-eager", "--disable-log-requests", "--trust-remote-code")
PR_SET_PDEATHSIG = 1
LOG_ENV = "VLLM_STANDIN_LOG"  # a file for the server's output (default: stdout, read by Beam)


def parse(argv: list[str]) -> argparse.Namespace:
    """vLLM's flags as far as this stand-in knows them (unknown ones: exit 2)."""
    p = argparse.ArgumentParser(prog="vllm.entrypoints.openai.api_server (stand-in)")
    p.add_argument("--model", required=True)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", default="127.0.0.1")
    for flag in IGNORED_WITH_VALUE:
        p.add_argument(flag)
    for flag in IGNORED_SWITCHES:
        p.add_argument(flag, action="store_true")
    return p.parse_args(argv)


def serve_command(args: argparse.Namespace) -> list[str]:
    """The ``transformers serve`` command line serving ``args.model`` on ``args.port``."""
    beside = Path(sys.executable).with_name("transformers")
    cli = str(beside) if beside.is_file() else shutil.which("transformers")
    if cli is None:
        raise SystemExit("stand-in vllm: the transformers CLI is not installed")
    return [
        cli,
        "serve",
        args.model,
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--device",
        "cpu",
        "--log-level",
        "warning",
    ]


def _die_with_parent() -> None:
    """In the child: SIGTERM when this stand-in dies, even by SIGKILL (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def main(argv: list[str]) -> int:
    args = parse(argv)
    log_path = os.environ.get(LOG_ENV)
    out = open(log_path, "a") if log_path else sys.stdout  # noqa: SIM115 (the child writes it)
    ignored = [a for a in argv if a.split("=")[0] in IGNORED_WITH_VALUE + IGNORED_SWITCHES]
    if ignored:
        print(f"stand-in vllm: ignoring engine flags on the CPU: {ignored}", file=out, flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.setdefault("OMP_NUM_THREADS", "1")
    parent = os.getppid()
    child = subprocess.Popen(
        serve_command(args),
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    print(
        f"stand-in vllm: transformers serve pid {child.pid} port {args.port}", file=out, flush=True
    )
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while child.poll() is None and not stop and os.getppid() == parent:
        time.sleep(0.5)
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return child.returncode if not stop else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
