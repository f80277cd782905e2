"""The near-dedup index: the per-worker lookup against the shuffle, and compaction."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.transforms.algorithms.minhash import MinHasher
from tasksieve.transforms.dedup.index_compact import compact_index, maybe_compact
from tasksieve.transforms.dedup.index_lookup import LoadedIndex
from tasksieve.transforms.dedup.index_store import index_files, write_index_part
from tasksieve.transforms.dedup.near import DedupConfig
from tests.transforms.test_dedup import WORDS, item, run, text

OTHER = text(words=WORDS[::-1])


def add(cfg: DedupConfig, entries: list[tuple[str, str]], source: str = "earlier") -> str:
    return write_index_part(
        cfg.index_path or "",
        cfg.index_settings(),
        [i for i, _ in entries],
        [source] * len(entries),
        [t for _, t in entries],
        MinHasher(cfg.num_perm, cfg.seed),
        cfg.shingle(),
    )


def outcome(cfg: DedupConfig, items: list[Any]) -> tuple[list[str], dict[str, str]]:
    kept, rej = run(items, cfg)
    return sorted(it.id for it in kept), {r["record_id"]: r["detail"] for r in rej}


@pytest.mark.parametrize(
    ("index", "candidates"),
    [
        # a candidate matching the index directly
        ([("old", text({20}))], [("a", text()), ("z", OTHER)]),
        # b is near a (0.87) but not near the indexed entry (0.75): the cluster still holds it
        ([("old", text({20, 10}))], [("a", text({20})), ("b", text()), ("z", OTHER)]),
        # two indexed copies of one task, and an indexed task with an empty prompt
        ([("old", text()), ("old2", text()), ("blank", " ")], [("a", text()), ("z", OTHER)]),
        # nothing in the index matches
        ([("old", OTHER)], [("a", text()), ("b", text({3}))]),
    ],
)
def test_worker_lookup_decides_as_the_shuffle_does(
    tmp_path: Path, index: list[tuple[str, str]], candidates: list[tuple[str, str]]
) -> None:
    cfg = DedupConfig(index_path=str(tmp_path / "idx"))
    add(cfg, index)
    items = [item(i, t, n + 1) for n, (i, t) in enumerate(candidates)]
    shuffled = outcome(dataclasses.replace(cfg, index_lookup="shuffle"), items)
    assert outcome(cfg, items) == shuffled


def test_a_cluster_reaching_the_index_through_a_candidate_names_the_indexed_task(
    tmp_path: Path,
) -> None:
    cfg = DedupConfig(index_path=str(tmp_path / "idx"))
    add(cfg, [("old", text({20, 10}))])
    kept, rejected = outcome(cfg, [item("a", text({20}), 1), item("b", text(), 2)])
    assert kept == []
    assert all(d.startswith("indexed task old ") for d in rejected.values())


def test_duplicate_ids_in_the_index_are_loaded_once(tmp_path: Path) -> None:
    cfg = DedupConfig(index_path=str(tmp_path / "idx"))
    add(cfg, [("old", text())])
    add(cfg, [("old", text())])
    loaded = LoadedIndex(index_files(cfg.index_path or ""), cfg.banding())
    assert loaded.entries == 1
    assert [i for i, _ in loaded.matches(*_doc(cfg, text()), cfg.near_threshold)] == ["old"]


def _doc(cfg: DedupConfig, prompt: str) -> tuple[Any, tuple[int, ...]]:
    from tasksieve.transforms.algorithms.minhash import band_keys
    from tasksieve.transforms.algorithms.textsim import shingle_hashes

    sh = shingle_hashes([prompt], cfg.shingle())
    sig = MinHasher(cfg.num_perm, cfg.seed).signatures(sh)
    return sh[0], tuple(int(v) for v in band_keys(sig, cfg.banding())[0])


def test_bad_index_lookup_is_refused() -> None:
    with pytest.raises(ValueError, match="worker"):
        DedupConfig(index_lookup="join")


def test_compaction_merges_parts_and_keeps_every_task(tmp_path: Path) -> None:
    cfg = DedupConfig(index_path=str(tmp_path / "idx"))
    for k in range(4):
        add(cfg, [(f"t{k}", text({k})), ("same", OTHER)], source="run:1" if k else "run:0")
    before = LoadedIndex(index_files(cfg.index_path or ""), cfg.banding())
    merged, rows, part = compact_index(cfg.index_path or "")
    assert merged == 4 and rows == 6  # ("same", run:1) was added three times: kept once
    assert index_files(cfg.index_path or "") == [part]
    after = LoadedIndex([part], cfg.banding())
    assert set(after.ids) == set(before.ids) and len(after.ids) == 6
    kept, rejected = outcome(cfg, [item("a", text({1}), 1), item("z", OTHER, 2)])
    assert kept == [] and rejected["a"].startswith("indexed task ") and "t1" in rejected["a"]


@pytest.mark.parametrize(("parts", "after", "merged"), [(3, 3, 0), (4, 3, 4)])
def test_maybe_compact_waits_for_the_threshold(
    tmp_path: Path, parts: int, after: int, merged: int
) -> None:
    cfg = DedupConfig(index_path=str(tmp_path / "idx"))
    for k in range(parts):
        add(cfg, [(f"t{k}", text({k}))])
    assert maybe_compact(cfg.index_path or "", after) == merged


def test_compact_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = DedupConfig(index_path=str(tmp_path / "idx"))
    add(cfg, [("a", text())])
    add(cfg, [("b", OTHER)])
    assert (
        main(["dedup-index", "compact", "--index", str(tmp_path / "idx"), "--format", "json"]) == 0
    )
    assert '"merged": 2, "rows": 2' in capsys.readouterr().out
    assert len(index_files(str(tmp_path / "idx"))) == 1


def test_compact_refuses_a_directory_that_is_not_an_index(tmp_path: Path) -> None:
    (tmp_path / "part-00000-x.parquet").write_bytes(b"x")
    assert main(["dedup-index", "compact", "--index", str(tmp_path)]) == 2
