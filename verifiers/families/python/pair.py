"""The parent's side of a pair run: read the tests process's results and decide the verdict.

The tests process (see ``python_harness.run_pair_tests``) talks to the candidate itself and
reports on a pipe the candidate never holds; this module only counts results against the
test list it was given, so a missing, duplicated or unknown result cannot help, and the
verdict is computed here, never in the sandbox. The candidate's stderr is read (capped) only
for error details.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

from tasksieve.schemas import CheckResult, Verdict, VerdictStatus
from tasksieve.verifiers.sandbox.base import PairedRun, SpawnedRun, sum_cpu
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


def next_line(proc: PairedRun, deadline: float) -> tuple[dict[str, Any] | None, bool]:
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


class Report:
    """One candidate's report lines, fed in order; ``verdict`` judges them."""

    def __init__(self) -> None:
        self.loaded: dict[str, Any] | None = None
        self.results: dict[str, CheckResult] = {}
        self.cpu_killed = self.wall_killed = self.done = False

    def feed(self, msg: dict[str, Any], names: list[str]) -> None:
        """Take one line of the report (unknown, duplicated or late lines are ignored)."""
        op = msg.get("op")
        if op == "loaded" and self.loaded is None:
            self.loaded = msg
        elif op == "result" and msg.get("name") in names and msg["name"] not in self.results:
            name = str(msg["name"])
            self.results[name] = CheckResult(
                name=name, passed=msg.get("passed") is True, detail=str(msg.get("detail", ""))[:500]
            )
        elif op == "cand_exit":
            self.cpu_killed = msg.get("signal") == _SIGXCPU
            self.wall_killed = msg.get("wall") is True
        elif op == "done":
            self.done = True

    def verdict(
        self, names: list[str], timed_out: bool, stderr: Reader, infra: Callable[[], str]
    ) -> Verdict:
        """The verdict; ``infra()`` explains a report that ended before ``done``."""
        timed_out = timed_out or self.wall_killed
        loaded = self.loaded
        if loaded is None or loaded.get("broken") is True:
            if timed_out or self.cpu_killed:
                why = "timed out while loading"
                return verdict("timeout", fails(names, why), "time limit while loading the solution", "wall")  # fmt: skip  # noqa: E501
            if not self.done:
                return verdict("infra_error", fails(names, "no result"), infra())
            why = "solution exited or broke the protocol while loading"
            return verdict("error", fails(names, why), why + err_tail(stderr))
        if loaded.get("error") is not None:
            why = f"solution did not load: {str(loaded['error'])[:300]}"
            return verdict("error", fails(names, "solution did not load"), why)
        checks = [
            self.results.get(n) or CheckResult(name=n, passed=False, detail="no result")
            for n in names
        ]
        if timed_out or self.cpu_killed:
            return verdict("timeout", checks, "time limit", "wall" if timed_out else "cpu")
        if not self.done:
            return verdict("infra_error", checks, infra())
        first = next((c for c in checks if not c.passed), None)
        return verdict(
            "fail" if first else "pass",
            checks,
            "" if first is None else f"{first.name}: {first.detail}"[:500],
        )


def judge_pair(proc: PairedRun, names: list[str], deadline: float) -> Verdict:
    """Read one pair run's report until ``done`` (or EOF/deadline) and judge it."""
    report = Report()
    timed_out = False
    while not report.done:
        msg, timed_out = next_line(proc, deadline)
        if msg is None:
            break
        report.feed(msg, names)
    return report.verdict(names, timed_out, proc.stderr, lambda: _infra(proc))


CPU_WAIT_S = 2.0  # how long a pair's verdict waits for the sandbox's CPU measure at the end


def judge_and_end(proc: PairedRun, names: list[str], deadline: float) -> Verdict:
    """``judge_pair``, then end the run and put the CPU time the sandbox measured for it (the
    candidate's and the tests' processes) on the verdict, waiting ``CPU_WAIT_S`` at most for
    that (None if it did not come); closes the run either way, its uids returning once the
    sandbox reports it gone."""
    try:
        v = judge_pair(proc, names, deadline)
        # Killed at once, as before: waiting for the candidate and the tests process to end
        # by themselves (interpreter teardown) cost a third of the pair path's throughput at
        # one worker; the server reads the live processes' time as it kills them.
        proc.kill()
        proc.wait(CPU_WAIT_S)
        v.cpu_s = proc.cpu_s
        return v
    finally:
        proc.close(linger=True)


def end_runs(runs: list[SpawnedRun]) -> float | None:
    """Kill ``runs`` (all first, so their teardowns overlap), wait ``CPU_WAIT_S`` at most for
    each to report its end, close them; their CPU seconds summed (None if any is unmeasured)."""
    for run in runs:
        run.kill()
    for run in runs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.popen.wait(timeout=CPU_WAIT_S)
    for run in runs:
        run.close()
    return sum_cpu([run.cpu_s for run in runs])


def _infra(proc: PairedRun) -> str:
    proc.wait(1.0)
    return proc.infra_error or "test harness ended without finishing" + err_tail(proc.stderr)
