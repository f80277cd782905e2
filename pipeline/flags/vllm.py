"""The curate flags of the ``vllm`` sampler (standard library only, like the parser).

``--sampler vllm`` also takes the request flags of ``--sampler openai`` (``--max-concurrency``,
``--request-timeout``, ``--max-attempts``, ``--extra-body``, ``--top-p``, ``--stop``); it
has no ``--endpoint``: Beam's handler starts the server on the worker that samples.
"""

from __future__ import annotations

import argparse
from typing import Any

APIS = (
    "chat",
    "completions",
)  # as tasksieve.transforms.samplers.vllm_args.APIS (kept off the import path)


def add_vllm_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``--sampler vllm``."""
    g = p.add_argument_group("vLLM on GPU workers (--sampler vllm)")
    g.add_argument(
        "--vllm-arg",
        action="append",
        default=[],
        metavar="--NAME[=VALUE]",
        help="extra vLLM server flag, attached with '=' (repeatable), "
        "e.g. --vllm-arg=--max-model-len=4096 --vllm-arg=--enforce-eager",
    )
    g.add_argument(
        "--vllm-api",
        choices=APIS,
        default="chat",
        help="chat: chat messages (instruct models, default); completions: plain-text prompt",
    )
    g.add_argument(
        "--gpu-accelerator",
        metavar="HINT",
        help="Beam accelerator hint for the sampling step alone, "
        "e.g. 'type:nvidia-l4;count:1;install-nvidia-driver'",
    )


def check_vllm_args(args: argparse.Namespace) -> None:
    """Fail early on an ``--sampler vllm`` run that cannot work, or vLLM flags without it."""
    if args.sampler != "vllm":
        if args.vllm_arg or args.gpu_accelerator:
            raise ValueError("--vllm-arg and --gpu-accelerator need --sampler vllm")
        return
    if args.endpoint:
        raise ValueError("--sampler vllm starts its own server: drop --endpoint (or use openai)")
    if args.api_key_env:
        raise ValueError("--sampler vllm sends no API key: drop --api-key-env")
    if not args.model:
        raise ValueError("--sampler vllm needs --model NAME_OR_PATH (what vLLM loads)")
    from tasksieve.transforms.samplers.vllm_args import check_vllm_fields

    check_vllm_fields("vllm", args.model, tuple(args.vllm_arg), args.vllm_api, args.gpu_accelerator)


def vllm_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``SamplerConfig`` keyword arguments from the vLLM flags."""
    return {
        "vllm_args": tuple(args.vllm_arg),
        "vllm_api": args.vllm_api,
        "accelerator": args.gpu_accelerator,
    }
