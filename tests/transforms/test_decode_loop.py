"""The transformers sampler's decode loop against transformers' own ``generate``."""

from __future__ import annotations

import importlib.util

import pytest

from tasksieve.transforms.samplers.config import SamplerConfig, SampleRequest
from tasksieve.transforms.samplers.hf import TransformersModelHandler

HAVE_TORCH = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))
needs_torch = pytest.mark.skipif(
    not HAVE_TORCH, reason="needs torch and transformers: pip install 'tasksieve[cpu]'"
)

REQUESTS = [
    SampleRequest("add", "code", "Write a function add(a, b) returning a + b.", "add"),
    SampleRequest("q", "sql", "Table t(x INT). Return the largest x."),
    SampleRequest(
        "long",
        "code",
        "Write a function parse_pairs(text) that reads lines of the form key=value, skips "
        "blank lines and lines starting with #, strips spaces around keys and values, and "
        "returns a dict; a repeated key keeps its last value.",
        "parse_pairs",
    ),
]


def test_batches_are_fixed_at_the_configured_size() -> None:
    handler = TransformersModelHandler(SamplerConfig(batch_size=6))
    assert handler.batch_elements_kwargs() == {"min_batch_size": 6, "max_batch_size": 6}


def test_an_unknown_decoder_is_refused() -> None:
    with pytest.raises(ValueError, match="decode must be one of loop, generate"):
        TransformersModelHandler(SamplerConfig(), decode="beam")


@pytest.mark.torch
@pytest.mark.slow
@needs_torch
def test_the_loop_draws_what_generate_draws() -> None:
    # float32: in bfloat16 the two batch shapes round differently often enough to flip a
    # sampled token within 64 (the loop prefills each prompt alone, generate pads them)
    cfg = SamplerConfig(samples=3, max_new_tokens=64, seed=11, dtype="float32")
    loop = TransformersModelHandler(cfg)
    model = loop.load_model()
    ours = loop.draw(REQUESTS, model)
    theirs = TransformersModelHandler(cfg, decode="generate").draw(REQUESTS, model)
    assert [texts for texts, _ in ours] == [texts for texts, _ in theirs]
    metas = [m for _, ms in ours for m in ms]
    # rows ended at different steps (some at the closed fence, some at the cap), and each
    # row's count is its own, not the longest row's
    assert {m.finish_reason for m in metas} <= {"stop", "length"}
    assert len({m.completion_tokens for m in metas}) > 1
    assert all(1 <= m.completion_tokens <= 64 for m in metas)
    for m in metas:
        if m.finish_reason == "length":
            assert m.completion_tokens == 64
    # a task's samples do not depend on the other tasks in its batch
    alone = loop.draw(REQUESTS[2:], model)
    assert alone[0][0] == ours[2][0]


@pytest.mark.torch
@needs_torch
def test_the_growing_cache_equals_concatenation() -> None:
    import torch

    from tasksieve.transforms.samplers.decode import _growing_layer

    layer = _growing_layer()(room=2)
    gen = torch.Generator().manual_seed(0)
    parts = [torch.randn(3, 2, n, 4, generator=gen) for n in (5, 1, 1, 1, 4, 1)]
    for i, part in enumerate(parts):  # grows past its room twice
        keys, values = layer.update(part, -part)
        whole = torch.cat(parts[: i + 1], dim=2)
        assert torch.equal(keys, whole) and torch.equal(values, -whole)
    assert layer.get_seq_length() == 13
    layer.batch_select_indices(torch.tensor([2, 0]))
    assert torch.equal(layer.keys, torch.cat(parts, dim=2)[[2, 0]])
    layer.batch_repeat_interleave(2)
    assert layer.keys.shape[0] == 4 and torch.equal(layer.keys[1], layer.keys[0])


@pytest.mark.torch
@pytest.mark.slow
@needs_torch
def test_bfloat16_draws_the_same_samples_for_the_same_batch() -> None:
    # what bfloat16 keeps: a batch drawn again gives the same samples; what it gives up (a
    # task's samples independent of the batch around it) is float32's, asserted above
    cfg = SamplerConfig(samples=3, max_new_tokens=48, seed=11, dtype="bfloat16")
    handler = TransformersModelHandler(cfg)
    model = handler.load_model()
    assert str(next(model.model.parameters()).dtype) == "torch.bfloat16"
    first = handler.draw(REQUESTS, model)
    again = handler.draw(REQUESTS, model)
    assert [texts for texts, _ in first] == [texts for texts, _ in again]
    assert all(m.completion_tokens >= 1 for _, ms in first for m in ms)
    assert handler.model_id().endswith(" @bfloat16")
