"""``PythonDiffer``: mutants, probes and sandboxed observations for ``code`` tasks.

Mutants come from ``mutation`` and probes from ``probing``. Observing runs each solution in
the sandbox through the Python verifier's own candidate process (``python_harness``
``candidate`` mode: loads ``solution.py``, then answers calls, function name and tagged-JSON
arguments in, tagged-JSON value or exception type out). All of a solution's probes go in one
run as stdin lines; when the run ends early (a probe looped, crashed the process or hit a
limit) the probe it stopped on is observed as that failure and a fresh run takes the rest, so
every probe is answered and a solution costs at most one run per probe. After two time-limit
stops the remaining probes are left unobserved (``Observation.not_run``): a solution that
loops costs two time limits, not one per probe. ``io`` tasks run the
program once per probe with the probe as stdin; the observation is the normalised stdout.

The comparison happens here, on the host: values are decoded into plain built-in values and
compared as the tests' ``==`` would (floats within a relative 1e-6, NaN equal to NaN); a
failure agrees only with a failure of the same exception type (or limit).

It does NOT guard against: a hostile solution forging its own replies on the protocol pipe
(it can only misreport its own answers, never another solution's), or output-dependent
behaviour (time, randomness) that makes a solution disagree with itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from tasksieve.schemas import CodeSpec, TaskRecord
from tasksieve.verifiers.families.probes import (
    Mutant,
    Observation,
    Probe,
    ProbeInfraError,
    ProbeSet,
)
from tasksieve.verifiers.families.python import probing, scope
from tasksieve.verifiers.families.python.guest import codec
from tasksieve.verifiers.families.python.mutation import all_mutants, select
from tasksieve.verifiers.families.python.verifier import AST_LOCK, HARNESS_SOURCE, normalise_output
from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox

_PER_PROBE_S = 0.15  # wall budget per probe in a batch, on top of a start-up allowance
_START_S = 1.5
_MAX_OUTPUT = 8_000_000
_MAX_STALLS = 2  # time-limit stops per solution before its remaining probes are skipped


class PythonDiffer:
    """Mutants, probes and observations for the ``code`` family (see the module docstring)."""

    family = "code"

    def mutants(self, task: TaskRecord, limit: int, seed: int) -> list[Mutant]:
        """At most ``limit`` single-change mutants of the reference (``mutation``)."""
        with AST_LOCK:
            made = all_mutants(task.reference_solution, module_level=_spec(task).style == "io")
        return select(made, limit, seed)

    def probes(self, task: TaskRecord, limit: int, seed: int) -> list[Probe]:
        """The task's own ``probe_inputs`` first, then inputs derived from the tests' calls."""
        spec = _spec(task)
        if spec.style == "io":
            own = [p for p in spec.probe_inputs if p not in {c.stdin for c in spec.io_cases}]
            mine = [Probe(_stdin_label(s), s, "task") for s in own[:limit]]
            seeds = [c.stdin for c in spec.io_cases] + own
            stdins = probing.derive_stdin(seeds, limit - len(mine), seed)
            return mine + [Probe(_stdin_label(s), s, "derived") for s in stdins]
        entry = spec.entry_point or "candidate"
        with AST_LOCK:
            tests = probing.test_inputs(spec)
            given = probing.task_inputs(spec)
        seen = {probing.key(a) for a in tests}
        out: list[Probe] = []
        for a in given:
            k = probing.key(a)
            if k not in seen and len(out) < limit:
                seen.add(k)
                out.append(_call_probe(entry, a, "task"))
        derived = probing.derive(tests + given, limit - len(out), seed, seen)
        return out + [_call_probe(entry, a, "derived") for a in derived]

    def scoped_probes(
        self, task: TaskRecord, limit: int, seed: int, sandbox: Sandbox, *, envelope: bool
    ) -> ProbeSet:
        """At most ``limit`` probes inside the task's contract (``scope``), each with its why."""
        spec = _spec(task)
        call = scope.sandbox_caller(spec, sandbox, _observe_calls)
        if spec.style == "io":
            return scope.scoped_io_probes(spec, self.probes(task, limit, seed), call)
        return scope.scoped_call_probes(task, spec, limit, seed, call, envelope=envelope)

    def observe(
        self, task: TaskRecord, solutions: Sequence[str], probes: Sequence[Probe], sandbox: Sandbox
    ) -> list[list[Observation]]:
        """``result[i][j]``: what ``solutions[i]`` did on ``probes[j]``, run in ``sandbox``."""
        spec = _spec(task)
        if not probes:
            return [[] for _ in solutions]
        if spec.style == "io":
            return [[_run_io(spec, s, p, sandbox) for p in probes] for s in solutions]
        return [_observe_calls(spec, s, probes, sandbox) for s in solutions]

    def agree(self, task: TaskRecord, a: Observation, b: Observation) -> bool:
        """Same answer: both failed the same way, or both values equal as ``==`` sees them."""
        if a.ok != b.ok:
            return False
        if not a.ok or a.value == b.value:
            return a.value == b.value
        try:
            return same_value(json.loads(a.value), json.loads(b.value))
        except ValueError:
            return False


def _spec(task: TaskRecord) -> CodeSpec:
    spec = task.verifier
    if not isinstance(spec, CodeSpec):
        raise TypeError(f"not a code task: {spec.family}")
    return spec


def _call_probe(entry: str, args: probing.Args, origin: str) -> Probe:
    payload = {"args": codec.encode(args[0]), "kwargs": codec.encode(args[1])}
    return Probe(probing.call_label(entry, args), payload, origin)


def _stdin_label(stdin: str) -> str:
    shown = stdin if len(stdin) <= 120 else stdin[:117] + "..."
    return f"stdin {shown!r}"


# ---------------------------------------------------------------------------- comparison
def canonical(v: Any) -> Any:
    """Tagged JSON (``codec.encode``) with sets and dicts in a stable order."""
    if isinstance(v, list):
        return [canonical(x) for x in v]
    if isinstance(v, dict) and len(v) == 1:
        ((tag, x),) = v.items()
        if tag in ("$s", "$fs") and isinstance(x, list):
            return {tag: sorted((canonical(i) for i in x), key=_sort_key)}
        if tag == "$d" and isinstance(x, list):
            pairs = [[canonical(p[0]), canonical(p[1])] for p in x if isinstance(p, list)]
            return {tag: sorted(pairs, key=_sort_key)}
        if tag in ("$t", "$c") and isinstance(x, list):
            return {tag: [canonical(i) for i in x]}
    return v


def _sort_key(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def same_value(a: Any, b: Any) -> bool:
    """Whether two decoded-or-tagged values are equal as the tests' ``==`` would see them."""
    try:
        return _eq(codec.decode(a), codec.decode(b))
    except (ValueError, TypeError, RecursionError):
        return a == b


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float | int) and not isinstance(b, bool):
        return (math.isnan(a) and isinstance(b, float) and math.isnan(b)) or math.isclose(
            a, b, rel_tol=1e-6, abs_tol=1e-9
        )
    if isinstance(b, float) and isinstance(a, int) and not isinstance(a, bool):
        return _eq(b, a)
    if type(a) is not type(b) and not (isinstance(a, int) and isinstance(b, int)):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_eq(a[k], b[k]) for k in a)
    return bool(a == b)


# ---------------------------------------------------------------------------- running
def _observe_calls(
    spec: CodeSpec, solution: str, probes: Sequence[Probe], sandbox: Sandbox, fn: str = ""
) -> list[Observation]:
    """Every probe answered by ``solution``'s candidate process (restarted after a failure)."""
    out: list[Observation] = []
    stalls = 0
    while len(out) < len(probes):
        if stalls >= _MAX_STALLS:  # it keeps hanging: leave the rest unobserved
            return out + [Observation.not_run()] * (len(probes) - len(out))
        batch = probes[len(out) :]
        ex = _run_batch(spec, solution, batch, sandbox, fn)
        if ex.infra_error:
            raise ProbeInfraError(ex.infra_error)
        got, stop = _replies(ex, len(batch))
        out += got
        if len(got) < len(batch):
            out.append(Observation(False, stop))
            stalls += stop in ("limit:wall", "limit:cpu")
    return out


def _run_batch(
    spec: CodeSpec, solution: str, batch: Sequence[Probe], sandbox: Sandbox, fn: str = ""
) -> Execution:
    """One candidate run answering ``batch``, calling ``fn`` (default: the entry point)."""
    wall = min(spec.timeout_s, _START_S + _PER_PROBE_S * len(batch))
    limits = Limits(wall_s=wall, cpu_s=wall, memory_mb=spec.memory_mb, max_output_bytes=_MAX_OUTPUT)
    fn = fn or spec.entry_point or "candidate"
    lines = [json.dumps({"fn": fn, **p.payload}) for p in batch]
    return sandbox.run(
        {"harness.py": HARNESS_SOURCE, "solution.py": solution},
        [sandbox.python, "-I", "-S", "harness.py", "candidate"],
        limits,
        stdin=("\n".join(lines) + "\n").encode(),
    )


def _replies(ex: Execution, wanted: int) -> tuple[list[Observation], str]:
    """Observations from one run's replies, and why it stopped early (if it did)."""
    lines = ex.stdout.decode("utf-8", errors="replace").splitlines()
    stop = f"limit:{ex.limit_hit}" if ex.limit_hit else "crashed"
    if ex.stdout_truncated:
        stop = "limit:output"
    if not lines:
        return [], stop
    try:
        loaded = json.loads(lines[0])
    except ValueError:
        return [], "protocol"
    if not isinstance(loaded, dict) or loaded.get("op") != "loaded":
        return [], "protocol"
    if loaded.get("error") is not None:  # the solution does not load: every probe fails so
        reason = str(loaded["error"]).split(":", 1)[0][:80]
        return [Observation(False, f"load:{reason}")] * wanted, ""
    out: list[Observation] = []
    for raw in lines[1 : wanted + 1]:
        try:
            rep = json.loads(raw)
        except ValueError:
            return out, "protocol"
        if isinstance(rep, dict) and "ok" in rep:
            out.append(Observation(True, json.dumps(canonical(rep["ok"]), sort_keys=True)))
        elif isinstance(rep, dict) and isinstance(rep.get("exc"), list) and rep["exc"]:
            out.append(Observation(False, str(rep["exc"][0])[:80]))
        else:
            return out, "protocol"
    return out, stop


def _run_io(spec: CodeSpec, solution: str, probe: Probe, sandbox: Sandbox) -> Observation:
    wall = min(spec.timeout_s, _START_S)
    limits = Limits(wall_s=wall, cpu_s=wall, memory_mb=spec.memory_mb)
    ex = sandbox.run(
        {"solution.py": solution},
        [sandbox.python, "-I", "-S", "solution.py"],
        limits,
        stdin=str(probe.payload).encode(),
    )
    if ex.infra_error:
        raise ProbeInfraError(ex.infra_error)
    if ex.limit_hit:
        return Observation(False, f"limit:{ex.limit_hit}")
    if ex.exit_code != 0:
        tail = ex.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:]
        kind = tail[0].split(":", 1)[0][:80] if tail else ""
        return Observation(False, f"exit:{kind or ex.exit_code}")
    out = normalise_output(ex.stdout.decode("utf-8", errors="replace"))
    return Observation(True, json.dumps(out))
