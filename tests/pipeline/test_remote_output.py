"""`tasksieve curate` from s3:// inputs to an s3:// output (Beam's S3 filesystem, moto on
loopback): the same rows as a local run, published only through ``current.json``; a failed
run keeps its staging (locally and remotely) until a later successful run cleans it; corrupt
input files end as ``ingest.unreadable_file`` rejections with conservation intact."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import tasksieve.pipeline.curate.run
from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST
from tests.s3_server import S3Server, s3_server

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks" / "code.jsonl"
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
CORRUPT = {"cut.jsonl.gz", "cut.parquet", "open.json"}
FAULT = "planted storage fault"


def _inputs() -> dict[str, bytes]:
    """A few good tasks plus one corrupt file of each kind (names relative to the input dir)."""
    lines = [ln for ln in TASKS.read_text().splitlines() if ln.strip()]
    return {
        "good.jsonl": "\n".join(lines[:4]).encode() + b"\n",
        "cut.jsonl.gz": gzip.compress(b"\n".join(ln.encode() for ln in lines[6:9]))[:-30],
        "cut.parquet": _to_parquet(lines[4:6])[:-50],
        "open.json": ("[" + lines[9] + ", " + lines[10][:40]).encode(),
    }


def _to_parquet(lines: list[str]) -> bytes:
    import pyarrow as pa

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"id": json.loads(ln)["id"]} for ln in lines]), buf)
    return buf.getvalue()


def _curate(inp: str, out: str, replay: str, *extra: str) -> int:
    args = ["curate", "--input", inp, "--output", out, "--sampler", "replay", "--replay", replay]
    return main([*args, "--samples", "4", "--quiet", *FAST, *extra])


def _planted_fault(*_: Any, **__: Any) -> Any:
    raise OSError(FAULT)


@dataclass(frozen=True)
class Attempts:
    """A failed run and then a successful one into the same output."""

    failed_code: int
    failed_err: str
    after_failure: list[str]  # files/keys under the output's parent (local) or output (s3)
    ok_code: int
    after_ok: list[str]
    out: str


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


def _attempts(inp: str, out: str, replay: str, listing: Any, extra: list[str]) -> Attempts:
    """Curate with a storage fault planted after the shards are written, then without."""
    stderr = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(stderr):
        mp.setattr(tasksieve.pipeline.curate.run, "write_report", _planted_fault)
        failed = _curate(inp, out, replay, *extra)
    err = " ".join(stderr.getvalue().split())
    after_failure = listing()
    with contextlib.redirect_stderr(io.StringIO()):
        ok = _curate(inp, out, replay, *extra)
    return Attempts(failed, err, after_failure, ok, listing(), out)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Attempts:
    base = tmp_path_factory.mktemp("local")
    for name, data in _inputs().items():
        (base / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        (base / "in" / name).write_bytes(data)
    parent = base / "o"
    parent.mkdir()

    def listing() -> list[str]:
        return sorted(p.relative_to(parent).as_posix() for p in parent.rglob("*") if p.is_file())

    return _attempts(str(base / "in"), str(parent / "out"), str(REPLAY), listing, [])


@pytest.fixture(scope="module")
def remote(s3: S3Server) -> Attempts:
    for name, data in _inputs().items():
        s3.put(f"in/{name}", data)
    s3.put("replay/completions.jsonl", REPLAY.read_bytes())

    def listing() -> list[str]:
        return [k.removeprefix("out/") for k in s3.keys("out/")]

    return _attempts(
        s3.url("in"), s3.url("out"), s3.url("replay/completions.jsonl"), listing, s3.beam_args
    )


def _run_id(listing: list[str]) -> set[str]:
    return {k.split("/")[1] for k in listing if k.startswith("runs/")}


def _rows_local(out: Path, sub: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted((out / sub).rglob("*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return rows


def _rows_s3(s3: S3Server, run: str, sub: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for key in s3.keys(f"{run}/{sub}/"):
        if key.endswith(".parquet"):
            rows.extend(pq.read_table(io.BytesIO(s3.get(key))).to_pylist())
    return rows


def _published(s3: S3Server) -> str:
    pointer = json.loads(s3.get("out/current.json"))
    return f"out/{pointer['run']}"


COLUMNS = {
    "tasks": ("id", "family", "prompt", "n", "k", "pass_rate", "reward"),
    "rejected": ("record_id", "stage", "reason", "source_file", "source_line", "pass_rate"),
    "rollouts": ("task_id", "sample_index", "completion", "reward"),
}


def _comparable(rows: list[dict[str, Any]], sub: str) -> list[str]:
    """The rows' run-independent columns (input files by base name), sorted."""

    def value(row: dict[str, Any], col: str) -> Any:
        v = row.get(col)
        return v.rsplit("/", 1)[-1] if col == "source_file" and v else v

    return sorted(json.dumps([value(r, c) for c in COLUMNS[sub]], default=str) for r in rows)


# ---------------------------------------------------------------- remote output
def test_remote_run_has_the_rows_of_the_local_run(
    local: Attempts, remote: Attempts, s3: S3Server
) -> None:
    assert (local.ok_code, remote.ok_code) == (0, 0)
    run = _published(s3)
    for sub in ("tasks", "rejected", "rollouts"):
        here = _comparable(_rows_local(Path(local.out), sub), sub)
        there = _comparable(_rows_s3(s3, run, sub), sub)
        assert here and there == here, sub


def test_remote_run_is_published_through_its_pointer(remote: Attempts, s3: S3Server) -> None:
    run = _published(s3)
    manifest = json.loads(s3.get(f"{run}/manifest.json"))
    assert run == f"out/runs/{manifest['run_id']}"
    for rel in manifest["outputs"]["tasks"] + manifest["outputs"]["rejected"]:
        assert f"{run}/{rel}" in s3.keys(run)
    assert {f"{run}/catalog.duckdb", f"{run}/report.html"} <= set(s3.keys(run))


def test_failed_remote_run_publishes_nothing_and_keeps_its_staging(remote: Attempts) -> None:
    assert remote.failed_code == 2 and FAULT in remote.failed_err
    assert "current.json" not in remote.after_failure
    (failed_id,) = _run_id(remote.after_failure)
    assert f"runs/{failed_id}/FAILED" in remote.after_failure
    assert any(k.startswith(f"runs/{failed_id}/tasks/") for k in remote.after_failure)
    assert not any(k.endswith("manifest.json") for k in remote.after_failure)
    assert failed_id in remote.failed_err and "kept for inspection" in remote.failed_err


def test_later_remote_run_cleans_the_failed_staging(remote: Attempts) -> None:
    (failed_id,) = _run_id(remote.after_failure)
    assert failed_id not in _run_id(remote.after_ok)
    assert len(_run_id(remote.after_ok)) == 1 and "current.json" in remote.after_ok


# ---------------------------------------------------------------- local output
CACHE = "out.rollout-cache"  # the rollout cache, kept beside the output on purpose


def test_failed_local_run_keeps_its_staging_beside_the_output(local: Attempts) -> None:
    assert local.failed_code == 2 and FAULT in local.failed_err
    assert not any(k.startswith("out/") for k in local.after_failure)
    staged = {k.split("/")[0] for k in local.after_failure} - {CACHE}
    (staging,) = staged
    assert staging.startswith(".out.staging-") and f"{staging}/FAILED" in local.after_failure
    assert staging.removeprefix(".out.staging-") in local.failed_err


def test_later_local_run_cleans_the_failed_staging(local: Attempts) -> None:
    assert local.ok_code == 0
    assert {k.split("/")[0] for k in local.after_ok} == {"out", CACHE}


# ---------------------------------------------------------------- corrupt inputs
@pytest.mark.parametrize("where", ["local", "remote"])
def test_corrupt_inputs_end_as_one_rejection_each(
    where: str, local: Attempts, remote: Attempts, s3: S3Server
) -> None:
    if where == "local":
        rows = _rows_local(Path(local.out), "rejected")
        manifest = json.loads((Path(local.out) / "manifest.json").read_text())
    else:
        rows = _rows_s3(s3, _published(s3), "rejected")
        manifest = json.loads(s3.get(f"{_published(s3)}/manifest.json"))
    unreadable = [r for r in rows if r["reason"] == "ingest.unreadable_file"]
    assert sorted(r["source_file"].rsplit("/", 1)[-1] for r in unreadable) == sorted(CORRUPT)
    assert all(r["stage"] == "ingest" and r["source_file"] in r["detail"] for r in unreadable)
    counts = manifest["counts"]
    assert counts["input"] == counts["kept"] + counts["rejected"]
    assert manifest["stage_counters"]["ingest.unreadable_files"] == len(CORRUPT)


# ---------------------------------------------------------------- readers
def test_query_reads_the_published_remote_run(
    remote: Attempts, s3: S3Server, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = json.loads(s3.get(f"{_published(s3)}/manifest.json"))
    capsys.readouterr()
    sql = "select count(*) as n from tasks"
    assert main(["query", remote.out, sql, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"n": manifest["counts"]["kept"]}


def test_query_of_an_unpublished_remote_output_is_a_clean_error(
    remote: Attempts, s3: S3Server, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", s3.url("never-written"), "select 1"]) == 2
    err = capsys.readouterr().err
    assert "current.json" in err and "Traceback" not in err
