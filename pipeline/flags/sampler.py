"""The curate flags of the ``openai`` sampler and the sampling parameters it passes through.

Standard library only (the parser is built before any command runs). ``server_fields`` turns
the parsed flags into ``SamplerConfig`` keyword arguments; ``check_server_args`` fails before
the run starts when a flag cannot work.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from tasksieve.pipeline.flags.shared import positive_int


def add_dtype_flag(p: argparse.ArgumentParser) -> None:
    """``--dtype``: the transformers sampler's number format (``samplers.precision``)."""
    p.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16"],
        default="auto",
        help="number format of the transformers sampler (default auto: bfloat16 where the CPU "
        "has bfloat16 units, else float32)",
    )


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``--sampler openai`` (and ``--top-p``, ``--stop``, used by servers)."""
    g = p.add_argument_group("OpenAI-compatible server (--sampler openai)")
    g.add_argument("--endpoint", help="server base URL, e.g. http://localhost:8000/v1")
    g.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the API key (default: no key)",
    )
    g.add_argument(
        "--max-concurrency",
        type=positive_int,
        default=8,
        help="requests in flight per worker (default 8)",
    )
    g.add_argument(
        "--request-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds per request attempt (default 300)",
    )
    g.add_argument(
        "--max-attempts",
        type=positive_int,
        default=5,
        help="attempts per request on connection errors, timeouts, 429 and 5xx (default 5)",
    )
    g.add_argument(
        "--extra-body",
        metavar="JSON",
        default="",
        help="JSON object merged into every request (server-specific fields)",
    )
    g.add_argument("--top-p", type=float, default=0.95, help="nucleus sampling (default 0.95)")
    g.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="TEXT",
        help="stop sequence sent to the server (repeatable)",
    )


def check_server_args(args: argparse.Namespace) -> None:
    """Fail early on an ``--sampler openai`` run that cannot work."""
    if not args.endpoint:
        raise ValueError("--sampler openai needs --endpoint URL (e.g. http://localhost:8000/v1)")
    if not args.model:
        raise ValueError("--sampler openai needs --model NAME (the name the server serves)")
    if args.api_key_env and not os.environ.get(args.api_key_env):
        raise ValueError(f"--api-key-env {args.api_key_env}: the variable is not set")
    if args.extra_body:
        try:
            body = json.loads(args.extra_body)
        except json.JSONDecodeError as e:
            raise ValueError(f"--extra-body is not valid JSON ({e.msg})") from e
        if not isinstance(body, dict):
            raise ValueError("--extra-body must be a JSON object")


def server_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``SamplerConfig`` keyword arguments from the server flags."""
    return {
        "endpoint": args.endpoint,
        "api_key_env": args.api_key_env,
        "max_concurrency": args.max_concurrency,
        "request_timeout_s": args.request_timeout,
        "max_attempts": args.max_attempts,
        "extra_body": args.extra_body,
        "top_p": args.top_p,
        "stop": tuple(args.stop),
    }
