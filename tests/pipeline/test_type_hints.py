"""Beam reads no type hint it would warn about and then ignore.

Beam takes a PTransform's ``expand`` annotations as its type hints. A hint that is not one
PCollection (a stage returning its outputs by tag as a dict) is logged as a warning and then
dropped, once per application: ``make demo`` printed 197 such warnings (about 1,200 lines)
before its first progress line. Such an ``expand`` is marked with Beam's ``no_annotations``,
which drops the same hint without the warning; the annotations stay for mypy.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import pkgutil
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.typehints.decorators import IOTypeHints

import tasksieve
from tasksieve.pipeline.curate.build import build
from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.transforms.samplers import SamplerConfig

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
OPTIONAL = {"dask", "distributed", "docker", "openai", "torch", "transformers", "vllm", "airflow"}


def _project_transforms() -> list[type[beam.PTransform]]:
    """Every PTransform subclass with its own ``expand`` in a project module."""
    for info in pkgutil.walk_packages(tasksieve.__path__, "tasksieve."):
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec else None
        if info.ispkg or not origin or "def expand(" not in Path(origin).read_text():
            continue  # guest scripts among them run on import
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # an optional extra's module, absent here
            if (exc.name or "").split(".")[0] not in OPTIONAL:
                raise
    seen: list[type[beam.PTransform]] = []
    todo = list(beam.PTransform.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("tasksieve.") and "expand" in vars(cls):
            seen.append(cls)
    return sorted(set(seen), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_every_project_transform_gives_beam_hints_it_can_use(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transforms = _project_transforms()
    assert len(transforms) > 20, transforms  # the walk found the stages
    warned = []
    for cls in transforms:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            hints = IOTypeHints.from_callable(cls.expand)
            if hints is not None:
                hints.strip_pcoll()  # what PTransform.default_type_hints does on every apply
        if caplog.records:
            warned.append(f"{cls.__module__}.{cls.__qualname__}: {caplog.records[0].message}")
    assert not warned, "\n".join(warned)


def test_building_the_curate_pipeline_logs_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The default (one-shot) pipeline, as ``make demo`` builds it; every other mode's
    transforms are checked one by one above."""
    cfg = CurateConfig(
        inputs=(str(ROOT / "examples" / "tasks" / "sql.jsonl"),),
        output=str(tmp_path / "out"),
        sampler=SamplerConfig(backend="replay", replay_path=str(REPLAY), samples=4),
    )
    p = beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"]))
    with caplog.at_level(logging.WARNING):
        build(p, cfg, str(tmp_path / "staging"), "run-hints")
        p.to_runner_api()
    assert [r.getMessage() for r in caplog.records] == []  # Beam logs on the root logger
