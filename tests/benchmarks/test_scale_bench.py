"""The scale benchmark: its corpus plants what it says, its stage timers and its small path."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from benchmarks import scale
from benchmarks.scale_corpus import SHARES, make_corpus, write_corpus
from benchmarks.scale_project import Assumptions, entering
from benchmarks.scale_runner import TIMED_RUNNER, TimedRunner, stage_seconds


def test_corpus_has_the_planted_shares_and_a_replay_for_every_base_task() -> None:
    corpus = make_corpus(1000)
    assert len(corpus.lines) == 1000
    for kind, share in SHARES.items():
        assert corpus.planted[kind] == int(1000 * share)
    ids = [json.loads(x)["id"] for x in corpus.lines if x.endswith("}")]
    base = [i for i in ids if i.split("-")[0] in ("code", "sql", "config")]
    assert set(base) <= set(corpus.replay)
    assert all(len(c) == 4 for c in corpus.replay.values())


def _changed_words(a: str, b: str) -> int:
    wa, wb = a.split(" "), b.split(" ")
    return sum(x != y for x, y in zip(wa, wb, strict=True)) if len(wa) == len(wb) else -1


def test_corpus_near_duplicates_differ_from_their_source_in_a_few_words() -> None:
    corpus = make_corpus(400)
    rows = [json.loads(x) for x in corpus.lines if x.endswith("}")]
    base = [r for r in rows if r["id"].startswith(("code-", "sql-", "config-"))]
    near = [r for r in rows if r["id"].startswith("near-")]
    assert near
    for r in near:
        same = [b for b in base if b["verifier"] == r["verifier"]]
        assert any(1 <= _changed_words(r["prompt"], b["prompt"]) <= 2 for b in same)


def test_write_corpus_shards_lines(tmp_path: Path) -> None:
    tasks, replay = write_corpus(make_corpus(250), tmp_path, shard=100)
    parts = sorted(Path(tasks).glob("*.jsonl"))
    assert [len(p.read_text().splitlines()) for p in parts] == [100, 100, 50]
    assert Path(replay).read_text().count("\n") >= 4 * 200


def test_timed_runner_times_each_top_level_transform() -> None:
    p = beam.Pipeline(options=PipelineOptions([f"--runner={TIMED_RUNNER}"]))
    _ = p | "Make" >> beam.Create(range(50)) | "Square" >> beam.Map(lambda x: x * x)
    p.run().wait_until_finish()
    got = stage_seconds(TimedRunner.results[-1])
    assert {"Make", "Square"} <= set(got)
    assert not [k for k in got if k.startswith("ref_") or "/" in k]


@pytest.mark.parametrize(
    ("rejected_at", "gates", "verify"),
    [({}, 100, 100), ({"Validate": 10, "NearDedup": 5}, 85, 85), ({"Gates": 20}, 100, 80)],
)
def test_entering_subtracts_earlier_rejections(
    rejected_at: dict[str, int], gates: int, verify: int
) -> None:
    got = entering(100, rejected_at)
    assert (got["Gates"], got["Verify"]) == (gates, verify)


@pytest.mark.parametrize(
    ("alive", "want"),
    [
        ({2, 3, 4}, 11.0),  # all alive at the last sample: each counted once
        ({2, 3}, 3.0),  # 4 gone, reaped by 3 (seen): 3's figure holds it
        ({3, 4}, 11.0),  # 2 gone: its parent is the root, which never adds reaped CPU
        (set(), 3.0),
    ],
)
def test_tree_cpu_counts_each_process_once(alive: set[int], want: float) -> None:
    seen = {2: (1, 1.0), 3: (1, 2.0), 4: (3, 8.0)}
    assert scale.tree_cpu(seen, alive, root=1) == want


@pytest.mark.parametrize(
    "bad",
    [{"utilisation": 0.0}, {"cores_per_worker": 0}, {"family_mix": {"code": 0.5}}],
)
def test_assumptions_refuse_impossible_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Assumptions(**bad)  # type: ignore[arg-type]


@pytest.mark.slow
def test_small_path_beam_and_plain_reject_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["--tasks", "1000", "--full-per-family", "0", "--workdir", str(tmp_path)]
    assert scale.main(argv) == 0
    out = capsys.readouterr().out
    assert "rejections per reason at 1,000: beam {" in out
    assert "; plain same" in out
    assert "| NearDedup |" in out


def test_written_rows_compare_runs_by_content_not_by_shard(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": "b", "n": 2}, {"id": "a", "n": 1}]
    (tmp_path / "one" / "x").mkdir(parents=True)
    (tmp_path / "two").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "one" / "x" / "p-0.parquet")
    pq.write_table(pa.Table.from_pylist(rows[:1]), tmp_path / "two" / "p-0.parquet")
    pq.write_table(pa.Table.from_pylist(rows[1:]), tmp_path / "two" / "p-1.parquet")
    assert scale.written_rows(tmp_path / "one") == scale.written_rows(tmp_path / "two")
    assert len(scale.written_rows(tmp_path / "one")) == 2


def test_export_revision_writes_that_revision_once(tmp_path: Path) -> None:
    import subprocess

    repo = Path(scale.__file__).resolve().parents[1]
    probe = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("not a git checkout: --before needs one")
    out = scale.export_revision("HEAD", tmp_path)
    assert (out / "benchmarks" / "scale.py").is_file()
    assert (out / "tasksieve" / "transforms").is_symlink()
    assert scale.export_revision("HEAD", tmp_path) == out
