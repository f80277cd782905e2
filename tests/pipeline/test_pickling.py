"""Everything the curate pipeline ships to workers survives Beam's picklers.

The pipeline is serialised to its runner proto (every DoFn, combine fn and coder pickled) and
read back (every payload unpickled) with each pickler Beam offers; the portable-runner tests
cover the default pickler across a process boundary.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.internal import pickler
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.pipeline.curate.build import build
from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.transforms.samplers import SamplerConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def library(request: pytest.FixtureRequest) -> Iterator[str]:
    pickler.set_library(request.param)
    yield request.param
    pickler.set_library(pickler.DEFAULT_PICKLE_LIB)


@pytest.mark.parametrize("library", [pickler.USE_CLOUDPICKLE, pickler.USE_DILL], indirect=True)
def test_the_curate_pipeline_round_trips_through_the_pickler(library: str, tmp_path: Path) -> None:
    replay = str(ROOT / "examples" / "replay" / "completions.jsonl")
    cfg = CurateConfig(
        inputs=(str(ROOT / "examples" / "tasks"),),
        output=str(tmp_path / "out"),
        sampler=SamplerConfig(backend="replay", replay_path=replay, samples=2),
    )
    opts = PipelineOptions(["--runner=DirectRunner"])
    p = beam.Pipeline(options=opts)
    build(p, cfg, str(tmp_path / "staging"), "run-pickle")
    proto = p.to_runner_api()
    back = beam.Pipeline.from_runner_api(proto, p.runner, opts)
    names = {t.full_label for t in back.transforms_stack[0].parts}
    assert {"Ingest", "Gates", "Verify", "Write"} <= names, names
    pardos = [
        t for t in proto.components.transforms.values() if t.spec.urn == "beam:transform:pardo:v1"
    ]
    assert len(pardos) > 10
