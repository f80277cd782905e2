"""The ``vllm`` sampler's settings: extra server flags, the API it uses, the GPU resource hint.

Standard library only (the config and the CLI parser import it). Extra server flags are
written as vLLM spells them, one per item: ``--name=value`` or a bare switch ``--name``; they
become the ``vllm_server_kwargs`` of Beam's handlers, which start
``python -m vllm.entrypoints.openai.api_server --model M --port P --name value ...``.
Flags Beam sets itself (``--model``, ``--port``) or that would break how Beam talks to the
server (``--served-model-name``: Beam names the model by ``--model`` in every request;
``--api-key``: Beam's client sends no key) are refused, as is a flag given twice.
What it does NOT do: know vLLM's flags (the server rejects the ones it does not know, at
start) or check that an accelerator type exists on the runner (the runner does).
"""

from __future__ import annotations

import re

from tasksieve.transforms.samplers.errors import SamplerUnavailable

APIS: tuple[str, ...] = ("chat", "completions")
RESERVED: dict[str, str] = {
    "model": "pass the model with --model",
    "port": "Beam picks a free port",
    "served-model-name": "Beam sends the --model value as the model name of every request",
    "api-key": "Beam's client sends no API key",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ACCEL_TYPE = re.compile(r"type:[A-Za-z0-9_.-]+")


def parse_server_arg(arg: str) -> tuple[str, str | None]:
    """``--name=value`` -> ("name", "value"); ``--name`` -> ("name", None); else ValueError."""
    if not arg.startswith("--"):
        raise ValueError(
            f"vLLM server flag {arg!r} must start with -- (e.g. --max-model-len=4096); "
            "give one flag per --vllm-arg, its value after '='"
        )
    name, eq, value = arg[2:].partition("=")
    if not _NAME.fullmatch(name):
        raise ValueError(f"vLLM server flag {arg!r}: {name!r} is not a flag name")
    if eq and not value:
        raise ValueError(f"vLLM server flag {arg!r} has an empty value (drop '=' for a switch)")
    canonical = name.replace("_", "-")
    if canonical in RESERVED:
        raise ValueError(f"vLLM server flag --{name} cannot be set: {RESERVED[canonical]}")
    return name, (value if eq else None)


def server_kwargs(args: tuple[str, ...]) -> dict[str, str | None]:
    """The ``vllm_server_kwargs`` of Beam's handlers from ``--name[=value]`` items, in order."""
    out: dict[str, str | None] = {}
    seen: set[str] = set()
    for arg in args:
        name, value = parse_server_arg(arg)
        canonical = name.replace("_", "-")
        if canonical in seen:
            raise ValueError(f"vLLM server flag --{name} is given twice")
        seen.add(canonical)
        out[name] = value
    return out


def check_accelerator(value: str) -> None:
    """Fail on an accelerator hint without a ``type:NAME`` part (the runner checks the rest).

    The hint is Beam's format: ``type:nvidia-l4;count:1;install-nvidia-driver``.
    """
    parts = [p.strip() for p in value.split(";")]
    if not any(_ACCEL_TYPE.fullmatch(p) for p in parts) or any(not p for p in parts):
        raise ValueError(
            f"accelerator {value!r} must look like 'type:nvidia-l4;count:1;install-nvidia-driver'"
            " (a type:NAME part, parts separated by ';')"
        )


def check_vllm_fields(
    backend: str,
    model: str | None,
    vllm_args: tuple[str, ...],
    vllm_api: str,
    accelerator: str | None,
) -> None:
    """Validate the ``vllm`` backend's fields of ``SamplerConfig`` (ValueError says how to fix)."""
    if not isinstance(vllm_args, tuple) or not all(isinstance(a, str) for a in vllm_args):
        raise ValueError(f"vllm_args must be a tuple of strings, got {vllm_args!r}")
    if vllm_api not in APIS:
        raise ValueError(f"vllm_api must be one of {', '.join(APIS)}, got {vllm_api!r}")
    if backend != "vllm":
        if vllm_args or accelerator:
            raise ValueError(
                f"vllm_args and accelerator are only used by backend 'vllm' (got {backend!r})"
            )
        return
    if not model:
        raise ValueError(
            "backend 'vllm' needs model (a Hugging Face model name or a model directory the "
            "workers can read)"
        )
    server_kwargs(vllm_args)
    if accelerator is not None:
        check_accelerator(accelerator)


class VLLMServerError(SamplerUnavailable):
    """The vLLM server did not start, or died and could not be restarted: the run stops.

    Not a per-task failure: every later task would wait for the same server to start.
    """
