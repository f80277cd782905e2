"""Staging and publishing of runs without the pipeline: the remote pointer (on S3 through moto
on loopback) and the local staging directories of failed runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.pipeline.outputs.staging import (
    FAILED,
    LocalTarget,
    OutputExists,
    RemoteTarget,
    published_run,
    target_for,
)
from tasksieve.transforms.algorithms.minhash import MinHasher
from tasksieve.transforms.algorithms.textsim import ShingleConfig
from tasksieve.transforms.dedup.index_store import (
    index_files,
    index_settings,
    read_index_part,
    write_index_part,
)
from tasksieve.transforms.runtime import fsio
from tests.s3_server import S3Server, s3_server


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        fsio.configure(PipelineOptions(server.beam_args))
        yield server


def _stage(target: RemoteTarget, s3: S3Server) -> None:
    """What the pipeline and the driver leave before publishing: a shard and a manifest."""
    key = fsio.relative(target.run_dir, f"s3://{s3.bucket}")
    s3.put(f"{key}/tasks/code/part-00000-of-00001.parquet", b"shard")
    (target.local_dir() / "manifest.json").write_text(json.dumps({"run_id": target.run_id}))


@pytest.mark.parametrize(
    ("output", "kind"),
    [("s3://b/out", RemoteTarget), ("gs://b/out/", RemoteTarget), ("out", LocalTarget)],
)
def test_target_follows_the_filesystem(output: str, kind: type) -> None:
    assert isinstance(target_for(output, "r1"), kind)


def test_overwrite_moves_the_pointer_then_deletes_the_old_run(s3: S3Server) -> None:
    out = s3.url("over")
    first = RemoteTarget(out, "r1")
    _stage(first, s3)
    first.publish()
    assert published_run(out) == first.run_dir
    second = RemoteTarget(out, "r2")
    with pytest.raises(OutputExists, match="--overwrite"):
        second.check(overwrite=False)
    _stage(second, s3)
    assert published_run(out) == first.run_dir  # nothing visible before the pointer moves
    second.publish()
    assert published_run(out) == second.run_dir
    assert s3.keys("over/runs/r1/") == []
    assert "over/runs/r2/manifest.json" in s3.keys("over/runs/r2/")


def test_clean_failed_spares_runs_without_the_marker(s3: S3Server) -> None:
    out = s3.url("clean")
    s3.put("clean/runs/bad/tasks/x.parquet", b"x")
    s3.put(f"clean/runs/bad/{FAILED}", b"OSError: boom\n")
    s3.put("clean/runs/running/tasks/x.parquet", b"x")
    gone = RemoteTarget(out, "new").clean_failed()
    assert gone == [s3.url("clean/runs/bad")]
    assert s3.keys("clean/runs/") == ["clean/runs/running/tasks/x.parquet"]


@pytest.mark.parametrize("run", ["../elsewhere", "/abs", "runs/../../x"])
def test_a_pointer_outside_the_output_is_refused(s3: S3Server, run: str) -> None:
    s3.put("evil/current.json", json.dumps({"run_id": "x", "run": run}).encode())
    with pytest.raises(ValueError, match="not a path below"):
        published_run(s3.url("evil"))


def test_local_failed_staging_is_marked_and_cleaned_later(tmp_path: Path) -> None:
    failed = LocalTarget(tmp_path / "out", "r1")
    failed.begin()
    kept = failed.keep_failed(OSError("disk full"))
    assert kept == str(failed.staging)
    assert "disk full" in (failed.staging / FAILED).read_text()
    running = LocalTarget(tmp_path / "out", "r2")
    running.begin()  # another run still going on: no marker, not cleaned
    later = LocalTarget(tmp_path / "out", "r3")
    later.begin()
    assert later.clean_failed() == [str(failed.staging)]
    assert running.staging.is_dir() and not failed.staging.exists()


def test_dedup_index_reads_and_writes_on_s3(s3: S3Server) -> None:
    shingle = ShingleConfig()
    settings = index_settings(shingle, 16, 1)
    path = s3.url("index")
    hasher = MinHasher(16, 1)
    write_index_part(
        path, settings, ["a", "b"], ["run:x"] * 2, ["alpha beta", "gamma"], hasher, shingle
    )
    write_index_part(path, settings, ["c"], ["run:y"], ["delta epsilon"], hasher, shingle)
    (first, second) = index_files(path)
    assert first.startswith(path + "/part-00000-") and second.startswith(path + "/part-00001-")
    rows = [r for f in index_files(path) for r in read_index_part(f)]
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert all(isinstance(r[2], np.ndarray) and r[2].size == 16 for r in rows)
    with pytest.raises(ValueError, match="built with"):
        write_index_part(
            path, index_settings(shingle, 32, 1), ["d"], ["run:z"], ["x"], MinHasher(32, 1), shingle
        )


def test_a_failure_after_publishing_leaves_the_published_run_alone(s3: S3Server) -> None:
    target = RemoteTarget(s3.url("late"), "r1")
    _stage(target, s3)
    target.publish()
    assert target.keep_failed(OSError("dedup index unwritable")) is None
    assert f"late/runs/r1/{FAILED}" not in s3.keys("late/")
    assert RemoteTarget(s3.url("late"), "r2").clean_failed() == []
    assert published_run(s3.url("late")) == target.run_dir
