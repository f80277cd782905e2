"""The adaptive stopping rule: when a task's band label is settled."""

from __future__ import annotations

import pytest

from transforms.adaptive import AdaptiveConfig, next_round, sample_adaptively, settled_label
from transforms.stats import BandConfig

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
    cfg = AdaptiveConfig(max_samples=16, confidence=confidence)
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
