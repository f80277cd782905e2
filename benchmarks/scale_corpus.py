"""Synthetic task corpus for the scale benchmark: three families, planted faults, replay file.

Every base task is a real, solvable task of the ``code``, ``sql`` or ``config`` family (a
reference that passes its own tests) whose prompt carries a generated scenario paragraph, so
distinct tasks share almost no word 3-grams. Planted among them, in fixed shares of the
records: exact duplicates (a copy under a new id: ``dedup.exact``), near duplicates (one or
two words of the prompt changed: ``dedup.near``), contamination (a HumanEval prompt posing as
a code task: ``decontam.humaneval``), records that do not parse or break the schema
(``validate.*``) and repeated ids (``validate.duplicate_id``). The replay file holds ``k``
chat-style completions per valid task, right or wrong so that pass rates spread over 0..k.

The ``api`` family is left out: each of its runs starts an AWS stand-in, which costs seconds
per run here and would swamp the other families (its per-task cost is stated apart).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYLL = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "po", "dri", "an", "ex", "or", "qui", "zen"]
SHARES = {"exact": 0.03, "near": 0.05, "contaminated": 0.01, "invalid": 0.01, "dup_id": 0.005}
FAMILIES = ("code", "sql", "config")
WEIGHTS = (0.5, 0.3, 0.2)


@dataclass
class Corpus:
    """Task lines (JSONL text), replay completions per task id, and what was planted."""

    lines: list[str] = field(default_factory=list)
    replay: dict[str, list[str]] = field(default_factory=dict)
    planted: dict[str, int] = field(default_factory=dict)


def _vocab(rng: random.Random, n: int) -> list[str]:
    return list(dict.fromkeys("".join(rng.choices(SYLL, k=rng.randint(2, 4))) for _ in range(n)))


def _scenario(rng: random.Random, vocab: list[str]) -> str:
    """A paragraph of generated words: what makes two tasks' prompts differ."""
    sents = [" ".join(rng.choices(vocab, k=rng.randint(8, 14))).capitalize() + "." for _ in "abc"]
    return "Context: " + " ".join(sents)


def _fence(lang: str, body: str) -> str:
    return f"Here is my answer:\n\n```{lang}\n{body.rstrip()}\n```\n"


def _code(rng: random.Random, vocab: list[str], tid: str, k: int) -> tuple[dict[str, Any], list]:
    name = f"f_{rng.choice(vocab)}_{tid.rsplit('-', 1)[-1]}"
    a, b, t = rng.randint(2, 9), rng.randint(-20, 20), rng.randint(0, 40)

    def ref(xs: list[int]) -> int:
        return sum(x * a for x in xs if x > t) + b

    cases = [[rng.randint(-10, 60) for _ in range(rng.randint(0, 8))] for _ in range(5)]
    cases.append([t, t + 1, t - 1])
    prompt = (
        f"Write a Python function `{name}(xs: list[int]) -> int` that returns {b} plus {a} "
        f"times the sum of the elements of `xs` that are strictly greater than {t}.\n"
        + _scenario(rng, vocab)
    )
    good = f"def {name}(xs):\n    return sum(x * {a} for x in xs if x > {t}) + {b}\n"
    wrong = [
        f"def {name}(xs):\n    return sum(x * {a} for x in xs if x >= {t}) + {b}\n",
        f"def {name}(xs):\n    return sum(x * {a} for x in xs) + {b}\n",
        f"def {name}(xs):\n    return sum(x for x in xs if x > {t}) + {b}\n",
    ]
    spec = {
        "family": "code",
        "style": "asserts",
        "entry_point": name,
        "asserts": [f"assert {name}({c}) == {ref(c)}" for c in cases],
    }
    return {"prompt": prompt, "verifier": spec, "reference_solution": good}, _mix(
        rng, k, _fence("python", good), [_fence("python", w) for w in wrong]
    )


def _sql(rng: random.Random, vocab: list[str], tid: str, k: int) -> tuple[dict[str, Any], list]:
    table = f"t_{rng.choice(vocab)}"
    rows = [(i, rng.randint(0, 100), rng.choice(vocab[:50])) for i in range(1, 13)]
    x = sorted(v for _, v, _ in rows)[6]
    values = ", ".join(f"({i}, {v}, '{w}')" for i, v, w in rows)
    setup = (
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v INTEGER, tag VARCHAR);\n"
        f"INSERT INTO {table} VALUES {values};\n"
    )
    query = f"SELECT count(*) AS n, sum(v) AS total FROM {table} WHERE v > {x};"
    prompt = (
        f"The DuckDB table `{table}(id INTEGER, v INTEGER, tag VARCHAR)` holds one row per "
        f"reading. Return one row with the number of rows whose v is greater than {x} and "
        f"the sum of their v.\n" + _scenario(rng, vocab)
    )
    wrong = [
        f"SELECT count(*) AS n, sum(v) AS total FROM {table} WHERE v >= {x};",
        f"SELECT count(*) AS n, sum(v) AS total FROM {table};",
    ]
    spec = {"family": "sql", "setup_sql": setup, "reference_query": query}
    return {"prompt": prompt, "verifier": spec, "reference_solution": query + "\n"}, _mix(
        rng, k, _fence("sql", query), [_fence("sql", w) for w in wrong]
    )


def _config(rng: random.Random, vocab: list[str], tid: str, k: int) -> tuple[dict[str, Any], list]:
    service, port, workers = rng.choice(vocab), rng.randint(1024, 65000), rng.randint(1, 16)
    level = rng.choice(["debug", "info", "warning", "error"])
    want = {"service": service, "port": port, "log_level": level, "workers": workers}
    schema = {
        "type": "object",
        "required": sorted(want),
        "additionalProperties": False,
        "properties": {
            "service": {"type": "string", "minLength": 1},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "log_level": {"enum": ["debug", "info", "warning", "error"]},
            "workers": {"type": "integer", "minimum": 1},
        },
    }
    policies = [
        {"id": key, "kinds": [], "path": key, "op": "equals", "value": val}
        for key, val in want.items()
    ]
    prompt = (
        f'Write a JSON settings object with exactly the keys `service` set to "{service}", '
        f'`port` set to the integer {port}, `log_level` set to "{level}" and `workers` set to '
        f"the integer {workers}. No other keys are allowed.\n" + _scenario(rng, vocab)
    )
    good = json.dumps(want)
    wrong = [json.dumps(want | {"port": port + 1}), json.dumps(want | {"extra": True})]
    spec: dict[str, Any] = {"family": "config", "format": "json", "schema_kind": "jsonschema"}
    spec |= {"json_schema": schema, "policies": policies}
    return {"prompt": prompt, "verifier": spec, "reference_solution": good + "\n"}, _mix(
        rng, k, _fence("json", good), [_fence("json", w) for w in wrong]
    )


def _mix(rng: random.Random, k: int, good: str, wrong: list[str]) -> list[str]:
    """``k`` completions of which a uniform 0..k are right, in random order."""
    n_good = rng.randint(0, k)
    out = [good] * n_good + [rng.choice(wrong) for _ in range(k - n_good)]
    rng.shuffle(out)
    return out


MAKERS = {"code": _code, "sql": _sql, "config": _config}


def _humaneval_prompts() -> list[str]:
    from tasksieve.transforms.decontam.sets import load_humaneval

    return [it.text for it in load_humaneval()]


def make_corpus(n: int, k: int = 4, seed: int = 7) -> Corpus:
    """``n`` task lines with the planted shares of ``SHARES``, and ``k`` completions per task."""
    rng = random.Random(seed)
    vocab = _vocab(rng, 6000)
    humaneval = _humaneval_prompts()
    plants = {kind: int(n * share) for kind, share in SHARES.items()}
    n_base = n - sum(plants.values())
    out = Corpus(planted={"base": n_base, **plants})
    bases: list[dict[str, Any]] = []
    for i in range(n_base):
        fam = rng.choices(FAMILIES, WEIGHTS)[0]
        tid = f"{fam}-{i:07d}"
        body, completions = MAKERS[fam](rng, vocab, tid, k)
        rec = {"id": tid, "family": fam, **body, "source": {"dataset": "scale-synthetic"}}
        bases.append(rec)
        out.replay[tid] = completions
    records: list[Any] = list(bases)
    for j in range(plants["exact"]):
        src = rng.choice(bases)
        records.append(src | {"id": f"exact-{j:07d}"})
        out.replay[f"exact-{j:07d}"] = out.replay[src["id"]]
    for j in range(plants["near"]):
        src = rng.choice(bases)
        words = src["prompt"].split(" ")
        for _ in range(rng.randint(1, 2)):
            words[rng.randrange(len(words) // 2, len(words))] = rng.choice(vocab)
        records.append(src | {"id": f"near-{j:07d}", "prompt": " ".join(words)})
        out.replay[f"near-{j:07d}"] = out.replay[src["id"]]
    for j in range(plants["contaminated"]):
        src = rng.choice([b for b in bases if b["family"] == "code"] or bases)
        records.append(src | {"id": f"contam-{j:07d}", "prompt": rng.choice(humaneval)})
    for j in range(plants["invalid"]):
        if j % 2:
            records.append(f'{{"id": "broken-{j:07d}", "family": "code", "prompt": "cut')
        else:
            records.append({"id": f"schema-{j:07d}", "family": "sql", "prompt": "no verifier"})
    for _ in range(plants["dup_id"]):
        src = rng.choice(bases)
        records.append(src | {"prompt": src["prompt"] + " " + _scenario(rng, vocab)})
    rng.shuffle(records)
    out.lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    return out


def write_corpus(corpus: Corpus, root: Path, shard: int = 10_000) -> tuple[str, str]:
    """Write ``tasks/part-*.jsonl`` (``shard`` lines each) and ``replay.jsonl`` below ``root``;
    returns (tasks directory, replay file)."""
    tasks = root / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(corpus.lines), shard):
        part = tasks / f"part-{i // shard:05d}.jsonl"
        part.write_text("\n".join(corpus.lines[i : i + shard]) + "\n", encoding="utf-8")
    replay = root / "replay.jsonl"
    with replay.open("w", encoding="utf-8") as fh:
        for tid, completions in corpus.replay.items():
            for c in completions:
                fh.write(json.dumps({"task_id": tid, "completion": c}) + "\n")
    return str(tasks), str(replay)
