"""The shipped SWE-bench records and Harbor task (examples/imports) import and verify."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.transforms.synth.diffs import file_diff
from tasksieve.verifiers.families.repo.snapshots import SnapshotStore

ROOT = Path(__file__).resolve().parents[3]
IMPORTS = ROOT / "examples" / "imports"
IDS = ["acme__units-1", "acme__units-2", "acme__units-3"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Clone the bundle, import both formats into one store; return (tasks file, store)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    tmp = tmp_path_factory.mktemp("imports")
    repos = tmp / "repos"
    bundle = IMPORTS / "repos" / "acme__units.bundle"
    subprocess.run(
        ["git", "clone", "-q", str(bundle), str(repos / "acme__units")],
        check=True,
        capture_output=True,
    )
    store = tmp / "snapshots"
    common = ["--repos", str(repos), "--snapshot-store", str(store)]
    swe, harbor = IMPORTS / "swebench.jsonl", IMPORTS / "harbor"
    assert main(["import", "swebench", str(swe), "--output", str(tmp / "s.jsonl"), *common]) == 0
    assert main(["import", "harbor", str(harbor), "--output", str(tmp / "h.jsonl"), *common]) == 0
    tasks = tmp / "all.jsonl"
    tasks.write_text((tmp / "s.jsonl").read_text() + (tmp / "h.jsonl").read_text())
    return tasks, store


def _records(tasks: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in tasks.read_text().splitlines() if ln.strip()]


def _verify(
    tasks: Path,
    store: Path,
    solutions: dict[str, str],
    out: Path,
    capsys: pytest.CaptureFixture[str],
) -> dict[str, dict[str, Any]]:
    out.mkdir()
    for tid, patch in solutions.items():
        (out / f"{tid}.patch").write_text(patch)
    capsys.readouterr()
    argv = ["verify", "--task", str(tasks), "--solutions", str(out), "--snapshot-store", str(store)]
    main([*argv, "--jobs", "2"])
    rows = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    return {r["task_id"]: r for r in rows}


def test_each_reference_passes_and_the_empty_patch_fails(
    imported: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks, store = imported
    records = _records(tasks)
    assert [r["id"] for r in records] == IDS
    refs = {r["id"]: r["reference_solution"] for r in records}
    good = _verify(tasks, store, refs, tmp_path / "good", capsys)
    empty = _verify(tasks, store, dict.fromkeys(IDS, ""), tmp_path / "empty", capsys)
    for tid in IDS:
        assert good[tid]["status"] == "pass", good[tid]
        assert empty[tid]["status"] == "fail", empty[tid]
        assert empty[tid]["tests_passed"] > 0  # pass_to_pass still passes before the fix


def test_a_patch_that_rewrites_the_failing_tests_does_not_pass(
    imported: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks, store = imported
    cheats: dict[str, str] = {}
    for r in _records(tasks):
        spec = r["verifier"]
        tree = SnapshotStore(store).path(spec["snapshot"])
        path = spec["fail_to_pass"][0].split("::")[0]
        old = (tree / path).read_text()
        names = [t.split("::")[1] for t in spec["fail_to_pass"]]
        new = "".join(f"\n\ndef {n}():\n    pass\n" for n in names)
        head = old.split(f"\n\ndef {names[0]}(")[0]
        cheats[r["id"]] = file_diff(path, old.encode(), (head + new).encode())
    verdicts = _verify(tasks, store, cheats, tmp_path / "cheat", capsys)
    for tid in IDS:
        assert verdicts[tid]["status"] == "fail", verdicts[tid]
