"""The API family's differ: one call dropped or one argument changed; varied initial states.

- ``mutants`` (via ``ast``): the calls of the reference made on boto3 clients or resources
  (names bound to ``boto3.client(...)`` / ``boto3.resource(...)`` / ``<session>.client(...)``,
  or such a call chained directly): ``api.drop_call`` replaces a call that stands alone as a
  statement with ``pass``; ``api.change_arg`` changes one literal argument (strings suffixed
  ``-x``, bytes suffixed ``b"-x"``, integers +1, booleans negated). Each mutant is the
  reference text with only that node's characters replaced (positions from ``ast``).
- ``probes``: variations of the task's ``initial_state`` (payload: the whole varied state):
  a copy of an existing object under a new key beside it; every object's last line repeated;
  the first object of every bucket removed; an unrelated object under another prefix; a copy
  of the last message in every queue; every bucket emptied; a new message in every queue; the
  first message of every queue removed; every queue emptied. A variation that changes nothing
  (no bucket, no queue) is left out. ``seed`` goes into the new keys and messages.
- ``observe``: each solution is run by the family's own verifier (``ApiVerifier``: moto in
  the sandbox, the same harness) on the varied state; the observation is the final state,
  normalised: S3 as bucket -> key -> sha256, queues and log groups as message lists (sorted
  when the task's ``order_insensitive``) plus in-flight counts. A candidate that exits non-zero
  or overruns is an error observation (``exit`` / ``timeout``); a harness or sandbox failure
  raises ``ProbeInfraError``. Runs go ``PARALLEL`` at a time.
- ``agree``: equal normalised states.

It does NOT guard against: calls made through helpers the reference defines around a client
(only direct calls are mutated), variations the task's prompt rules out (the reference then
fails on them and the detectors drop them), or moto's divergences from AWS.
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tasksieve.schemas import ApiSpec, TaskRecord
from tasksieve.schemas.task import ApiInitialState
from tasksieve.verifiers.families.api.verifier import ApiVerifier
from tasksieve.verifiers.families.probes import Mutant, Observation, Probe, ProbeInfraError
from tasksieve.verifiers.sandbox.base import Sandbox

PARALLEL = 4
_FACTORIES = frozenset(("client", "resource"))


def _spec(task: TaskRecord) -> ApiSpec:
    if not isinstance(task.verifier, ApiSpec):
        raise ValueError(f"not an api task: {task.verifier.family}")
    return task.verifier


def _is_factory(node: ast.AST) -> bool:
    """``boto3.client(...)``, ``boto3.resource(...)``, ``session.client(...)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _FACTORIES
    )


def _clients(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_factory(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def api_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls made on a boto3 client or resource, in source order."""
    clients = _clients(tree)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        target = node.func.value
        on_client = (isinstance(target, ast.Name) and target.id in clients) or _is_factory(target)
        if on_client and not _is_factory(node):
            out.append(node)
    return sorted(out, key=lambda c: (c.lineno, c.col_offset))


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "-x"
    if isinstance(value, bytes):
        return value + b"-x"
    return None


def _describe(call: ast.Call) -> str:
    assert isinstance(call.func, ast.Attribute)
    return f"line {call.lineno} {call.func.attr}()"


def _splice(source: str, node: ast.AST, text: str) -> str:
    """``source`` with ``node``'s own characters replaced by ``text`` (the rest untouched)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln.encode("utf-8")))
    raw = source.encode("utf-8")
    lo = starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
    hi = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
    return (raw[:lo] + text.encode("utf-8") + raw[hi:]).decode("utf-8")


def _edits(source: str) -> list[tuple[str, str, str]]:
    """Every mutant of ``source``: (operator, where, text), each a splice of one node."""
    tree = ast.parse(source)
    statements = {
        id(n.value): n
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
    }
    out: list[tuple[str, str, str]] = []
    for call in api_calls(tree):
        stmt = statements.get(id(call))
        if stmt is not None:
            out.append(
                ("api.drop_call", f"{_describe(call)} dropped", _splice(source, stmt, "pass"))
            )
        args: list[tuple[str, ast.expr]] = [(f"arg {i + 1}", a) for i, a in enumerate(call.args)]
        args += [(k.arg, k.value) for k in call.keywords if k.arg]
        for name, value in args:
            if not isinstance(value, ast.Constant):
                continue
            new = _changed(value.value)
            if new is None:
                continue
            where = f"{_describe(call)} {name}={value.value!r:.40} changed"
            out.append(("api.change_arg", where, _splice(source, value, repr(new))))
    return out


def _last_line_again(text: str) -> str:
    lines = text.splitlines(keepends=True)
    body = [ln for ln in lines if ln.strip()]
    if len(body) < 2:
        return text + "-v"
    last = body[-1] if body[-1].endswith("\n") else body[-1] + "\n"
    return (text if text.endswith("\n") else text + "\n") + last


def variations(initial: ApiInitialState, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """(label, varied initial state) pairs, most telling first (see the module docstring)."""
    base = initial.model_dump()
    out: list[tuple[str, dict[str, Any]]] = []

    def vary(label: str, change: Any) -> None:
        state = copy.deepcopy(base)
        if change(state) is not False and state != base:
            out.append((label, state))

    def copy_object(s: dict[str, Any]) -> None:
        for objects in s["buckets"].values():
            if objects:
                key = sorted(objects)[0]
                head, _, name = key.rpartition("/")
                stem, dot, ext = name.partition(".")
                new = f"{head + '/' if head else ''}{stem}-copy{seed}{dot}{ext}"
                objects[new] = objects[key]

    def longer(s: dict[str, Any]) -> None:
        for objects in s["buckets"].values():
            for key in objects:
                objects[key] = _last_line_again(objects[key])

    def drop_first(s: dict[str, Any]) -> None:
        for objects in s["buckets"].values():
            if objects:
                del objects[sorted(objects)[0]]

    def unrelated(s: dict[str, Any]) -> None:
        for objects in s["buckets"].values():
            objects[f"zz-other-{seed}/note.bin"] = f"unrelated {seed}"

    def more_messages(s: dict[str, Any]) -> None:
        for q in s["queues"]:
            msgs = s["queue_messages"].setdefault(q, [])
            msgs.append(msgs[-1] if msgs else f"probe message {seed}")

    def empty(s: dict[str, Any]) -> None:
        for b in s["buckets"]:
            s["buckets"][b] = {}

    def new_message(s: dict[str, Any]) -> None:
        for q in s["queues"]:
            s["queue_messages"].setdefault(q, []).append(f"probe message {seed}")

    def drop_message(s: dict[str, Any]) -> None:
        for msgs in s["queue_messages"].values():
            del msgs[:1]

    def drain(s: dict[str, Any]) -> None:
        s["queue_messages"] = {}

    vary("copy of an object under a new key", copy_object)
    vary("every object's last line repeated", longer)
    vary("one more message in every queue", more_messages)
    vary("first object of every bucket removed", drop_first)
    vary("an unrelated object in every bucket", unrelated)
    vary("every bucket empty", empty)
    vary("a new message in every queue", new_message)
    vary("first message of every queue removed", drop_message)
    vary("every queue empty", drain)
    return out


def normalise(state: dict[str, Any], unordered: bool) -> dict[str, Any]:
    """The final state as compared: object digests, message lists, in-flight counts."""
    s3 = {
        b: {k: o.get("sha256") or f"size {o.get('size')}" for k, o in objs.items()}
        for b, objs in (state.get("s3") or {}).get("buckets", {}).items()
    }
    sqs = {}
    for q, v in (state.get("sqs") or {}).get("queues", {}).items():
        msgs = list(v.get("messages", []))
        sqs[q] = {"messages": sorted(msgs) if unordered else msgs, "hidden": v.get("hidden", 0)}
    logs = {}
    for g, v in (state.get("logs") or {}).get("groups", {}).items():
        msgs = list(v.get("messages", []))
        logs[g] = sorted(msgs) if unordered else msgs
    return {"s3": s3, "sqs": sqs, "logs": logs}


class ApiDiffer:
    """Mutants, probes and observations for ``api`` tasks (see the module docstring)."""

    family = "api"

    def __init__(self, python: str | None = None, site: list[str] | None = None) -> None:
        self.python, self.site = python, site  # passed to ApiVerifier (None: its defaults)

    def mutants(self, task: TaskRecord, limit: int, seed: int) -> list[Mutant]:
        """At most ``limit`` one-call mutants of the reference, deterministic for ``seed``."""
        _spec(task)
        try:
            found = _edits(task.reference_solution)
            base = task.reference_solution
        except (SyntaxError, ValueError, RecursionError):
            return []
        by_op: dict[str, list[tuple[str, str, str]]] = {}
        for e in found:
            if e[2] != base:
                by_op.setdefault(e[0], []).append(e)
        rng = random.Random(seed)
        for group in by_op.values():
            rng.shuffle(group)
        out: list[Mutant] = []
        seen: set[str] = set()
        while len(out) < limit and any(by_op.values()):
            for op in sorted(by_op):
                if by_op[op] and len(out) < limit:
                    o, where, text = by_op[op].pop(0)
                    if text not in seen:
                        seen.add(text)
                        out.append(Mutant(o, where, text))
        return out

    def probes(self, task: TaskRecord, limit: int, seed: int) -> list[Probe]:
        """Varied initial states (see ``variations``), at most ``limit``."""
        spec = _spec(task)
        found = variations(spec.initial_state, seed)
        return [Probe(label, state, "variation") for label, state in found[: max(0, limit)]]

    def observe(
        self, task: TaskRecord, solutions: Sequence[str], probes: Sequence[Probe], sandbox: Sandbox
    ) -> list[list[Observation]]:
        """``result[i][j]``: the final state after ``solutions[i]`` ran on ``probes[j]``."""
        spec = _spec(task)
        verifier = ApiVerifier(sandbox, self.python, self.site)
        tasks = [
            task.model_copy(
                update={
                    "verifier": spec.model_copy(
                        update={"initial_state": ApiInitialState.model_validate(p.payload)}
                    )
                }
            )
            for p in probes
        ]
        jobs = [(i, j) for i in range(len(solutions)) for j in range(len(probes))]
        unordered = spec.expected_state.order_insensitive

        def one(job: tuple[int, int]) -> Observation:
            i, j = job
            out = verifier.verify_detailed(tasks[j], solutions[i])
            v = out.verdict
            if v.status == "infra_error":
                raise ProbeInfraError(f"probe {probes[j].label!r}: {v.detail[:300]}")
            if v.status == "timeout":
                return Observation(False, "timeout")
            if not out.candidate:
                return Observation(False, "error")  # no result line: the harness was killed
            if out.candidate.get("exit_code") not in (0, None):
                return Observation(False, "exit")
            return Observation.of(normalise(out.state, unordered))

        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            flat = list(pool.map(one, jobs))
        return [flat[i * len(probes) : (i + 1) * len(probes)] for i in range(len(solutions))]

    def agree(self, task: TaskRecord, a: Observation, b: Observation) -> bool:
        """Whether two final states are the same."""
        return a.ok == b.ok and a.value == b.value
