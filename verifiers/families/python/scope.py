"""Probes inside a code task's contract, each with the reason it is there.

Candidates, in this order until ``limit``: the task's own ``probe_inputs`` (the author's word
puts them in contract), inputs made by the task's ``input_domain.generator``, convention and
landmark inputs (``conventions``), then inputs mutated from the tests' own (``probing``).
Every candidate but the author's own must satisfy the statement's stated preconditions
(``contract.preconditions``) and the task's ``input_domain.predicate`` (run in the sandbox);
mutated and landmark ones must also fit the tests' envelope when ``envelope`` is asked for.
Convention inputs are exempt from the envelope: the tests being silent about them is what
makes the convention open. ``io`` tasks have no statement rules or conventions here: their
probes are in contract only through the predicate (else ``contracted`` is False).

It does NOT guard against a predicate or generator that is itself wrong, slow or hostile
beyond what the sandbox limits hold: a predicate that raises or times out on an input
excludes it; a generator that fails contributes nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tasksieve.schemas import CodeSpec, TaskRecord
from tasksieve.verifiers.families.probes import Probe, ProbeSet
from tasksieve.verifiers.families.python import conventions, probing
from tasksieve.verifiers.families.python.contract import (
    Envelope,
    Precondition,
    named,
    params,
    preconditions,
)
from tasksieve.verifiers.families.python.guest import codec
from tasksieve.verifiers.families.python.verifier import AST_LOCK
from tasksieve.verifiers.sandbox.base import Sandbox

Args = tuple[list[Any], dict[str, Any]]
# runs ``fn`` of ``source`` on each payload in the sandbox; one reply per payload, None = failed
Caller = Callable[[str, str, Sequence[dict[str, Any]]], list[Any | None]]


def _payload(args: Args) -> dict[str, Any]:
    return {"args": codec.encode(args[0]), "kwargs": codec.encode(args[1])}


def _generated(spec: CodeSpec, call: Caller, limit: int, seed: int) -> list[Args]:
    dom = spec.input_domain
    if dom is None or not dom.generator or limit <= 0:
        return []
    got = call(dom.generator, "generate", [_payload(([seed, limit], {}))])
    rows = got[0] if got else None
    out: list[Args] = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, list | tuple):
            out.append((list(row), {}))
    return out[:limit]


class _Keeper:
    """Collects in-contract probes up to a limit and counts what it drops."""

    def __init__(self, entry: str, limit: int, names: list[str], rules: list[Precondition]):
        self.entry, self.limit, self.names, self.rules = entry, limit, names, rules
        self.kept: list[tuple[Args, str, str]] = []  # call, origin, why
        self.dropped: Counter[str] = Counter()
        self.seen: set[str] = set()

    def offer(self, call: Args, origin: str, why: str, fits: bool = True) -> None:
        k = probing.key(call)
        if k in self.seen:
            return
        self.seen.add(k)
        if not fits:
            self.dropped["test_envelope"] += 1
            return
        if origin != "task":
            broken = [r.text for r in self.rules if not r.holds(named(call, self.names))]
            if broken:
                self.dropped["precondition"] += 1
                return
        self.kept.append((call, origin, why))

    def stated(self) -> str:
        texts = list(dict.fromkeys(r.text for r in self.rules))
        return "satisfies " + ", ".join(texts[:4]) if texts else "no stated precondition"


def scoped_call_probes(
    task: TaskRecord, spec: CodeSpec, limit: int, seed: int, call: Caller, *, envelope: bool
) -> ProbeSet:
    """Probes for a function-style task (see the module docstring)."""
    entry = spec.entry_point or "candidate"
    with AST_LOCK:  # ast and the parser are not used from several threads at once
        tests = probing.test_inputs(spec)
        given = probing.task_inputs(spec)
        names = params(task.reference_solution, entry)
    sample = named(tests[0], names) if tests else {}
    rules = preconditions(task.prompt, names, sample)
    env = Envelope.of(tests)
    keep = _Keeper(entry, limit, names, rules)
    keep.seen |= {probing.key(a) for a in tests}
    stated = keep.stated()
    for a in given:
        keep.offer(a, "task", "given by the task's probe_inputs")
    for a in _generated(spec, call, limit, seed):
        keep.offer(a, "domain", f"made by the task's input_domain generator; {stated}")
    made = conventions.made(task.prompt, tests)
    room = max(limit // 2, limit - len(keep.kept) - limit // 3)
    n_conv = 0
    for m in made:
        if n_conv >= room:
            break
        if m.open:
            before = len(keep.kept)
            keep.offer(
                m.call, "convention", f"convention {m.topic} ({m.detail}), left open; {stated}"
            )
            n_conv += len(keep.kept) > before
        else:
            fits = not envelope or env.admits(m.call)
            keep.offer(m.call, "landmark", f"{m.topic}: {m.detail}; {stated}", fits)
    shape = "inside the tests' input types, signs and characters; " if envelope else ""
    for a in probing.derive(tests + given, limit * 3, seed, set(keep.seen)):
        if len(keep.kept) >= limit * 2:
            break
        keep.offer(
            a,
            "derived",
            f"mutated from a test input, {shape}{stated}",
            env.admits(a) or not envelope,
        )
    kept = keep.kept
    dom = spec.input_domain
    if dom is not None and dom.predicate and kept:
        verdicts = call(dom.predicate, "valid", [_payload(a) for a, _, _ in kept])
        ok = [v is True for v in verdicts]
        keep.dropped["input_domain"] += ok.count(False)
        kept = [
            (a, o, w + "; input_domain predicate holds")
            for (a, o, w), good in zip(kept, ok, strict=True)
            if good or o == "task"
        ]
    probes = tuple(
        Probe(
            probing.call_label(entry, a),
            _payload(a),
            o,
            w,
            contracted=True,
            typical=o in ("task", "domain") or (o != "convention" and env.admits(a)),
        )
        for a, o, w in _first(kept, limit)
    )
    return ProbeSet(probes, tuple(sorted(keep.dropped.items())))


def _first(kept: list[tuple[Args, str, str]], limit: int) -> list[tuple[Args, str, str]]:
    """``limit`` probes: author's and generated first, then conventions, then the rest."""
    rank = {"task": 0, "domain": 1, "convention": 2, "landmark": 3, "derived": 4}
    head = [k for k in kept if k[1] in ("task", "domain", "convention")]
    tail = [k for k in kept if k[1] not in ("task", "domain", "convention")]
    chosen = sorted(head, key=lambda k: rank[k[1]])[:limit]
    return chosen + tail[: limit - len(chosen)]


def scoped_io_probes(spec: CodeSpec, base: Sequence[Probe], call: Caller) -> ProbeSet:
    """``io`` probes: in contract through the task's predicate on the stdin text, if any."""
    dom = spec.input_domain
    if dom is None or not dom.predicate or not base:
        return ProbeSet(tuple(base))
    verdicts = call(dom.predicate, "valid", [_payload(([p.payload], {})) for p in base])
    kept = tuple(
        Probe(p.label, p.payload, p.origin, "input_domain predicate holds", True)
        for p, v in zip(base, verdicts, strict=True)
        if v is True
    )
    return ProbeSet(
        kept, (("input_domain", len(base) - len(kept)),) if len(kept) < len(base) else ()
    )


def decode_reply(value: str) -> Any:
    """A reply's canonical JSON back to a plain value (None when it does not decode)."""
    try:
        return codec.decode(json.loads(value))
    except (ValueError, TypeError, RecursionError):
        return None


def sandbox_caller(spec: CodeSpec, sandbox: Sandbox, observe: Any) -> Caller:
    """A ``Caller`` that runs author code through ``observe`` (the differ's candidate runs)."""

    def call(source: str, fn: str, payloads: Sequence[dict[str, Any]]) -> list[Any | None]:
        probes = [Probe(fn, p) for p in payloads]
        seen = observe(spec, source, probes, sandbox, fn)
        return [decode_reply(o.value) if o.ok else None for o in seen]

    return call
