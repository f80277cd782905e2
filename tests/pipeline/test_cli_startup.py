"""What each subcommand imports: validate and verify never load Beam, torch or the samplers.

Each case runs the real CLI in a fresh interpreter and lists ``sys.modules`` afterwards, so
an import that sneaks in transitively (a config dataclass living in a Beam module, say)
fails here. No timing is asserted; ``benchmarks/cli_startup.py`` measures the wall time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADD_TASK = ROOT / "examples" / "solutions" / "add.task.json"
ADD_GOOD = ROOT / "examples" / "solutions" / "add_good.py"

# Runs main(argv), then writes the names of the loaded modules to the file named by argv[1].
PROBE = """\
import json, sys
from tasksieve.pipeline.cli import main
out, argv = sys.argv[1], sys.argv[2:]
try:
    rc = main(argv)
except SystemExit as e:
    rc = e.code
with open(out, "w") as f:
    json.dump({"rc": rc, "modules": sorted(sys.modules)}, f)
"""

HEAVY = (
    "apache_beam",
    "torch",
    "transformers",
    "trl",
    "datasets",
    "tasksieve.transforms.samplers",
    "tasksieve.transforms.decontam.stage",
    "tasksieve.transforms.dedup.near",
    "tasksieve.transforms.reliability.gates",
    "tasksieve.transforms.rollouts.rounds",
)


def loaded(tmp_path: Path, *argv: str) -> tuple[int, list[str]]:
    """Exit status and sorted module names after ``tasksieve ARGV`` in a fresh interpreter."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, str(probe), str(out), *argv],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    data = json.loads(out.read_text())
    return data["rc"], data["modules"]


def heavy_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_validate_imports_no_heavy_module(tmp_path: Path) -> None:
    rc, modules = loaded(tmp_path, "validate", str(ROOT / "examples" / "tasks"))
    assert rc == 1  # examples/tasks/problems.jsonl is deliberately invalid: it really ran
    assert heavy_in(modules) == []


def test_verify_imports_no_heavy_module(tmp_path: Path) -> None:
    rc, modules = loaded(tmp_path, "verify", "--task", str(ADD_TASK), "--solution", str(ADD_GOOD))
    assert (
        rc == 0 and "tasksieve.verifiers.families.python.verifier" in modules
    )  # it really verified
    assert heavy_in(modules) == []


def test_verify_batch_imports_no_heavy_module(tmp_path: Path) -> None:
    sols = tmp_path / "sols"
    sols.mkdir()
    (sols / "a.py").write_text(ADD_GOOD.read_text())
    rc, modules = loaded(tmp_path, "verify", "--task", str(ADD_TASK), "--solutions", str(sols))
    assert rc == 0 and "tasksieve.verifiers.families.python.verifier" in modules
    assert heavy_in(modules) == []


@pytest.mark.parametrize("argv", [["--version"], ["completion", "bash"]], ids=" ".join)
def test_parser_alone_imports_no_command_implementation(tmp_path: Path, argv: list[str]) -> None:
    rc, modules = loaded(tmp_path, *argv)
    assert rc == 0
    implementation = ("schemas", "transforms", "verifiers", "pydantic", "pyarrow", "rich")
    assert [m for m in modules if m.split(".")[0] in implementation] == []


def test_probe_sees_beam_when_a_command_loads_it(tmp_path: Path) -> None:
    """``benchmarks build`` needs Beam's module for its config: the checks above can fail."""
    missing = str(tmp_path / "none.jsonl")
    rc, modules = loaded(tmp_path, "benchmarks", "build", "-b", missing, "-o", str(tmp_path))
    assert rc == 2  # the benchmark file is missing: a clean usage error
    assert "apache_beam" in modules
