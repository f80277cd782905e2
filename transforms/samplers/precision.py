"""The number format the transformers sampler computes in on the CPU.

``auto`` (the default) is bfloat16 where the CPU multiplies bfloat16 natively (the
``amx_bf16`` or ``avx512_bf16`` flag: Sapphire Rapids and later, Cooper Lake, Zen 4), else
float32. On the bundled model, bfloat16 halves the bytes every decode step reads and lets
oneDNN use the matrix units: 1.38x the tokens per second and 0.63x the CPU per token on the
demo's prompts (``benchmarks/sampler_dtype.py``). On a CPU without those units bfloat16 is
emulated and slower than float32, so ``auto`` keeps float32 there.

The samples differ: bfloat16 keeps 8 bits of each weight's and activation's mantissa, so
after a few tokens a sampled row takes another path than in float32 (the bundled weights are
4-bit quantized to begin with, a coarser rounding than this one). The model id recorded with
every sample and used in the rollout cache's key names the format (``... @bfloat16``), so a
cache never hands float32 samples to a bfloat16 run or the reverse; ``float32`` gives the
samples of earlier releases.
"""

from __future__ import annotations

import functools

DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16")
_NATIVE_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


@functools.cache
def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first CPU's feature flags (empty where the file cannot be read: not Linux)."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    """The CPU multiplies bfloat16 in hardware."""
    return bool(_NATIVE_BF16_FLAGS & (cpu_flags() if flags is None else flags))


def resolved_dtype(name: str, flags: frozenset[str] | None = None) -> str:
    """``float32`` or ``bfloat16``: ``name`` itself, or what ``auto`` picks on this CPU."""
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    if name != "auto":
        return name
    return "bfloat16" if native_bf16(flags) else "float32"


def with_dtype(model_id: str, dtype: str) -> str:
    """The model id a sample records: float32 keeps the plain id, other formats are named."""
    return model_id if dtype == "float32" else f"{model_id} @{dtype}"
