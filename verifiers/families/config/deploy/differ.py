"""Mutants and probes of the trial-deployed config kinds (nginx, HAProxy, Prometheus rules).

Mutants (operators ``config.drop_directive`` and ``config.change_directive``): one directive
of the reference dropped, or one of its arguments changed. A directive is a statement line:
in nginx a line ending with ``;``, in HAProxy a line inside a section (not the section's
header), in a Prometheus rule file a ``key: value`` line (a list item's ``- `` kept). Lines
that open or close a block are never touched, so a mutant still parses as often as possible.
At most ``MAX_MUTANTS`` per task, since each one costs a trial deployment.
The changed argument is the last one: an integer +1, a duration's number +1 (``5m`` ->
``6m``), the port of ``host:port`` or a URL +1, else the string suffixed ``x`` (a path, a
header value, a label), quotes kept.

Probes (HTTP kinds only): requests the task's probes do not contain, made from them: each
probe's path with ``/x`` appended and with its trailing slash toggled, plus ``/`` and a path
no probe names. Observing runs one trial per solution with every probe (the same harness as
the verifier) and records per probe the status, the stubs reached and the path they saw.
Prometheus rules: the alerts firing at evaluation times the tests do not use
(``deploy.rules``).

It does NOT guard against: directives spread over several lines (nginx blocks written on one
line are one statement per ``;``, the rest are left alone), or mutants that break the syntax
(they are killed by the server's own check, which says nothing about the probes' strength).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from tasksieve.schemas import ConfigSpec, TaskRecord
from tasksieve.schemas.config_deploy import HttpExpect, HttpProbe
from tasksieve.verifiers.families.config.deploy import rules
from tasksieve.verifiers.families.config.deploy.verifier import DeployVerifier
from tasksieve.verifiers.families.probes import Mutant, Observation, Probe
from tasksieve.verifiers.sandbox.base import Sandbox

MAX_MUTANTS = 8  # each mutant costs one trial deployment (about 0.2-0.5 s)
_SECTION = re.compile(r"^(global|defaults|frontend|backend|listen|resolvers|peers|userlist)\b")
_NUMBER = re.compile(r"^(\d+)([smhdwy]?|ms)$")
_PORT = re.compile(r"^(.*:)(\d+)(/?.*)$")  # host:port, a URL's port
_LAST = re.compile(r"(\S+)(\s*;?\s*)$")


def _spec(task: TaskRecord) -> ConfigSpec:
    if not isinstance(task.verifier, ConfigSpec):
        raise ValueError(f"not a config task: {task.verifier.family}")
    return task.verifier


def directive_lines(kind: str, text: str) -> list[int]:
    """Indexes of the lines a mutant may drop or change (see the module docstring)."""
    out = []
    in_section = False
    for i, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if kind == "nginx":
            if line.endswith(";") and "{" not in line and "}" not in line:
                out.append(i)
        elif kind == "haproxy":
            if _SECTION.match(raw):
                in_section = True
            elif in_section and raw[:1].isspace():
                out.append(i)
        elif re.match(r"^(- )?[\w.-]+:\s*\S", line) and not line.endswith(("|", ">")):
            out.append(i)
    return out


def changed_token(token: str) -> str:
    """The token with its value changed (an integer or duration +1, else suffixed ``x``)."""
    quote = token[0] if token[:1] in "\"'" and token.endswith(token[0]) and len(token) > 1 else ""
    inner = token[1:-1] if quote else token
    m = _NUMBER.match(inner)
    port = _PORT.match(inner)
    if m:
        new = f"{int(m.group(1)) + 1}{m.group(2)}"
    elif port:
        new = f"{port.group(1)}{int(port.group(2)) + 1}{port.group(3)}"
    else:
        new = f"{inner}x"
    return f"{quote}{new}{quote}"


def _change(kind: str, line: str) -> str | None:
    if kind == "prometheus_rules":
        key, sep, value = line.partition(":")
        return f"{key}{sep} {changed_token(value.strip())}" if value.strip() else None
    m = _LAST.search(line)
    if m is None or len(line[: m.start()].split()) < 1:
        return None  # a directive with no argument
    return line[: m.start(1)] + changed_token(m.group(1)) + m.group(2)


def _drop(kind: str, line: str) -> str | None:
    if kind == "prometheus_rules" and line.lstrip().startswith("- "):
        return None  # the list item itself: dropping it shifts the rest
    return None if kind == "prometheus_rules" and line.rstrip().endswith(":") else ""


def mutants(task: TaskRecord, limit: int, seed: int) -> list[Mutant]:
    """At most ``limit`` (and ``MAX_MUTANTS``) one-directive mutants of the reference,
    deterministic for ``seed``."""
    spec = _spec(task)
    lines = task.reference_solution.splitlines()
    sites = [
        (op, i)
        for i in directive_lines(spec.schema_kind, task.reference_solution)
        for op in ("config.drop_directive", "config.change_directive")
    ]
    random.Random(seed).shuffle(sites)
    out: list[Mutant] = []
    texts = {task.reference_solution}
    for op, i in sites:
        if len(out) >= min(limit, MAX_MUTANTS):
            break
        make = _drop if op == "config.drop_directive" else _change
        new = make(spec.schema_kind, lines[i])
        if new is None:
            continue
        edited = [*lines[:i], *([new] if new else []), *lines[i + 1 :]]
        text = "\n".join(edited) + "\n"
        if text not in texts:
            texts.add(text)
            out.append(Mutant(op, f"line {i + 1}: {lines[i].strip()[:60]}", text))
    return out


def probes(task: TaskRecord, limit: int, seed: int) -> list[Probe]:
    """Extra requests for the HTTP kinds, extra evaluation times for Prometheus rules."""
    spec = _spec(task)
    if spec.http is None:
        return rules.probes(task, limit, seed)
    seen = {p.path for p in spec.http.probes}
    found: list[str] = []
    for p in spec.http.probes:
        path, _, query = p.path.partition("?")
        tail = f"?{query}" if query else ""
        found.append(f"{path.rstrip('/')}/x{tail}")
        if path != "/":
            toggled = path[:-1] if path.endswith("/") else f"{path}/"
            found.append(f"{toggled}{tail}")
    found += ["/", "/no-such-page-7f3a"]
    paths = [p for p in dict.fromkeys(found) if p not in seen]
    random.Random(seed).shuffle(paths)
    return [Probe(f"GET {p}", {"path": p}) for p in paths[: max(0, limit)]]


def observe(
    task: TaskRecord, solutions: Sequence[str], found: Sequence[Probe], sandbox: Sandbox
) -> list[list[Observation]]:
    """Per solution, per probe: status, stubs reached and the path they saw (one trial each)."""
    spec = _spec(task)
    if not found:
        return [[] for _ in solutions]
    if spec.http is None:
        return rules.observe(task, solutions, found, sandbox)
    extra = [
        HttpProbe(name=f"p{i}", path=str(p.payload["path"]), expect=HttpExpect(status=200))
        for i, p in enumerate(found)
    ]
    trial = spec.model_copy(update={"http": spec.http.model_copy(update={"probes": extra})})
    verifier = DeployVerifier(sandbox)
    rows = []
    for solution in solutions:
        report = verifier.report(trial, solution)
        got = {r.get("name"): r for r in (report or {}).get("probes", [])}
        row = []
        for p in extra:
            r = got.get(p.name)
            if r is None:
                row.append(Observation(False, "not deployed"))
            elif "error" in r:
                row.append(Observation(False, "no response"))
            else:
                reached = [[x["upstream"], x["path"]] for x in r.get("received", [])]
                row.append(Observation.of({"status": r.get("status"), "reached": reached}))
        rows.append(row)
    return rows
