"""Consistency checks of the hand-written example set in ``examples/``.

These check the data, not the pipeline: records validate, ids are unique, reference solutions
pass their own tests, do-nothing solutions fail them, the bad records are bad in the way they
say, and the recorded replay completions pass as often as the table in examples/README.md
claims. Code runs in a plain subprocess with a timeout (the data is ours and trusted); the
real sandboxed verifiers are tested elsewhere.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tasksieve.schemas import CodeSpec, ConfigSpec, SqlSpec, TaskRecord

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TASKS = EXAMPLES / "tasks"
FAMILY_FILES = ("code", "sql", "api", "config")


def _lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _records(family: str) -> list[TaskRecord]:
    return [TaskRecord.model_validate_json(ln) for ln in _lines(TASKS / f"{family}.jsonl")]


def _all_valid() -> list[TaskRecord]:
    return [t for fam in FAMILY_FILES for t in _records(fam)]


def _bad() -> list[tuple[int, str]]:
    return list(enumerate(_lines(TASKS / "problems.jsonl"), 1))


def _bad_valid() -> dict[str, TaskRecord]:
    out = {}
    for _, ln in _bad():
        try:
            t = TaskRecord.model_validate_json(ln)
        except ValidationError:
            continue
        out[t.id] = t
    return out


def _readme_table() -> dict[str, dict[str, str]]:
    rows: dict[str, dict[str, str]] = {}
    for ln in (EXAMPLES / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(
            r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| (.+) \|$", ln
        )
        if m:
            rows[m.group(1)] = {
                "where": m.group(2).strip(),
                "family": m.group(3).strip(),
                "passes": m.group(6).strip(),
                "fate": m.group(7).strip(),
            }
    return rows


def _replay() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ln in _lines(EXAMPLES / "replay" / "completions.jsonl"):
        row = json.loads(ln)
        assert set(row) == {"task_id", "completion"}
        out.setdefault(row["task_id"], []).append(row["completion"])
    return out


# ----------------------------------------------------------------- local code runner
_PYTEST_MAIN = """
_tests = [v for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
assert _tests, "no test functions"
for _t in _tests:
    _t()
"""
_OK = "__EXAMPLE_TESTS_OK__"


def _run_py(
    src: str, stdin: str = "", timeout: float = 20.0
) -> subprocess.CompletedProcess[str] | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prog.py"
        path.write_text(src, encoding="utf-8")
        try:
            return subprocess.run(
                [sys.executable, "-I", str(path)],
                input=stdin,
                text=True,
                capture_output=True,
                timeout=timeout,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            return None


def _norm(out: str) -> str:
    return "\n".join(ln.rstrip() for ln in out.strip("\n").splitlines())


def code_passes(spec: CodeSpec, solution: str) -> bool:
    """Run solution + tests of one code task in a subprocess; True if every test passed."""
    if spec.style == "io":
        for case in spec.io_cases:
            p = _run_py(solution, case.stdin)
            if p is None or p.returncode != 0 or _norm(p.stdout) != _norm(case.stdout):
                return False
        return True
    if spec.style == "check":
        tail = f"{spec.test_code}\ncheck({spec.entry_point})\n"
    elif spec.style == "asserts":
        tail = "\n".join(spec.asserts) + "\n"
    else:
        tail = f"{spec.test_code}\n{_PYTEST_MAIN}"
    src = f"{solution}\n\n{spec.setup_code or ''}\n\n{tail}\nprint({_OK!r})\n"
    p = _run_py(src)
    return p is not None and p.returncode == 0 and _OK in p.stdout


_FENCE = re.compile(r"```[A-Za-z0-9]*\n(.*?)```", re.S)


def fenced(completion: str) -> str:
    m = _FENCE.search(completion)
    return m.group(1) if m else ""


# ----------------------------------------------------------------- records
@pytest.mark.parametrize("family", FAMILY_FILES)
def test_every_line_is_a_valid_task_of_its_family(family: str) -> None:
    for n, ln in enumerate(_lines(TASKS / f"{family}.jsonl"), 1):
        task = TaskRecord.model_validate_json(ln)
        assert task.family == family, f"{family}.jsonl:{n}"
        assert task.source.dataset == "tasksieve-examples" and task.source.license == "Apache-2.0"
        assert any(
            t in task.tags for t in ("difficulty:easy", "difficulty:medium", "difficulty:hard")
        )


def test_ids_are_unique_across_files() -> None:
    ids = [t.id for t in _all_valid()]
    for _, ln in _bad():
        try:
            rid = json.loads(ln).get("id")
        except ValueError:
            continue
        ids.append(rid)
    dupes = [i for i, c in Counter(ids).items() if c > 1]
    assert not dupes


def test_lines_are_compact_json() -> None:
    for fam in (*FAMILY_FILES, "problems"):
        for ln in _lines(TASKS / f"{fam}.jsonl"):
            assert "\n" not in ln and not ln.startswith(" ")


@pytest.mark.parametrize("task", _records("code"), ids=lambda t: t.id)
def test_code_reference_passes_its_tests(task: TaskRecord) -> None:
    assert isinstance(task.verifier, CodeSpec)
    assert task.verifier.test_count() >= 3
    assert code_passes(task.verifier, task.reference_solution)


@pytest.mark.parametrize("task", _records("code"), ids=lambda t: t.id)
def test_code_do_nothing_solution_fails(task: TaskRecord) -> None:
    spec = task.verifier
    assert isinstance(spec, CodeSpec)
    stub = (
        "" if spec.style == "io" else f"def {spec.entry_point}(*args, **kwargs):\n    return None\n"
    )
    assert not code_passes(spec, stub)


# ----------------------------------------------------------------- sql
def _duck_rows(spec: SqlSpec, query: str) -> Any:
    duckdb = pytest.importorskip("duckdb")
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in spec.files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        old = os.getcwd()
        os.chdir(tmp)
        try:
            con = duckdb.connect()
            con.execute(spec.setup_sql)
            try:
                return con.execute(query).fetchall()
            except duckdb.Error as exc:
                return exc
        finally:
            os.chdir(old)


def _same_rows(got: Any, want: list[Any], spec: SqlSpec) -> bool:
    if isinstance(got, Exception):
        return False
    a, b = [tuple(r) for r in got], [tuple(r) for r in want]
    if not spec.compare.ordered:
        a, b = sorted(a, key=repr), sorted(b, key=repr)
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if not isinstance(x, int | float) or not isinstance(y, int | float):
                    return False
                if abs(x - y) > spec.compare.float_tol:
                    return False
            elif x != y or type(x) is not type(y):
                return False
    return True


@pytest.mark.parametrize("task", _records("sql"), ids=lambda t: t.id)
def test_sql_reference_runs_and_agrees(task: TaskRecord) -> None:
    spec = task.verifier
    assert isinstance(spec, SqlSpec) and spec.reference_query
    rows = _duck_rows(spec, spec.reference_query)
    assert not isinstance(rows, Exception) and rows
    assert _same_rows(_duck_rows(spec, task.reference_solution), rows, spec)
    if spec.expected_rows is not None:
        assert _same_rows(rows, spec.expected_rows, spec)


# ----------------------------------------------------------------- api / config
@pytest.mark.parametrize("task", _records("api"), ids=lambda t: t.id)
def test_api_reference_is_python_without_endpoint_args(task: TaskRecord) -> None:
    ast.parse(task.reference_solution)
    assert "endpoint_url" not in task.reference_solution
    assert task.verifier.test_count() >= 1


@pytest.mark.parametrize("task", _records("config"), ids=lambda t: t.id)
def test_config_reference_parses(task: TaskRecord) -> None:
    spec = task.verifier
    assert isinstance(spec, ConfigSpec)
    if spec.format == "json":
        assert isinstance(json.loads(task.reference_solution), dict)
        return
    yaml = pytest.importorskip("yaml")
    docs = [d for d in yaml.safe_load_all(task.reference_solution) if d is not None]
    assert docs and all(d.get("apiVersion") and d.get("kind") for d in docs)
    assert spec.kubernetes_version == "1.29"


# ----------------------------------------------------------------- bad records
def test_every_bad_line_says_what_it_exercises() -> None:
    for n, ln in _bad():
        assert '"purpose"' in ln, f"problems.jsonl:{n}"


def test_bad_file_has_invalid_and_unparseable_lines() -> None:
    fates: Counter[str] = Counter()
    for _, ln in _bad():
        try:
            data = json.loads(ln)
        except ValueError:
            fates["parse_error"] += 1
            continue
        try:
            TaskRecord.model_validate(data)
            fates["valid"] += 1
        except ValidationError:
            fates["schema"] += 1
    assert fates == {"valid": 7, "schema": 3, "parse_error": 1}


def test_bad_broken_reference_fails_its_tests() -> None:
    t = _bad_valid()["code.sum_of_squares"]
    assert isinstance(t.verifier, CodeSpec)
    assert not code_passes(t.verifier, t.reference_solution)


def test_bad_trivial_tests_pass_a_do_nothing_solution() -> None:
    t = _bad_valid()["code.celsius_to_fahrenheit"]
    assert isinstance(t.verifier, CodeSpec)
    assert code_passes(t.verifier, t.reference_solution)
    assert code_passes(t.verifier, "")
    assert code_passes(t.verifier, "def celsius_to_fahrenheit(c):\n    return None\n")


def test_bad_weak_tests_pass_a_wrong_boundary() -> None:
    t = _bad_valid()["code.can_vote"]
    assert isinstance(t.verifier, CodeSpec)
    assert code_passes(t.verifier, t.reference_solution)
    assert code_passes(t.verifier, "def can_vote(age):\n    return age > 18\n")


def test_bad_ambiguous_statement_passes_both_readings() -> None:
    t = _bad_valid()["code.middle_element"]
    assert isinstance(t.verifier, CodeSpec)
    for sol in ("xs[len(xs) // 2]", "xs[(len(xs) - 1) // 2]"):
        assert code_passes(t.verifier, f"def middle(xs):\n    return {sol}\n")


def test_bad_humaneval_copy_keeps_the_entry_point_and_passes() -> None:
    t = _bad_valid()["code.close_pair"]
    assert isinstance(t.verifier, CodeSpec)
    assert t.verifier.entry_point == "has_close_elements"
    assert code_passes(t.verifier, t.reference_solution)


def _shingles(text: str, n: int = 3) -> set[str]:
    words = re.findall(r"[a-z0-9_]+", text.lower())
    return {" ".join(words[i : i + n]) for i in range(max(1, len(words) - n + 1))}


def test_bad_duplicates_match_their_originals() -> None:
    code = {t.id: t for t in _records("code")}
    bad = _bad_valid()
    assert bad["code.word_frequencies.copy"].prompt == code["code.word_frequencies"].prompt
    a, b = _shingles(bad["code.flatten_nested"].prompt), _shingles(code["code.flatten"].prompt)
    assert bad["code.flatten_nested"].prompt != code["code.flatten"].prompt
    assert len(a & b) / len(a | b) >= 0.8
    for t in (bad["code.word_frequencies.copy"], bad["code.flatten_nested"]):
        assert isinstance(t.verifier, CodeSpec)
        assert code_passes(t.verifier, t.reference_solution)


def test_valid_prompts_are_not_near_duplicates_of_each_other() -> None:
    tasks = _all_valid()
    sh = [(t.id, _shingles(t.prompt)) for t in tasks]
    for i, (ia, a) in enumerate(sh):
        for ib, b in sh[i + 1 :]:
            assert len(a & b) / len(a | b) < 0.5, (ia, ib)


# ----------------------------------------------------------------- replay and README table
def test_readme_table_covers_every_line() -> None:
    table = _readme_table()
    ids = {t.id for t in _all_valid()}
    assert ids <= set(table)
    assert len(table) == len(ids) + len(_bad())


def test_every_valid_task_has_four_replay_completions() -> None:
    replay = _replay()
    for t in _all_valid():
        assert len(replay.get(t.id, [])) == 4, t.id
    repo = {t.id for t in _records("repo")}  # synthesized: tests/transforms/synth checks them
    known = {t.id for t in _all_valid()} | set(_bad_valid()) | repo
    assert set(replay) <= known


def test_replay_grading_follows_difficulty() -> None:
    table = _readme_table()
    for t in _all_valid():
        k = int(table[t.id]["passes"])
        if "difficulty:easy" in t.tags:
            assert k == 4, t.id
        elif "difficulty:hard" in t.tags:
            assert k == 0, t.id
        else:
            assert 1 <= k <= 3, t.id


def _replayed_code_tasks() -> list[TaskRecord]:
    return _records("code") + [t for t in _bad_valid().values() if t.id in _replay()]


@pytest.mark.slow
@pytest.mark.parametrize("task", _replayed_code_tasks(), ids=lambda t: t.id)
def test_code_replay_pass_count_matches_readme(task: TaskRecord) -> None:
    assert isinstance(task.verifier, CodeSpec)
    comps = _replay()[task.id]
    passed = sum(code_passes(task.verifier, fenced(c)) for c in comps)
    assert passed == int(_readme_table()[task.id]["passes"])


@pytest.mark.parametrize("task", _records("sql"), ids=lambda t: t.id)
def test_sql_replay_pass_count_matches_readme(task: TaskRecord) -> None:
    spec = task.verifier
    assert isinstance(spec, SqlSpec) and spec.reference_query
    want = _duck_rows(spec, spec.reference_query)
    comps = _replay()[task.id]
    passed = sum(_same_rows(_duck_rows(spec, fenced(c)), want, spec) for c in comps)
    assert passed == int(_readme_table()[task.id]["passes"])


# ----------------------------------------------------------------- solutions
def test_solution_demo_files() -> None:
    sol = EXAMPLES / "solutions"
    task = TaskRecord.model_validate_json((sol / "add.task.json").read_text(encoding="utf-8"))
    assert isinstance(task.verifier, CodeSpec)
    assert code_passes(task.verifier, (sol / "add_good.py").read_text(encoding="utf-8"))
    assert not code_passes(task.verifier, (sol / "add_wrong.py").read_text(encoding="utf-8"))
