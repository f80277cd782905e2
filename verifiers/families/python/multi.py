"""Several solutions of one code task in one sandbox entry: one namespace set, one tests process.

On a sandbox with ``spawn_multi`` (the process backend's fork server) ``verify_multi`` sends
all solutions of a task with one time limit as one multi-sample run
(``verifiers.sandbox.process.multi``): each solution is still its own candidate process under
its own uid and limits, killed (with everything it started) and cleaned up alone before the
next starts; the tests process runs the same harness code as a pair run, one sample after
another, and reports each sample between ``sample`` and ``done`` lines. Each sample is judged
here exactly as a pair run's report (``pair.Report``).

A sample whose report did not end (the tests process died or stalled past the run's deadline,
or the entry failed to start) gets ``None``: the caller verifies it again alone, so a sample
that breaks the shared tests process costs the others only time, never their verdicts.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from tasksieve.schemas import Verdict
from tasksieve.verifiers.families.python.pair import CPU_WAIT_S, Report, next_line
from tasksieve.verifiers.sandbox.base import Limits, PairedRun
from tasksieve.verifiers.sandbox.pipes import Reader


class MultiRun(PairedRun, Protocol):
    """What ``spawn_multi`` returns: a paired run with one stderr reader per sample, and each
    sample's CPU seconds once the run ended by itself (None where not measured)."""

    sample_err: list[Reader]
    samples_cpu_s: list[float | None]


class MultiSandbox(Protocol):
    """A sandbox that runs several candidates of one task in one entry."""

    def spawn_multi(
        self,
        shared: dict[str, bytes | str],
        cands: list[tuple[dict[str, bytes | str], list[str], Limits]],
        tests: tuple[dict[str, bytes | str], list[str]],
    ) -> MultiRun: ...


def verify_multi(
    sandbox: MultiSandbox,
    harness: str,
    cmd: list[str],
    cfg: dict[str, Any],
    names: list[str],
    solutions: list[str],
    limits: list[Limits],
) -> list[Verdict | None]:
    """Each solution's verdict (under its own limits) from one multi-sample run, or None
    where it must run alone."""
    out: list[Verdict | None] = [None] * len(solutions)
    t0 = time.monotonic()
    run = sandbox.spawn_multi(
        {"harness.py": harness},
        [
            ({"solution.py": s}, [*cmd, "/tmp/harness.py", "candidate"], lim)
            for s, lim in zip(solutions, limits, strict=True)
        ],
        ({"tests.json": json.dumps(cfg)}, [*cmd, "/tmp/harness.py", "multi-tests"]),
    )
    # Init kills a sample at its own wall limit; this deadline only catches a stalled tests
    # process (the samples it did not finish are verified alone by the caller).
    deadline = t0 + sum(lim.wall_s for lim in limits) + 2.0
    try:
        current: int | None = None
        report = Report()
        started = t0
        while True:
            msg, _late = next_line(run, deadline)
            if msg is None:
                break
            if msg.get("op") == "sample":
                i = msg.get("i")
                if type(i) is not int or not 0 <= i < len(solutions) or out[i] is not None:
                    break  # the protocol broke: what is not judged yet runs alone
                current, report, started = i, Report(), time.monotonic()
                continue
            if current is None:
                continue
            report.feed(msg, names)
            if report.done:
                v = report.verdict(names, False, run.sample_err[current], lambda: "")
                v.duration_s = time.monotonic() - started
                out[current], current = v, None
        if all(v is not None for v in out):  # the tests process ends: init reports the CPU
            run.wait(CPU_WAIT_S)
            for judged, cpu in zip(out, run.samples_cpu_s, strict=True):
                if judged is not None:
                    judged.cpu_s = cpu
    finally:
        run.close(linger=True)
    return out


MAX_SAMPLES = 16  # samples per multi-sample entry


def runs_samples(sandbox: object) -> bool:
    """Whether ``sandbox`` runs several samples of a task in one entry."""
    caps = getattr(sandbox, "capabilities", None)
    return callable(getattr(sandbox, "spawn_multi", None)) and bool(
        getattr(caps, "paired_runs", False)
    )


def verify_grouped(
    sandbox: MultiSandbox,
    harness: str,
    cmd: list[str],
    cfg: dict[str, Any],
    names: list[str],
    solutions: list[str],
    limits: list[Limits],
) -> list[Verdict | None]:
    """``verify_multi`` over ``MAX_SAMPLES`` solutions per entry; None for a lone solution
    (a pair run is as cheap) and for one an entry could not judge."""
    out: list[Verdict | None] = [None] * len(solutions)
    if len(solutions) < 2:
        return out
    for at in range(0, len(solutions), MAX_SAMPLES):
        part = slice(at, at + MAX_SAMPLES)
        try:
            got = verify_multi(sandbox, harness, cmd, cfg, names, solutions[part], limits[part])
        except Exception:  # the entry did not start: each sample runs alone
            continue
        for i, v in enumerate(got, start=at):
            if v is not None and v.status != "infra_error":
                out[i] = v
    return out
