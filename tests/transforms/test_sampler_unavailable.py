"""A sampler that cannot sample at all stops the run; one failing task does not."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tasksieve.transforms.rollouts.cache.sampler import CachedModelHandler, wrap_handler
from tasksieve.transforms.rollouts.guard import Isolating, failed_samples
from tasksieve.transforms.runtime.beam_ml import ModelHandler
from tasksieve.transforms.runtime.deadletter import fault_of
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, SamplerUnavailable, Samples

CFG = SamplerConfig(backend="replay", replay_path="r.jsonl", samples=2)
REQ = SampleRequest("t.one", "code", "Write add(a, b).", "add")


class _Broken(ModelHandler[SampleRequest, Samples, Any]):
    """A sampler whose model never loads, or whose server is gone for good."""

    def __init__(self, *, load_fails: bool = False, hint: str | None = None) -> None:
        super().__init__()
        self.load_fails, self.hint = load_fails, hint

    def load_model(self) -> Any:
        if self.load_fails:
            raise FileNotFoundError("no such model directory")
        return object()

    def run_inference(
        self, batch: Sequence[SampleRequest], model: Any, inference_args: Any = None
    ) -> Iterable[Samples]:
        raise SamplerUnavailable("the server is gone for good")

    def get_resource_hints(self) -> dict[str, Any]:
        return {"accelerator": self.hint} if self.hint else {}


def test_isolating_does_not_turn_an_unavailable_sampler_into_task_errors() -> None:
    with pytest.raises(SamplerUnavailable, match="gone for good"):
        Isolating(_Broken(), CFG).run_inference([REQ, REQ], object())


def test_a_model_that_fails_to_load_behind_the_cache_stops_the_run(tmp_path: Path) -> None:
    handler = CachedModelHandler(_Broken(load_fails=True), CFG, str(tmp_path / "cache"))
    model = handler.load_model()  # the cache loads; the model waits for the first miss
    with pytest.raises(SamplerUnavailable, match="FileNotFoundError: no such model directory"):
        list(handler.run_inference([REQ], model))


def test_what_beam_caught_of_an_unavailable_sampler_is_raised_again() -> None:
    try:
        raise SamplerUnavailable("the server did not start")
    except SamplerUnavailable as exc:
        caught = (type(exc), repr(exc), [f"SamplerUnavailable: {exc}\n"])
        one_task = fault_of("rollouts", RuntimeError("bad prompt"))
    with pytest.raises(SamplerUnavailable, match="did not start"):
        list(failed_samples((("t.one", REQ), caught), CFG))
    (tid, samples), *_ = failed_samples((("t.one", REQ), one_task), CFG)  # one task's fault
    assert tid == "t.one" and samples.error is not None and not samples.completions


def test_the_cache_forwards_the_samplers_resource_hints(tmp_path: Path) -> None:
    inner = _Broken(hint="type:nvidia-l4;count:1")
    wrapped = Isolating(CachedModelHandler(inner, CFG, str(tmp_path / "cache")), CFG)
    assert wrapped.get_resource_hints() == {"accelerator": "type:nvidia-l4;count:1"}


class _Shared(_Broken):
    """A sampler whose one model serves every process of a machine (as the vLLM server)."""

    def share_model_across_processes(self) -> bool:
        return True


def test_a_sampler_sharing_its_model_across_processes_is_not_wrapped(tmp_path: Path) -> None:
    shared = _Shared()
    assert wrap_handler(shared, CFG, str(tmp_path / "cache")) is shared
    assert isinstance(wrap_handler(_Broken(), CFG, str(tmp_path / "cache")), CachedModelHandler)
