"""``benchmarks/detector_costs.py`` on one example task: the same outcomes in every pass, and a
warm pass that enters no sandbox for the gates and detectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import detector_costs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_one_task_costs_nothing_on_a_warm_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the passes run ``python -m benchmarks.detector_costs``
    rows = (ROOT / "examples" / "tasks" / "code.jsonl").read_text().splitlines()
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "t.jsonl").write_text(rows[0] + "\n")
    out = tmp_path / "passes.json"
    assert detector_costs.main(["--input", str(tmp_path / "tasks"), "--json", str(out)]) == 0
    assert "same gate reasons and reports in every pass: True" in capsys.readouterr().out
    passes = {p["mode"]: p for p in json.loads(out.read_text())["passes"]}
    assert sum(passes["off"]["entries"].values()) == sum(passes["cold"]["entries"].values()) > 0
    assert not any(where.split("/")[0] != "verify" for where in passes["warm"]["entries"])
