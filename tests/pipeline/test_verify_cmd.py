"""``tasksieve verify``: one solution, batches from a directory or a rows file, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.commands.verify_run import exit_code

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "examples" / "solutions"
ADD_TASK = SOLUTIONS / "add.task.json"
CODE_TASKS = ROOT / "examples" / "tasks" / "code.jsonl"
GOOD = (SOLUTIONS / "add_good.py").read_text()
WRONG = (SOLUTIONS / "add_wrong.py").read_text()


def verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """Run ``tasksieve verify ARGV``; return the exit status, stdout lines and stderr."""
    rc = main(["verify", *argv])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err


def code_tasks(n: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in CODE_TASKS.read_text().splitlines()[:n]]


def rows(path: Path, *items: dict[str, Any] | str) -> Path:
    path.write_text("".join((i if isinstance(i, str) else json.dumps(i)) + "\n" for i in items))
    return path


def folder(path: Path, files: dict[str, str | bytes]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        f = path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


# ------------------------------------------------------------------ one solution
def test_single_pass_prints_one_json_object_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = verify(
        capsys, "--task", str(ADD_TASK), "--solution", str(SOLUTIONS / "add_good.py")
    )
    verdict = json.loads("\n".join(out))
    assert rc == 0
    assert (verdict["task_id"], verdict["status"], verdict["tests_passed"]) == (
        "code.add",
        "pass",
        5,
    )


def test_single_fail_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = verify(
        capsys, "--task", str(ADD_TASK), "--solution", str(SOLUTIONS / "add_wrong.py")
    )
    assert rc == 1
    assert json.loads("\n".join(out))["status"] == "fail"


def test_single_text_format_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    sol = str(SOLUTIONS / "add_good.py")
    rc, out, _ = verify(capsys, "--task", str(ADD_TASK), "--solution", sol, "--format", "text")
    assert rc == 0
    assert out == [f"{sol}: code.add: pass (5/5)"]


@pytest.mark.parametrize(
    "statuses,code",
    [
        (["pass"], 0),
        (["pass", "pass"], 0),
        (["pass", "fail"], 1),
        (["error"], 1),
        (["timeout", "pass"], 1),
        (["fail", "infra_error"], 3),
        (["infra_error"], 3),
    ],
)
def test_exit_code_from_verdicts(statuses: list[str], code: int) -> None:
    assert exit_code(Counter(statuses)) == code


# ------------------------------------------------------------------ batches
def test_directory_batch_prints_jsonl_in_name_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sols = folder(tmp_path / "sols", {"b_wrong.py": WRONG, "a_good.py": GOOD, ".hidden": "x"})
    rc, out, err = verify(capsys, "--task", str(ADD_TASK), "--solutions", str(sols))
    got = [json.loads(line) for line in out]
    assert rc == 1
    assert [(v["name"], v["task_id"], v["status"]) for v in got] == [
        ("a_good.py", "code.add", "pass"),
        ("b_wrong.py", "code.add", "fail"),
    ]
    assert err.splitlines()[-1].startswith("tasksieve verify: 2 solutions in ")
    assert err.splitlines()[-1].endswith(": 1 pass, 1 fail")


def test_all_pass_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sols = folder(tmp_path / "sols", {"one.py": GOOD, "two.py": GOOD})
    rc, out, _ = verify(capsys, "--task", str(ADD_TASK), "--solutions", str(sols), "-j", "2")
    assert rc == 0 and len(out) == 2


def test_rows_file_against_many_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = code_tasks(4)
    sol = rows(
        tmp_path / "sol.jsonl",
        *[{"task_id": t["id"], "solution": t["reference_solution"]} for t in reversed(tasks)],
        {"task_id": "code.add", "solution": WRONG, "name": "wrong add"},
    )
    rc, out, _ = verify(capsys, "--task", str(CODE_TASKS), "--solutions", str(sol))
    got = [json.loads(line) for line in out]
    assert rc == 1
    assert [v["task_id"] for v in got] == [t["id"] for t in reversed(tasks)] + ["code.add"]
    assert [v["status"] for v in got] == ["pass"] * 4 + ["fail"]
    assert [v["name"] for v in got] == [f"{sol}:{n}" for n in range(1, 5)] + ["wrong add"]


def test_order_does_not_depend_on_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = code_tasks(6)
    sol = rows(
        tmp_path / "sol.jsonl",
        *[{"task_id": t["id"], "solution": t["reference_solution"]} for t in tasks],
    )
    outputs = []
    for jobs in ("1", "4"):
        rc, out, _ = verify(capsys, "--task", str(CODE_TASKS), "--solutions", str(sol), "-j", jobs)
        assert rc == 0
        outputs.append([(v["name"], v["status"]) for v in map(json.loads, out)])
    assert outputs[0] == outputs[1]


def test_directory_layouts_name_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = code_tasks(2)
    sols = folder(
        tmp_path / "sols",
        {
            f"{first['id']}.py": first["reference_solution"],
            f"{second['id']}/attempt1.py": second["reference_solution"],
            f"{second['id']}/attempt2.py": "def nothing(): pass\n",
        },
    )
    rc, out, _ = verify(capsys, "--task", str(CODE_TASKS), "--solutions", str(sols))
    got = [(v["name"], v["task_id"], v["status"]) for v in map(json.loads, out)]
    assert rc == 1
    assert got == [
        (f"{first['id']}.py", first["id"], "pass"),
        (f"{second['id']}/attempt1.py", second["id"], "pass"),
        (f"{second['id']}/attempt2.py", second["id"], got[2][2]),
    ]
    assert got[2][2] != "pass"


def test_task_id_flag_applies_to_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sols = folder(tmp_path / "sols", {"x.py": GOOD, "y.py": GOOD})
    rc, out, _ = verify(
        capsys, "--task", str(CODE_TASKS), "--task-id", "code.add", "--solutions", str(sols)
    )
    assert rc == 0
    assert [json.loads(line)["task_id"] for line in out] == ["code.add", "code.add"]


def test_text_format_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sols = folder(tmp_path / "sols", {"g.py": GOOD})
    rc, out, _ = verify(
        capsys, "--task", str(ADD_TASK), "--solutions", str(sols), "--format", "text"
    )
    assert (rc, out) == (0, ["g.py: code.add: pass (5/5)"])


# ------------------------------------------------------------------ bad input
BAD_ROWS = [
    ('{"task_id": "code.nope", "solution": "x"}', "sol.jsonl:1: unknown task id 'code.nope'"),
    ("{not json", "sol.jsonl:1: invalid JSON"),
    ('{"task_id": "code.add"}', "sol.jsonl:1: field 'solution' missing or not a string"),
    ('{"task_id": "code.add", "solution": 3}', "sol.jsonl:1: field 'solution' missing"),
    ('{"task_id": 7, "solution": "x"}', "sol.jsonl:1: field 'task_id' must be a string"),
    ('{"solution": "x"}', "sol.jsonl:1: field 'task_id' missing"),
    ('["task_id", "solution"]', "sol.jsonl:1: expected a JSON object"),
    ('{"task_id": "code.add", "solution": "x", "name": 1}', "sol.jsonl:1: field 'name'"),
]


@pytest.mark.parametrize("line,message", BAD_ROWS, ids=[m for _, m in BAD_ROWS])
def test_bad_row_is_a_usage_error_with_file_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    sol = rows(tmp_path / "sol.jsonl", line)
    rc, out, err = verify(capsys, "--task", str(CODE_TASKS), "--solutions", str(sol))
    assert rc == 2 and out == []  # nothing verified
    assert f"{tmp_path}/{message}" in err
    assert "Traceback" not in err


def test_every_problem_is_listed_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sol = rows(
        tmp_path / "sol.jsonl",
        {"task_id": "code.add", "solution": GOOD},
        {"task_id": "nope", "solution": GOOD},
        "",
        "{bad",
    )
    rc, out, err = verify(capsys, "--task", str(CODE_TASKS), "--solutions", str(sol))
    assert rc == 2 and out == []
    assert [line.split(": ")[0] for line in err.splitlines()[:2]] == [f"{sol}:2", f"{sol}:4"]
    assert "2 input problem(s)" in err.splitlines()[-1]


BAD_FILES: list[tuple[dict[str, str | bytes], str]] = [
    ({"nope.py": GOOD}, "nope.py: no task with id 'nope'"),
    ({"code.add.py": b"\xff\xfe def f(): pass"}, "code.add.py: not UTF-8"),
    ({"nope/a.py": GOOD}, "nope/a.py: unknown task id 'nope'"),
    ({"code.add/deeper/a.py": GOOD}, "code.add/deeper: not a file"),
]


@pytest.mark.parametrize("files,message", BAD_FILES, ids=[m for _, m in BAD_FILES])
def test_bad_solution_file_is_a_usage_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    files: dict[str, str | bytes],
    message: str,
) -> None:
    sols = folder(tmp_path / "sols", files)
    rc, out, err = verify(capsys, "--task", str(CODE_TASKS), "--solutions", str(sols))
    assert rc == 2 and out == []
    assert f"{sols}/{message}" in err


def test_duplicate_and_invalid_tasks_are_named_when_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = code_tasks(1)[0]
    tasks = rows(tmp_path / "tasks.jsonl", task, task, {"id": "broken", "family": "code"})
    sol = rows(
        tmp_path / "sol.jsonl",
        {"task_id": task["id"], "solution": GOOD},
        {"task_id": "broken", "solution": GOOD},
    )
    rc, _, err = verify(capsys, "--task", str(tasks), "--solutions", str(sol))
    assert rc == 2
    assert f"{sol}:1: task id 'code.add' appears more than once in {tasks} (lines 1, 2)" in err
    assert f"{sol}:2: task 'broken' at {tasks}:3 is invalid: prompt: Field required" in err


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: p / "missing", "no such file or directory"),
        (lambda p: folder(p / "empty", {}), "no solutions"),
        (lambda p: rows(p / "empty.jsonl"), "no solutions"),
        (lambda p: folder(p, {"sol.txt": "x"}) / "sol.txt", "unsupported format"),
    ],
    ids=["missing", "empty dir", "empty rows file", "unknown suffix"],
)
def test_nothing_to_verify_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, message: str
) -> None:
    rc, out, err = verify(capsys, "--task", str(ADD_TASK), "--solutions", str(make(tmp_path)))
    assert rc == 2 and out == []
    assert message in err


@pytest.mark.parametrize(
    "task_text,message",
    [
        (None, "no such file"),
        ("{oops\n", ":1: invalid JSON"),
        ("", "no task in file"),
    ],
    ids=["missing", "unparsable", "empty"],
)
def test_bad_task_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task_text: str | None, message: str
) -> None:
    task = tmp_path / "t.jsonl"
    if task_text is not None:
        task.write_text(task_text)
    sols = folder(tmp_path / "sols", {"a.py": GOOD})
    rc, out, err = verify(capsys, "--task", str(task), "--solutions", str(sols))
    assert rc == 2 and out == []
    assert message in err and err.startswith("tasksieve verify: error: ")


@pytest.mark.parametrize(
    "extra", [["--solution", "x", "--solutions", "y"], [], ["--solutions", "d", "--jobs", "0"]]
)
def test_flag_mistakes_exit_2(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["verify", "--task", str(ADD_TASK), *extra])
    assert exc.value.code == 2


def test_bad_input_gives_no_traceback_from_the_console_entry(tmp_path: Path) -> None:
    sol = rows(tmp_path / "sol.jsonl", '{"task_id": "zzz", "solution": "x"}')
    argv = ["verify", "--task", str(CODE_TASKS), "--solutions", str(sol)]
    proc = subprocess.run(
        [sys.executable, "-m", "tasksieve.pipeline.cli", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == f"{sol}:1: unknown task id 'zzz' (not in {CODE_TASKS})"
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ groups of one task
def test_consecutive_solutions_of_a_task_are_verified_together_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = code_tasks(1)[0]
    items = [{"task_id": "code.add", "solution": GOOD if i % 3 else WRONG} for i in range(11)]
    items.insert(5, {"task_id": other["id"], "solution": other["reference_solution"]})
    sol = rows(tmp_path / "sol.jsonl", *items)
    want = ["pass" if i["solution"] != WRONG else "fail" for i in items]
    for jobs in ("1", "3"):
        rc, out, _ = verify(capsys, "--task", str(CODE_TASKS), "--solutions", str(sol), "-j", jobs)
        got = [json.loads(line) for line in out]
        assert rc == 1
        assert [v["status"] for v in got] == want
        assert [v["name"] for v in got] == [f"{sol}:{n}" for n in range(1, 13)]


class _Cache:
    def __init__(self, verifier: object) -> None:
        self.verifier = verifier

    def get(self, family: str) -> object:
        return self.verifier


class _Raises:
    def verify_many(self, task: object, solutions: list[str]) -> list[object]:
        raise RuntimeError("boom")


def test_groups_split_by_task_and_size_and_a_raising_verifier_is_infra_error() -> None:
    from types import SimpleNamespace

    from tasksieve.pipeline.commands.verify_run import groups, safe_verify_group

    def sol(task_id: str, n: int) -> Any:
        return SimpleNamespace(task=SimpleNamespace(id=task_id, family="code"), text=str(n))

    sols = [sol("a", 0), sol("a", 1), sol("b", 2), *[sol("a", n) for n in range(3, 13)]]
    got = [[s.text for s in g] for g in groups(sols, most=8)]
    assert got == [["0", "1"], ["2"], [str(n) for n in range(3, 11)], ["11", "12"]]
    verdicts = safe_verify_group(_Cache(_Raises()), sols[:2])  # type: ignore[arg-type]
    assert [v.status for v in verdicts] == ["infra_error"] * 2
    assert "verifier raised RuntimeError: boom" in verdicts[0].detail
