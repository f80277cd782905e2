"""The transformers sampler's number format: what ``auto`` picks, and that samples name it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasksieve.transforms.samplers.precision import cpu_flags, resolved_dtype, with_dtype

SPR = frozenset({"avx512f", "amx_tile", "amx_bf16", "avx512_bf16"})
ZEN4 = frozenset({"avx512f", "avx512_bf16"})
OLD = frozenset({"avx2", "avx512f"})


@pytest.mark.parametrize(
    ("name", "flags", "want"),
    [
        ("auto", SPR, "bfloat16"),
        ("auto", ZEN4, "bfloat16"),
        ("auto", OLD, "float32"),
        ("auto", frozenset(), "float32"),  # flags unreadable: the safe format
        ("float32", SPR, "float32"),
        ("bfloat16", OLD, "bfloat16"),  # asked for: kept, even where it is emulated
    ],
)
def test_auto_picks_bfloat16_only_where_the_cpu_has_it(
    name: str, flags: frozenset[str], want: str
) -> None:
    assert resolved_dtype(name, flags) == want


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="dtype must be one of auto, float32, bfloat16"):
        resolved_dtype("int4", SPR)


def test_float32_keeps_the_plain_model_id() -> None:
    assert with_dtype("m", "float32") == "m"
    assert with_dtype("m", "bfloat16") == "m @bfloat16"


def test_flags_are_read_from_the_first_cpu(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nflags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    )
    assert cpu_flags(str(info)) == {"fpu", "avx2", "amx_bf16"}
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_the_rollout_cache_keys_the_format() -> None:
    from tasksieve.transforms.rollouts.cache.sampler import model_description
    from tasksieve.transforms.samplers import SamplerConfig

    f32 = model_description(SamplerConfig(dtype="float32"))
    bf16 = model_description(SamplerConfig(dtype="bfloat16"))
    assert f32 != bf16
    assert f32["id"] == model_description(SamplerConfig(dtype="float32"))["id"]
