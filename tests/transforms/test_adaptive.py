"""The adaptive stopping rule: when a task's band label is settled."""

from __future__ import annotations

import itertools

import pytest

from tasksieve.transforms.algorithms.adaptive_stopping import (
    AdaptiveConfig,
    budget_label,
    next_round,
    sample_adaptively,
    schedule,
    settled_label,
)
from tasksieve.transforms.algorithms.stats import BandConfig

DEFAULT = BandConfig()
CFG = AdaptiveConfig(max_samples=16, first_round=4, round_size=4)


@pytest.mark.parametrize(
    ("k", "n", "label"),
    [
        (0, 0, None),
        (1, 4, "keep"),  # a pass and a failure: no sample can undo "keep"
        (3, 4, "keep"),
        (0, 4, None),  # no pass yet: 0 is not proven
        (4, 4, None),
        (0, 12, None),
        (12, 12, None),
        (0, 16, "too_hard"),  # the budget is spent: labelled as a fixed-K run would
        (16, 16, "too_easy"),
        (1, 16, "keep"),
    ],
)
def test_default_band_edges_settle_on_first_pass_and_failure(
    k: int, n: int, label: str | None
) -> None:
    assert settled_label(k, n, DEFAULT, CFG) == label


@pytest.mark.parametrize(
    ("k", "n", "confidence", "label"),
    [
        (0, 12, 0.95, "too_hard"),  # Wilson [0, 0.24]: wholly at or below 0.3
        (12, 12, 0.95, "too_easy"),  # [0.76, 1]
        (1, 12, 0.95, None),  # [0.01, 0.35] straddles 0.3
        (6, 12, 0.95, None),  # [0.25, 0.75] straddles both edges
        (6, 12, 0.5, "keep"),  # narrower at lower confidence: [0.40, 0.60]
        (4, 12, 0.5, None),  # [0.25, 0.43] straddles 0.3
        (2, 4, 0.95, None),
    ],
)
def test_interior_edges_use_the_wilson_interval(
    k: int, n: int, confidence: float, label: str | None
) -> None:
    # a large budget, so that the remaining samples could still move any of these labels
    cfg = AdaptiveConfig(max_samples=64, confidence=confidence)
    assert settled_label(k, n, BandConfig(0.3, 0.7), cfg) == label


@pytest.mark.parametrize(("k", "label"), [(0, "too_hard"), (8, "too_easy"), (1, None)])
def test_streak_settles_an_unbroken_run(k: int, label: str | None) -> None:
    cfg = AdaptiveConfig(max_samples=16, streak=8)
    band = BandConfig(0.1, 0.9)
    assert settled_label(k, 8, band, cfg) == label
    assert settled_label(0 if k == 0 else 4, 4, band, cfg) is None  # shorter than the streak


@pytest.mark.parametrize(("n", "size"), [(0, 4), (4, 4), (12, 4), (14, 2), (16, 0)])
def test_rounds_never_pass_the_maximum(n: int, size: int) -> None:
    assert next_round(n, CFG) == size


@pytest.mark.parametrize(
    ("stream", "n", "label"),
    [
        ([False, True] * 8, 4, "keep"),
        ([False] * 16, 16, "too_hard"),
        ([True] * 16, 16, "too_easy"),
        ([True] * 8 + [False] * 8, 12, "keep"),
    ],
)
def test_sample_adaptively_reads_a_prefix_and_stops(stream: list[bool], n: int, label: str) -> None:
    calls: list[tuple[int, int]] = []

    def draw(start: int, count: int) -> list[bool]:
        calls.append((start, count))
        return stream[start : start + count]

    out = sample_adaptively(draw, DEFAULT, CFG)
    assert (out.n, out.k, out.label) == (n, sum(stream[:n]), label)
    assert calls == [(i, 4) for i in range(0, n, 4)]


def test_draw_returning_the_wrong_count_is_an_error() -> None:
    with pytest.raises(ValueError, match="3 results for 4"):
        sample_adaptively(lambda s, c: [True] * 3, DEFAULT, CFG)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_samples": 0},
        {"first_round": 0},
        {"first_round": 20},
        {"round_size": 0},
        {"confidence": 1.0},
        {"confidence": 0.0},
        {"streak": 0},
    ],
)
def test_config_rejects(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        AdaptiveConfig(**bad)  # type: ignore[arg-type]


BANDS = [BandConfig(), BandConfig(0.1, 0.9), BandConfig(0.25, 0.75), BandConfig(0, 0.5)]


@pytest.mark.parametrize("band", BANDS, ids=str)
@pytest.mark.parametrize("top", [1, 2, 5, 8])
def test_budget_label_is_certain_exactly_when_every_completion_agrees(
    band: BandConfig, top: int
) -> None:
    """Brute force: every way the remaining samples can go, labelled as a fixed-K run would."""
    for n in range(top + 1):
        for k in range(n + 1):
            outcomes = {band.classify((k + j) / top) for j in range(top - n + 1)}
            want = outcomes.pop() if len(outcomes) == 1 else None
            assert budget_label(k, n, top - n, band) == want, (k, n)


@pytest.mark.parametrize("top", [1, 3, 6, 8])
@pytest.mark.parametrize("rounds", [(1, 1), (2, 3), (4, 4)])
def test_default_band_without_a_streak_labels_every_stream_like_fixed_k(
    top: int, rounds: tuple[int, int]
) -> None:
    """Brute force over all 2**top streams: early stops never change a label."""
    first, size = min(rounds[0], top), rounds[1]
    cfg = AdaptiveConfig(max_samples=top, first_round=first, round_size=size)
    for bits in itertools.product([False, True], repeat=top):
        stream = list(bits)
        out = sample_adaptively(lambda s, c, st=stream: st[s : s + c], DEFAULT, cfg)
        assert out.label == DEFAULT.classify(sum(stream) / top), stream
        assert out.n <= top


@pytest.mark.parametrize("band", BANDS, ids=str)
@pytest.mark.parametrize("cfg", [CFG, AdaptiveConfig(16, streak=4), AdaptiveConfig(16, 4, 4, 0.5)])
def test_a_settled_label_is_the_label_of_the_pass_rate(
    band: BandConfig, cfg: AdaptiveConfig
) -> None:
    """The Filter stage labels a task from k / n: every rule must agree with it."""
    for n in range(1, cfg.max_samples + 1):
        for k in range(n + 1):
            label = settled_label(k, n, band, cfg)
            assert label in (None, band.classify(k / n)), (k, n)


@pytest.mark.parametrize(
    ("k", "n", "label"),
    [(2, 4, "keep"), (1, 4, None), (2, 8, "keep"), (0, 4, None), (4, 4, None), (14, 15, None)],
)
def test_two_passes_and_two_failures_settle_keep_in_band_0_1_to_0_9(
    k: int, n: int, label: str | None
) -> None:
    """With 16 samples the band (0.1, 0.9) keeps 2..14 passes: certain once both are seen."""
    assert settled_label(k, n, BandConfig(0.1, 0.9), CFG) == label


def test_remaining_overrides_the_budget() -> None:
    """Samples lost along the way shorten what is left: 0 left labels from the rate."""
    assert settled_label(0, 8, DEFAULT, CFG, remaining=0) == "too_hard"
    assert settled_label(0, 8, DEFAULT, CFG, remaining=4) is None


@pytest.mark.parametrize(
    ("cfg", "rounds"),
    [
        (CFG, [(0, 4), (4, 4), (8, 4), (12, 4)]),
        (AdaptiveConfig(10, 2, 3), [(0, 2), (2, 3), (5, 3), (8, 2)]),
        (AdaptiveConfig(1, 1, 4), [(0, 1)]),
    ],
)
def test_schedule_covers_the_budget_once(
    cfg: AdaptiveConfig, rounds: list[tuple[int, int]]
) -> None:
    assert schedule(cfg) == rounds
