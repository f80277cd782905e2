"""Imports and exports of repo tasks: SWE-bench records and Harbor directories round-trip."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.schemas import TaskRecord
from tasksieve.transforms.synth.diffs import file_diff
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore
from tests.transforms.synth.conftest import CALC, TESTS, write_project

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_TASKS = ROOT / "examples" / "tasks" / "repo.jsonl"
EXAMPLE_STORE = ROOT / "examples" / "snapshots"
BUGGY = CALC.replace("/ len(values)", "// len(values)")
NEW_TESTS = TESTS + "\n\ndef test_mean_fraction():\n    assert mean([1, 2]) == 1.5\n"


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "HOME": str(repo)}
    env |= {
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return out.stdout.decode().strip()


@pytest.fixture(scope="module")
def swe(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict[str, Any]]]:
    """A local repository (acme/mini) at a buggy commit, and SWE-bench records about it."""
    tmp = tmp_path_factory.mktemp("swe")
    repo = write_project(tmp / "repos" / "acme__mini")
    (repo / "mini" / "calc.py").write_text(BUGGY)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD")
    record = {
        "instance_id": "acme__mini-1",
        "repo": "acme/mini",
        "base_commit": base,
        "patch": file_diff("mini/calc.py", BUGGY.encode(), CALC.encode()),
        "test_patch": file_diff("tests/test_calc.py", TESTS.encode(), NEW_TESTS.encode()),
        "problem_statement": "mean([1, 2]) gives 1, not 1.5.",
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_mean_fraction"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_mean"]),
        "version": "0.1",
        "hints_text": "",
    }
    listed = {
        **record,
        "instance_id": "acme__mini-2",
        "FAIL_TO_PASS": [record["FAIL_TO_PASS"][2:-2]],
    }
    listed["PASS_TO_PASS"] = ["tests/test_calc.py::test_mean"]
    return tmp, tmp / "repos", [record, listed]


def _import(kind: str, paths: list[Path], out: Path, store: Path, *extra: str) -> int:
    argv = ["import", kind, *map(str, paths), "--output", str(out), "--snapshot-store", str(store)]
    return main([*argv, *extra])


def _tasks(path: Path) -> list[dict[str, Any]]:
    return [
        TaskRecord.model_validate_json(ln).model_dump(mode="json")
        for ln in path.read_text().splitlines()
        if ln.strip()
    ]


def test_swebench_import_builds_base_plus_test_patch(
    swe: tuple[Path, Path, list[dict[str, Any]]],
) -> None:
    tmp, repos, records = swe
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    out, store = tmp / "a.jsonl", tmp / "store"
    assert _import("swebench", [src], out, store, "--repos", str(repos)) == 0
    first, second = _tasks(out)
    assert first["verifier"]["fail_to_pass"] == ["tests/test_calc.py::test_mean_fraction"]
    assert second["verifier"]["fail_to_pass"] == first["verifier"]["fail_to_pass"]
    tree = SnapshotStore(store).path(first["verifier"]["snapshot"])
    assert (tree / "tests" / "test_calc.py").read_text() == NEW_TESTS
    assert (tree / "mini" / "calc.py").read_text() == BUGGY
    assert first["reference_solution"] == records[0]["patch"]


def test_swebench_round_trips(swe: tuple[Path, Path, list[dict[str, Any]]]) -> None:
    tmp, repos, records = swe
    src = tmp / "rt.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    store = tmp / "store"
    assert _import("swebench", [src], tmp / "rt1.jsonl", store, "--repos", str(repos)) == 0
    assert (
        main(["export", "swebench", str(tmp / "rt1.jsonl"), "--output", str(tmp / "rt.swe")]) == 0
    )
    exported = tmp / "rt.swe.jsonl"
    exported.write_text((tmp / "rt.swe").read_text())
    assert _import("swebench", [exported], tmp / "rt2.jsonl", store, "--repos", str(repos)) == 0
    assert _tasks(tmp / "rt1.jsonl") == _tasks(tmp / "rt2.jsonl")


def test_swebench_reads_parquet_like_jsonl(swe: tuple[Path, Path, list[dict[str, Any]]]) -> None:
    tmp, repos, records = swe
    pq.write_table(pa.Table.from_pylist(records[:1]), tmp / "in.parquet")
    (tmp / "one.jsonl").write_text(json.dumps(records[0]) + "\n")
    store = tmp / "store"
    assert (
        _import("swebench", [tmp / "in.parquet"], tmp / "p.jsonl", store, "--repos", str(repos))
        == 0
    )
    assert (
        _import("swebench", [tmp / "one.jsonl"], tmp / "j.jsonl", store, "--repos", str(repos)) == 0
    )
    assert _tasks(tmp / "p.jsonl") == _tasks(tmp / "j.jsonl")


def test_bad_swebench_records_are_rejected_and_the_run_goes_on(
    swe: tuple[Path, Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp, repos, records = swe
    good = records[0]
    bad = [
        {**good, "instance_id": "no-patch", "patch": None},
        {**good, "instance_id": "elsewhere", "repo": "acme/other"},
        {**good, "instance_id": "bad-commit", "base_commit": "0" * 40},
        {**good, "instance_id": "bad-list", "FAIL_TO_PASS": "not json"},
        {
            **good,
            "instance_id": "bad-test-patch",
            "test_patch": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
        },
    ]
    src = tmp / "bad.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [good, *bad]) + "{not json\n")
    rej = tmp / "rejected.jsonl"
    code = _import(
        "swebench",
        [src],
        tmp / "b.jsonl",
        tmp / "store",
        "--repos",
        str(repos),
        "--rejected",
        str(rej),
    )
    assert code == 1
    assert [t["id"] for t in _tasks(tmp / "b.jsonl")] == ["acme__mini-1"]
    rows = [json.loads(ln) for ln in rej.read_text().splitlines()]
    got = {(r["line"], r["field"]) for r in rows}
    assert got == {
        (2, "patch"),
        (3, "repo"),
        (4, "base_commit"),
        (5, "FAIL_TO_PASS"),
        (6, "test_patch"),
        (7, "-"),
    }
    assert all(r["path"] == str(src) for r in rows)
    assert f"{src}:3: elsewhere: repo:" in capsys.readouterr().out


def test_harbor_round_trips_a_swebench_import(swe: tuple[Path, Path, list[dict[str, Any]]]) -> None:
    tmp, repos, records = swe
    src = tmp / "h.jsonl"
    src.write_text(json.dumps(records[0]) + "\n")
    store = tmp / "store"
    assert _import("swebench", [src], tmp / "h1.jsonl", store, "--repos", str(repos)) == 0
    argv = ["export", "harbor", str(tmp / "h1.jsonl"), "--output", str(tmp / "harbor")]
    assert main([*argv, "--snapshot-store", str(store)]) == 0
    task_dir = tmp / "harbor" / "acme__mini-1"
    assert {p.name for p in task_dir.iterdir()} >= {
        "task.toml",
        "instruction.md",
        "tests",
        "environment",
        "solution",
    }
    assert _import("harbor", [tmp / "harbor"], tmp / "h2.jsonl", store) == 0
    assert _tasks(tmp / "h1.jsonl") == _tasks(tmp / "h2.jsonl")


def test_harbor_round_trips_shipped_synthesized_tasks(tmp_path: Path) -> None:
    lines = EXAMPLE_TASKS.read_text().splitlines()[:2]
    src = tmp_path / "two.jsonl"
    src.write_text("\n".join(lines) + "\n")
    argv = ["export", "harbor", str(src), "--output", str(tmp_path / "h")]
    assert main([*argv, "--snapshot-store", str(EXAMPLE_STORE)]) == 0
    assert _import("harbor", [tmp_path / "h"], tmp_path / "back.jsonl", tmp_path / "store") == 0
    back = sorted(_tasks(tmp_path / "back.jsonl"), key=lambda t: t["id"])
    assert back == sorted(_tasks(src), key=lambda t: t["id"])  # directories come back by name


def test_bad_harbor_dirs_are_rejected_with_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "tasks" / "broken"
    broken.mkdir(parents=True)
    (broken / "task.toml").write_text('version = "1.0"\n')
    (broken / "instruction.md").write_text("Fix it.")
    (broken / "tests").mkdir()
    (broken / "tests" / "config.json").write_text('{"fail_to_pass": ["t.py::x"]}')
    bad_toml = tmp_path / "tasks" / "bad_toml"
    bad_toml.mkdir()
    (bad_toml / "task.toml").write_text("version = \n")
    big = tmp_path / "tasks" / "big"
    (big / "environment" / "repo").mkdir(parents=True)
    (big / "environment" / "repo" / "blob.py").write_bytes(b"#" * (2 << 20))
    (big / "tests").mkdir()
    (big / "tests" / "config.json").write_text('{"fail_to_pass": ["t.py::x"]}')
    (big / "solution").mkdir()
    (big / "solution" / "fix.patch").write_text("--- a/blob.py\n+++ b/blob.py\n")
    for name in ("task.toml", "instruction.md"):
        (big / name).write_text((broken / name).read_text())
    out_file, store = tmp_path / "o.jsonl", tmp_path / "s"
    assert _import("harbor", [tmp_path / "tasks"], out_file, store, "--max-snapshot-mb", "1") == 1
    out = capsys.readouterr().out
    assert "broken: environment/repo: missing" in out and "bad_toml: task.toml: not TOML" in out
    assert "big: environment/repo:" in out and "over the snapshot limit" in out
