"""--runner DaskRunner: its options are known to curate, and what it cannot run is refused.

No cluster is needed: the refusals happen while the pipeline is translated, before the runner
connects to a scheduler (tests/pipeline/test_dask_runner.py runs the real cluster).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate, window

from tasksieve.pipeline.commands.curate import check_beam_args
from tasksieve.pipeline.curate.beam_main import parse
from tasksieve.pipeline.flags.runner import is_dask

if not os.environ.get("CI"):
    pytest.importorskip("dask.distributed", reason="needs the dask extra")

from tasksieve.pipeline.curate.dask_runner import DaskRunner, UnsupportedOnDask

NOWHERE = "--dask_client_address=tcp://127.0.0.1:9"  # never contacted: refused before


def test_dask_options_pass_curates_check_of_beam_options() -> None:
    args, beam_args = parse(["-i", "x", "-o", "y", "--runner", "DaskRunner", NOWHERE])
    assert is_dask(args.runner) and not is_dask("DirectRunner")
    check_beam_args(beam_args)  # known: no error
    with pytest.raises(ValueError, match="dask_client_adress"):
        check_beam_args(["--dask_client_adress=tcp://127.0.0.1:9"])


class Stateful(beam.DoFn):  # type: ignore[misc]
    SEEN = userstate.ReadModifyWriteStateSpec("seen", beam.coders.VarIntCoder())

    def process(
        self, kv: tuple[str, int], seen: object = beam.DoFn.StateParam(SEEN)
    ) -> Iterator[tuple[str, int]]:
        yield kv


def _pipeline() -> beam.Pipeline:
    return beam.Pipeline(runner=DaskRunner(), options=PipelineOptions([NOWHERE]))


def test_stateful_dofn_is_refused_naming_the_step() -> None:
    p = _pipeline()
    _ = p | beam.Create([("a", 1)]) | "Remember" >> beam.ParDo(Stateful())
    with pytest.raises(UnsupportedOnDask, match=r"'Remember' uses state or timers"):
        p.run()


def test_windows_other_than_global_are_refused() -> None:
    p = _pipeline()
    _ = p | beam.Create([1, 2]) | "Fixed" >> beam.WindowInto(window.FixedWindows(60))
    with pytest.raises(UnsupportedOnDask, match=r"'Fixed' windows into other than the global"):
        p.run()
