"""Repo tasks through ``tasksieve curate`` (replay sampler): gates, diffs from completions,
verdicts per test, rejections with reasons, the ``repo`` partition of tasks/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tests.curate_flags import FAST
from tests.verifiers.repo.repo_fixture import EDITED_TESTS, TESTS, build_repo, file_diff, make_task

pytestmark = pytest.mark.slow

GOOD, GONE = "repo/mathlib-sub", "repo/gone"


def _completions(reference: str) -> list[dict[str, str]]:
    wrong = reference.replace("+    return a - b", "+    return b - a")
    cheat = file_diff("tests/test_ops.py", TESTS, EDITED_TESTS)
    return [
        {"task_id": GOOD, "completion": f"The fix:\n\n```diff\n{reference}```\n"},
        {"task_id": GOOD, "completion": f"Try this:\n```diff\n{wrong}```"},
        {"task_id": GOOD, "completion": f"```diff\n{cheat}```"},
    ]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("curate-repo")
    inp = root / "in"
    store = SnapshotStore(inp / "snapshots")  # found beside the input file, no flag needed
    good = make_task(store, build_repo(root / "repo"), task_id=GOOD)
    gone = good.model_copy(
        update={
            "id": GONE,
            "prompt": "mul(a, b) is wrong for negative numbers; make it multiply.",
            "verifier": good.verifier.model_copy(update={"snapshot": "sha256:" + "0" * 64}),
        }
    )
    lines = [t.model_dump_json() for t in (good, gone)]
    (inp / "repo.jsonl").write_text("\n".join(lines) + "\n")
    replay = root / "replay.jsonl"
    replay.write_text(
        "\n".join(json.dumps(c) for c in _completions(good.reference_solution)) + "\n"
    )
    out = root / "out"
    argv = ["curate", "--input", str(inp / "repo.jsonl"), "--output", str(out), "--quiet"]
    argv += ["--sampler", "replay", "--replay", str(replay), "--samples", "3", "--no-humaneval"]
    argv += [*FAST, "--too-easy", "1.0", "--too-hard", "0.0"]
    assert main(argv) == 0
    return out


def _rows(out: Path, sub: str) -> list[dict[str, Any]]:
    return [r for f in sorted((out / sub).rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_missing_snapshot_is_rejected_naming_the_task(run: Path) -> None:
    rows = {r["record_id"]: r for r in _rows(run, "rejected")}
    assert rows[GONE]["reason"] == "repo.snapshot"
    assert GONE in rows[GONE]["detail"] and "is not in the store" in rows[GONE]["detail"]


def test_each_completion_is_judged_per_test(run: Path) -> None:
    rows = sorted(_rows(run, "rollouts"), key=lambda r: r["sample_index"])
    assert [r["verdict"]["status"] for r in rows] == ["pass", "fail", "fail"]
    checks = {c["name"]: c["passed"] for c in rows[1]["verdict"]["checks"]}
    assert checks["pass_to_pass:tests/test_ops.py::test_add"] is True
    assert checks["fail_to_pass:tests/test_ops.py::test_sub"] is False
    assert "restored from the snapshot: tests/test_ops.py" in rows[2]["verdict"]["detail"]


def test_kept_task_lands_in_the_repo_partition_with_its_listing(run: Path) -> None:
    tasks = _rows(run, "tasks/repo")
    assert [t["id"] for t in tasks] == [GOOD]
    gates = {g["gate"]: g["passed"] for g in tasks[0]["gates"]}
    assert gates == {"reference_passes": True, "trivial_fails": True}
    assert "mathlib/ops.py" in json.loads(tasks[0]["metadata"])["repo_files"]
