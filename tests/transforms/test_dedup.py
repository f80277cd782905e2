"""The distributed NearDedup on Beam's DirectRunner: clusters, survivors, index, rounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.transforms.algorithms.minhash import MinHasher
from tasksieve.transforms.dedup.index_store import write_index_part
from tasksieve.transforms.dedup.near import DedupConfig, NearDedup
from tasksieve.transforms.runtime.items import Item

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
]


def text(change: set[int] = frozenset(), words: list[str] = WORDS) -> str:  # type: ignore[assignment]
    return " ".join(f"changed{i}" if i in change else w for i, w in enumerate(words))


def item(ident: str, prompt: str, line: int, file: str = "a.jsonl") -> Item:
    task = TaskRecord(
        id=ident,
        family="code",
        prompt=prompt,
        reference_solution="",
        verifier={"family": "code", "style": "asserts", "entry_point": "f", "asserts": ["1"]},
    )
    return Item(task=task, source_file=file, source_line=line, input_sha256="x")


_SINK: dict[str, list[Any]] = {}


def _collect(x: Any, name: str) -> None:
    _SINK[name].append(x)


def run(items: list[Item], cfg: DedupConfig) -> tuple[list[Item], list[dict[str, Any]]]:
    """Run NearDedup in-process; module-level sinks survive the DoFn pickling."""
    _SINK.clear()
    _SINK.update(ok=[], rejected=[])
    with beam.Pipeline() as p:
        out = p | beam.Create(items) | NearDedup(cfg, "run")
        _ = out["ok"] | "K" >> beam.Map(_collect, "ok")
        _ = out["rejected"] | "R" >> beam.Map(_collect, "rejected")
    return list(_SINK["ok"]), list(_SINK["rejected"])


# A~B and B~C have Jaccard 0.87 (one changed word each); A vs C is 0.75, below 0.8.
A = text()
B = text({20})
C = text({20, 10})


def test_transitive_cluster_keeps_earliest_and_names_it() -> None:
    items = [
        item("c", C, 3),
        item("b", B, 2),
        item("a", A, 1),
        item("z", text(words=WORDS[::-1]), 4),
    ]
    kept, rej = run(items, DedupConfig(near_threshold=0.8))
    assert sorted(it.id for it in kept) == ["a", "z"]
    assert {r["record_id"]: r["reason"] for r in rej} == {"b": "dedup.near", "c": "dedup.near"}
    for r in rej:
        assert r["detail"].startswith("near-duplicate of a ")
    survivor = next(it for it in kept if it.id == "a")
    assert {f.other_id for f in survivor.findings} == {"b", "c"}


def test_survivor_is_smallest_file_line_id_not_input_order() -> None:
    items = [item("x", A, 9, "b.jsonl"), item("y", A + " extra", 50, "a.jsonl")]
    kept, rej = run(items, DedupConfig())
    assert [it.id for it in kept] == ["y"]
    assert rej[0]["record_id"] == "x" and "near-duplicate of y" in rej[0]["detail"]


def test_below_threshold_pair_is_not_dropped() -> None:
    kept, rej = run([item("a", A, 1), item("c", C, 2)], DedupConfig(near_threshold=0.8))
    assert len(kept) == 2 and not rej


@pytest.mark.parametrize("rounds", [0, 1])
def test_long_chain_resolves_with_few_rounds(rounds: int) -> None:
    words = [f"w{i}" for i in range(60)]
    chain = [text(set(range(0, 2 * k, 2)), words) for k in range(8)]
    items = [item(f"n{k}", t, k + 1) for k, t in enumerate(chain)]
    kept, rej = run(items, DedupConfig(near_threshold=0.85, cc_rounds=rounds))
    assert [it.id for it in kept] == ["n0"]
    assert all("near-duplicate of n0" in r["detail"] for r in rej)


def test_disabled_passes_everything() -> None:
    kept, rej = run([item("a", A, 1), item("b", A, 2)], DedupConfig(enabled=False))
    assert len(kept) == 2 and not rej


def test_index_rejects_candidates_naming_the_indexed_id(tmp_path: Path) -> None:
    cfg = DedupConfig(index_path=str(tmp_path / "idx"))
    write_index_part(
        cfg.index_path or "",
        cfg.index_settings(),
        ["old-1"],
        ["earlier"],
        [text({20})],
        MinHasher(cfg.num_perm, cfg.seed),
        cfg.shingle(),
    )
    kept, rej = run([item("a", A, 1), item("z", text(words=WORDS[::-1]), 2)], cfg)
    assert [it.id for it in kept] == ["z"]
    assert rej[0]["reason"] == "dedup.index" and "indexed task old-1" in rej[0]["detail"]


def test_index_with_other_settings_is_refused(tmp_path: Path) -> None:
    cfg = DedupConfig(index_path=str(tmp_path / "idx"))
    write_index_part(
        str(tmp_path / "idx"),
        cfg.index_settings(),
        ["old"],
        ["x"],
        [A],
        MinHasher(cfg.num_perm, cfg.seed),
        cfg.shingle(),
    )
    with pytest.raises(ValueError, match="built with"):
        run([item("a", A, 1)], DedupConfig(index_path=cfg.index_path, num_perm=64))


@pytest.mark.parametrize(
    "bad", [{"near_threshold": 0.0}, {"shingle_kind": "bytes"}, {"max_bucket": 1}]
)
def test_bad_config_fails_at_construction(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        DedupConfig(**bad)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_planted_families_collapse_to_their_earliest_member(seed: int) -> None:
    """Each family (a base and copies with one word changed) keeps only its first line."""
    import random

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    items: list[Item] = []
    expected_kept: set[str] = set()
    for fam in range(12):
        base = rng.sample(vocab, 60)
        copies = rng.randint(0, 3)
        for c in range(copies + 1):
            words = list(base)
            if c:
                words[rng.randrange(60)] = f"edit{fam}x{c}"
            items.append(item(f"f{fam}c{c}", " ".join(words), line=100 * fam + c))
        expected_kept.add(f"f{fam}c0")
    rng.shuffle(items)
    kept, rej = run(items, DedupConfig(near_threshold=0.8))
    assert {it.id for it in kept} == expected_kept
    for r in rej:
        assert r["detail"].startswith(f"near-duplicate of {r['record_id'].split('c')[0]}c0 ")
