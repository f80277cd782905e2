"""Probes of Prometheus rule tasks: which alerts fire at evaluation times the tests do not use.

A probe is (test group, alert name, evaluation time): the group's own input series, evaluated
at every interval from the first up to one past the last time the group's alert tests use,
except the tested times themselves (shuffled by the seed, then cut to the limit). Observing
runs, for each solution, one trial whose rule tests expect no alert at each probe; promtool
passes where none fires and otherwise prints the alerts it got, which become the observation
(whitespace collapsed, so two solutions agree when the same alerts with the same labels and
annotations fire).

It does NOT observe recording rules' values (only alerts), nor times beyond the series.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from tasksieve.schemas import ConfigSpec, TaskRecord
from tasksieve.schemas.config_deploy import AlertTest, RuleTest
from tasksieve.verifiers.families.config.deploy.verifier import DeployVerifier
from tasksieve.verifiers.families.probes import Observation, Probe
from tasksieve.verifiers.sandbox.base import Sandbox

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_GOT = re.compile(r"got:(.*?)(?:\n\s*Unit Testing|\Z)", re.S)


def seconds(duration: str) -> int:
    """``10m`` -> 600 (the single-unit durations the task schema allows)."""
    return int(duration[:-1]) * _UNITS[duration[-1]]


def probes(task: TaskRecord, limit: int, seed: int) -> list[Probe]:
    spec = task.verifier
    assert isinstance(spec, ConfigSpec)
    found: list[Probe] = []
    for g, test in enumerate(spec.rule_tests):
        step = seconds(test.interval)
        tested = {seconds(a.eval_time) for a in test.alert_rule_test}
        if not tested:
            continue
        grid = set(range(step, max(tested) + 2 * step, step)) - tested
        for name in dict.fromkeys(a.alertname for a in test.alert_rule_test):
            for t in sorted(grid):
                payload = {"group": g, "alertname": name, "eval_time": f"{t}s"}
                found.append(Probe(f"{test.name}: {name} at {t}s", payload))
    unique = list({repr(p.payload): p for p in found}.values())
    random.Random(seed).shuffle(unique)
    return unique[: max(0, limit)]


def observe(
    task: TaskRecord, solutions: Sequence[str], found: Sequence[Probe], sandbox: Sandbox
) -> list[list[Observation]]:
    spec = task.verifier
    assert isinstance(spec, ConfigSpec)
    groups = []
    for i, p in enumerate(found):
        base = spec.rule_tests[int(p.payload["group"])]
        alert = AlertTest(eval_time=p.payload["eval_time"], alertname=p.payload["alertname"])
        groups.append(
            RuleTest(
                name=f"p{i}",
                interval=base.interval,
                input_series=base.input_series,
                alert_rule_test=[alert],
            )
        )
    trial = spec.model_copy(update={"rule_tests": groups})
    verifier = DeployVerifier(sandbox)
    rows = []
    for solution in solutions:
        report = verifier.report(trial, solution) or {}
        ran = {r.get("name"): r for r in report.get("rule_tests", [])}
        row = []
        for g in groups:
            r = ran.get(g.name)
            if r is None or r.get("timeout"):
                row.append(Observation(False, "not evaluated"))
            elif r.get("ok"):
                row.append(Observation.of([]))
            else:
                m = _GOT.search(str(r.get("output", "")))
                got = " ".join(m.group(1).split()) if m else "unparsed"
                row.append(Observation.of(got))
        rows.append(row)
    return rows
