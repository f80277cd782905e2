"""``--gpu-accelerator`` puts the GPU on the sampling step alone, read from the pipeline proto.

Gates, verification and every other step keep the default (CPU) workers: in the runner API
proto, a transform's resource hints live in the environment it runs in.
"""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
from apache_beam.portability.common_urns import resource_hints

from tasksieve.pipeline.curate.build import build
from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.transforms.samplers import SamplerConfig

ACCEL = "type:nvidia-l4;count:1;install-nvidia-driver"
URN = resource_hints.ACCELERATOR.urn


def _hinted(accelerator: str | None, tmp: str) -> dict[str, bytes]:
    """Transforms of the curate pipeline whose environment has an accelerator hint.

    With the sampler's dead-letter output the inference ParDo sits inside Beam's
    exception-handling composite, which carries the hint too; both must be parts of the
    RunInference step."""
    sampler = SamplerConfig(backend="vllm", model="org/model", accelerator=accelerator)
    cfg = CurateConfig(inputs=("examples/tasks/sql.jsonl",), output=tmp, sampler=sampler)
    p = beam.Pipeline()
    build(p, cfg, tmp, "run")
    proto = p.to_runner_api()
    envs = proto.components.environments
    out: dict[str, bytes] = {}
    for t in proto.components.transforms.values():
        hints = envs[t.environment_id].resource_hints if t.environment_id else {}
        if URN in hints:
            out[t.unique_name] = hints[URN]
    return out


def test_the_accelerator_is_on_the_inference_step_and_no_other(
    tmp_path: Path,
) -> None:
    hinted = _hinted(ACCEL, str(tmp_path))
    assert hinted and set(hinted.values()) == {ACCEL.encode()}
    for name in hinted:  # the inference step and what Beam nests in it, nothing else
        assert name.startswith("Rollouts/") and "/BeamML_RunInference" in name, name


def test_no_accelerator_no_hint(tmp_path: Path) -> None:
    assert _hinted(None, str(tmp_path)) == {}
