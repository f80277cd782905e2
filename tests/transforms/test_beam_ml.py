"""Beam's inference API without the model manager's torch (``transforms/runtime/beam_ml.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tasksieve.transforms.runtime.beam_ml import PLUGIN, worker_args

# A fresh interpreter: builds the curate pipeline's modules, runs RunInference over the replay
# sampler on the in-memory runner (checking its output), then reports what got loaded.
PROBE = textwrap.dedent(
    """
    import json, resource, sys
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to
    import tasksieve.pipeline.curate.build
    from tasksieve.transforms.runtime.beam_ml import RunInference
    from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, make_model_handler

    cfg = SamplerConfig(backend="replay", replay_path=sys.argv[1], samples=1)
    with beam.Pipeline("DirectRunner") as p:
        got = (
            p
            | beam.Create([SampleRequest("a", "code", "p"), SampleRequest("b", "code", "p")])
            | RunInference(make_model_handler(cfg))
            | beam.Map(lambda s: (s.task_id, tuple(s.completions)))
        )
        assert_that(got, equal_to([("a", ("x",)), ("b", ("y",))]))
    base = sys.modules["apache_beam.ml.inference.base"]
    report = {
        "torch": "torch" in sys.modules,
        "scipy.optimize": "scipy.optimize" in sys.modules,
        "resource": base.resource is resource,
        "manager": base.ModelManager is None,
    }
    import apache_beam.ml.inference.model_manager  # still importable when asked for
    report["torch_after"] = "torch" in sys.modules
    print(json.dumps(report))
    """
)


def test_the_pipeline_runs_inference_without_loading_torch(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    rec.write_text('{"task_id": "a", "completion": "x"}\n{"task_id": "b", "completion": "y"}\n')
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(rec)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not report["torch"] and not report["scipy.optimize"], report
    assert report["resource"], "Beam's peak-memory reading lost its resource module"
    assert report["manager"]
    assert report["torch_after"], "the model manager stayed blocked after the guarded import"
    assert "Resource module is not available" not in proc.stderr


@pytest.mark.slow
def test_multi_process_workers_of_a_curate_run_do_not_load_torch() -> None:
    """An SDK worker whose first bundle is RunInference unpickles Beam's inference DoFn (its
    class is in ``base``) before any module of the project: with the curate run's options it
    has imported ``beam_ml`` at start (no torch); without the plugin option it loads torch."""
    from benchmarks.sdk_worker import run_once

    plugin, default = run_once("plugin"), run_once("default")
    assert len(plugin) == len(default) == 2, (plugin, default)  # one row per worker process
    assert all(w["inference_api"] and not w["torch"] for w in plugin), plugin
    assert all(w["inference_api"] and w["torch"] for w in default), default


@pytest.mark.parametrize(
    ("args", "added"),
    [
        ([], [f"--beam_plugins={PLUGIN}"]),
        (["--beam_plugins=my.plugin"], [f"--beam_plugins={PLUGIN}"]),
        ([f"--beam_plugins=my.plugin,{PLUGIN}"], []),
        ([f"--beam_plugin={PLUGIN}"], []),
    ],
)
def test_the_plugin_option_is_added_once(args: list[str], added: list[str]) -> None:
    assert worker_args(args) == added
