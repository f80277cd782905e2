"""``curate --sandbox remote`` against a real server keeps and rejects what a local run does."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tests.curate_flags import FAST
from tests.service.servers import TOKEN, Server, start_server

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "examples" / "replay" / "completions.jsonl"
FAMILIES = ("code.jsonl", "sql.jsonl", "config.jsonl")  # the api family is slow (a mock cloud)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tasks")
    for name in FAMILIES:
        shutil.copy(ROOT / "examples" / "tasks" / name, d / name)
    return d


@pytest.fixture(scope="module")
def remote_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("curate-server"), "--workers", "2")
    yield srv
    srv.stop()


def curate(inputs: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "curate",
            "--input",
            str(inputs),
            "--output",
            str(out),
            "--sampler",
            "replay",
            "--replay",
            str(REPLAY),
            "--samples",
            "4",
            "--quiet",
            "--no-humaneval",
            *FAST,  # the subject is verification through the service, not the detectors
            *extra,
        ]
    )


def outcome(out: Path) -> tuple[set[str], set[tuple[str, str]]]:
    """(kept task ids, (rejected id, reason) pairs) of one run."""

    def rows(sub: str) -> list[dict]:
        found: list[dict] = []
        for f in sorted((out / sub).rglob("*.parquet")):
            found += pq.read_table(f).to_pylist()
        return found

    kept = {r["id"] for r in rows("tasks")}
    rejected = {(r["record_id"], r["reason"]) for r in rows("rejected")}
    return kept, rejected


@pytest.mark.slow
def test_remote_curate_keeps_and_rejects_what_local_does(
    inputs: Path, remote_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKSIEVE_SERVICE_TOKEN", TOKEN)
    assert curate(inputs, tmp_path / "local") == 0
    remote = ("--sandbox", "remote", "--sandbox-url", f"http://127.0.0.1:1,{remote_server.url}")
    assert curate(inputs, tmp_path / "remote", *remote) == 0
    local_kept, local_rejected = outcome(tmp_path / "local")
    assert local_kept  # the comparison means something
    assert outcome(tmp_path / "remote") == (local_kept, local_rejected)
    assert "tasksieve_verdicts_total" in remote_server.get("/metrics").text
