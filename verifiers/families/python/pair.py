"""The parent's side of a pair run: read the tests process's results and decide the verdict.

The tests process (see ``python_harness.run_pair_tests``) talks to the candidate itself and
reports on a pipe the candidate never holds; this module only counts results against the
test list it was given, so a missing, duplicated or unknown result cannot help, and the
verdict is computed here, never in the sandbox. The candidate's stderr is read (capped) only
for error details.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tasksieve.schemas import CheckResult, Verdict, VerdictStatus
from tasksieve.verifiers.sandbox.base import PairedRun
from tasksieve.verifiers.sandbox.pipes import Reader

_SIGXCPU = 24


def fails(names: list[str], detail: str) -> list[CheckResult]:
    """A failed check for each name, all with ``detail``."""
    return [CheckResult(name=n, passed=False, detail=detail) for n in names]


def verdict(
    status: VerdictStatus, checks: list[CheckResult], detail: str, limit_hit: str | None = None
) -> Verdict:
    """A verdict counting ``checks``."""
    return Verdict(
        status=status,
        tests_passed=sum(c.passed for c in checks),
        tests_total=len(checks),
        detail=detail[:1000],
        checks=checks,
        limit_hit=limit_hit,
    )


def err_tail(r: Reader) -> str:
    """The end of a captured stderr, as `` (text)`` or empty."""
    t = bytes(r.buf).decode("utf-8", errors="replace").strip()[-300:]
    return f" ({t})" if t else ""


def _next(proc: PairedRun, deadline: float) -> tuple[dict[str, Any] | None, bool]:
    """The next results line as a dict (None on EOF or garbage), and whether time ran out."""
    r = proc.results
    while True:
        raw = r.take_line()
        if raw is not None:
            try:
                obj = json.loads(raw)
            except ValueError:
                return None, False
            return (obj if isinstance(obj, dict) else None), False
        if r.eof or r.overflow:
            return None, False
        left = deadline - time.monotonic()
        if left <= 0:
            return None, True
        proc.pump.poll(min(left, 0.25))


def judge_pair(proc: PairedRun, names: list[str], deadline: float) -> Verdict:
    """Read one pair run's report until ``done`` (or EOF/deadline) and judge it."""
    loaded: dict[str, Any] | None = None
    results: dict[str, CheckResult] = {}
    cpu_killed = timed_out = done = False
    while not done:
        msg, timed_out = _next(proc, deadline)
        if msg is None:
            break
        op = msg.get("op")
        if op == "loaded" and loaded is None:
            loaded = msg
        elif op == "result" and msg.get("name") in names and msg["name"] not in results:
            name = str(msg["name"])
            results[name] = CheckResult(
                name=name, passed=msg.get("passed") is True, detail=str(msg.get("detail", ""))[:500]
            )
        elif op == "cand_exit":
            cpu_killed = msg.get("signal") == _SIGXCPU
        elif op == "done":
            done = True
    if loaded is None or loaded.get("broken") is True:
        if timed_out or cpu_killed:
            why = "timed out while loading"
            return verdict("timeout", fails(names, why), "time limit while loading the solution", "wall")  # fmt: skip  # noqa: E501
        if not done:
            return _infra(proc, names, fails(names, "no result"))
        why = "solution exited or broke the protocol while loading"
        return verdict("error", fails(names, why), why + err_tail(proc.stderr))
    if loaded.get("error") is not None:
        why = f"solution did not load: {str(loaded['error'])[:300]}"
        return verdict("error", fails(names, "solution did not load"), why)
    checks = [
        results.get(n) or CheckResult(name=n, passed=False, detail="no result") for n in names
    ]
    if timed_out or cpu_killed:
        return verdict("timeout", checks, "time limit", "wall" if timed_out else "cpu")
    if not done:
        return _infra(proc, names, checks)
    first = next((c for c in checks if not c.passed), None)
    return verdict(
        "fail" if first else "pass",
        checks,
        "" if first is None else f"{first.name}: {first.detail}"[:500],
    )


def _infra(proc: PairedRun, names: list[str], checks: list[CheckResult]) -> Verdict:
    proc.wait(1.0)
    why = proc.infra_error or "test harness ended without finishing" + err_tail(proc.stderr)
    return verdict("infra_error", checks, why)
