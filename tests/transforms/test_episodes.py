"""Multi-turn episodes: config, requests, scoring per turn, replay of later turns, seeds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tasksieve.schemas import Verdict
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.rollouts.episode_state import (
    Episode,
    EpisodeConfig,
    EpisodeState,
    k_by_turn,
    record_attempt,
    score,
    turn_requests,
)
from tasksieve.transforms.rollouts.multi_turn import turn_sampler
from tasksieve.transforms.samplers import SamplerConfig, SampleRequest, render_messages
from tasksieve.transforms.samplers.replay import ReplayFileError, ReplayModelHandler, read_replay
from tasksieve.transforms.samplers.seeds import request_seed, sample_seed
from tests.transforms.add_task import add_task, item_of

PASS, FAIL = Verdict(status="pass"), Verdict(status="fail", tests_total=3, tests_passed=1)
INFRA = Verdict(status="infra_error", detail="sandbox gone")
GOOD = "def add(a, b):\n    return a + b\n"


def _state(k: int = 2, level: str = "summary") -> EpisodeState:
    item = item_of(add_task(GOOD))
    return EpisodeState(item, level, "m", k, [Episode(j) for j in range(k)])


# ---------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"turns": 0}, "turns must be an integer >= 1"),
        ({"turns": True}, "turns must be an integer >= 1"),
        ({"turns": 2, "band_turn": 3}, "band_turn must be in 1..turns"),
        ({"turns": 2, "band_turn": 0}, "band_turn must be in 1..turns"),
        ({"turns": 2, "feedback": "all"}, "feedback must be one of"),
    ],
)
def test_bad_episode_config_is_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        EpisodeConfig(**kwargs)


def test_band_turn_defaults_to_the_last_turn() -> None:
    assert EpisodeConfig(turns=3).scored_turn == 3
    assert EpisodeConfig(turns=3, band_turn=1).scored_turn == 1


def test_several_turns_with_adaptive_sampling_are_refused() -> None:
    with pytest.raises(ValueError, match="--turns 3 cannot be combined with --adaptive"):
        EpisodeConfig(turns=3).check_not_adaptive(True)


@pytest.mark.parametrize(("turns", "adaptive"), [(1, True), (3, False)])
def test_one_turn_or_no_adaptive_is_fine(turns: int, adaptive: bool) -> None:
    EpisodeConfig(turns=turns).check_not_adaptive(adaptive)


def test_later_turns_ask_one_completion_per_episode_in_as_many_rows_per_batch() -> None:
    cfg = turn_sampler(SamplerConfig(backend="replay", replay_path="x", samples=4, batch_size=3))
    assert (cfg.samples, cfg.batch_size) == (1, 12)


# ---------------------------------------------------------------- one turn's bookkeeping
def test_a_failed_attempt_adds_the_answer_and_the_feedback_to_the_conversation() -> None:
    state = _state()
    record_attempt(state, state.episodes[0], 1, 3, "```python\nwrong\n```", "wrong", FAIL)
    history = state.episodes[0].history
    assert [role for role, _ in history] == ["assistant", "user"]
    assert history[0][1] == "```python\nwrong\n```"
    assert "1 of 3 checks passed" in history[1][1]


def test_no_feedback_after_the_last_turn() -> None:
    state = _state()
    record_attempt(state, state.episodes[0], 3, 3, "x", "x", FAIL)
    assert state.episodes[0].history == [] and state.episodes[0].open


def test_later_turn_requests_carry_the_conversation_of_open_episodes_only() -> None:
    state = _state(3)
    record_attempt(state, state.episodes[0], 1, 2, "a0", "a0", FAIL)
    record_attempt(state, state.episodes[1], 1, 2, "a1", GOOD, PASS)
    record_attempt(state, state.episodes[2], 1, 2, "a2", "a2", INFRA)
    reqs = turn_requests(state, 2)
    assert [key for key, _ in reqs] == [("t.add", 0)]
    req = reqs[0][1]
    assert (req.turn, req.episode) == (2, 0)
    messages = render_messages(req)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == "a0" and "did not give the expected" in messages[3]["content"]


# ---------------------------------------------------------------- scoring
def _played(outcomes: list[list[Verdict]], turns: int) -> EpisodeState:
    state = _state(len(outcomes))
    for e, verdicts in zip(state.episodes, outcomes, strict=True):
        for t, v in enumerate(verdicts, start=1):
            record_attempt(state, e, t, turns, f"c{t}", f"s{t}", v)
    return state


def test_pass_rate_by_turn_is_cumulative() -> None:
    state = _played([[FAIL, PASS], [FAIL, FAIL, FAIL], [PASS], [FAIL, FAIL, PASS]], 3)
    assert k_by_turn(state, 3) == [1, 2, 3]


@pytest.mark.parametrize(("band_turn", "k"), [(1, 0), (2, 1), (None, 1)])
def test_the_band_uses_the_chosen_turn(band_turn: int | None, k: int) -> None:
    state = _played([[FAIL, PASS], [FAIL, FAIL, FAIL]], 3)
    scored, _, lost = score(state, EpisodeConfig(turns=3, band_turn=band_turn), BandConfig())
    assert scored is not None and lost == 0
    assert (scored.n, scored.k, scored.k_by_turn) == (2, k, [0, 1, 1])


def test_the_passing_solutions_are_those_passed_by_the_band_turn() -> None:
    state = _played([[FAIL, PASS], [PASS]], 2)
    scored, _, _ = score(state, EpisodeConfig(turns=2, band_turn=1), BandConfig())
    assert scored is not None and scored.passing == [(1, "s1")]


def test_an_episode_lost_to_infra_errors_leaves_n_when_the_band_is_settled() -> None:
    state = _played([[FAIL, PASS], [FAIL, FAIL], [FAIL, INFRA], [PASS]], 2)
    scored, _, lost = score(state, EpisodeConfig(turns=2), BandConfig())
    assert lost == 1 and scored is not None
    assert (scored.n, scored.k, scored.k_by_turn) == (3, 2, [1, 2])


def test_lost_episodes_that_could_change_the_band_leave_it_unsettled() -> None:
    state = _played([[FAIL, FAIL], [INFRA]], 2)
    scored, why, lost = score(state, EpisodeConfig(turns=2), BandConfig())
    assert scored is None and lost == 1 and "0/1" in why


# ---------------------------------------------------------------- replay of later turns
def _replay(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _request(turn: int, episode: int | None) -> SampleRequest:
    return SampleRequest("t", "code", "p", turn=turn, episode=episode)


def test_replay_serves_later_turns_by_episode_then_by_position(tmp_path: Path) -> None:
    path = _replay(
        tmp_path,
        [
            {"task_id": "t", "completion": "first0"},
            {"task_id": "t", "completion": "first1"},
            {"task_id": "t", "completion": "pos0", "turn": 2},
            {"task_id": "t", "completion": "pos1", "turn": 2},
            {"task_id": "t", "completion": "pinned1", "turn": 2, "episode": 1},
            {"task_id": "t", "completion": "late", "turn": 3, "episode": 4},
        ],
    )
    cfg = SamplerConfig(backend="replay", replay_path=str(path), samples=1)
    handler = ReplayModelHandler(cfg)
    model = handler.load_model()
    got = handler.run_inference(
        [_request(2, 0), _request(2, 1), _request(2, 2), _request(3, 4), _request(3, 0)], model
    )
    assert [s.completions for s in got] == [["pos0"], ["pinned1"], [], ["late"], []]
    first = ReplayModelHandler(SamplerConfig(backend="replay", replay_path=str(path), samples=4))
    (only,) = first.run_inference([_request(1, None)], model)
    assert only.completions == ["first0", "first1"]


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"turn": 0}, "'turn' must be an integer >= 1"),
        ({"turn": "2"}, "'turn' must be an integer >= 1"),
        ({"turn": True}, "'turn' must be an integer >= 1"),
        ({"turn": 2, "episode": -1}, "'episode' must be an integer >= 0"),
        ({"turn": 2, "episode": 1.5}, "'episode' must be an integer >= 0"),
        ({"episode": 0}, "'episode' is for rows of turn >= 2"),
    ],
)
def test_bad_turn_fields_in_a_replay_file_are_refused(
    tmp_path: Path, extra: dict[str, Any], match: str
) -> None:
    path = _replay(tmp_path, [{"task_id": "t", "completion": "c", **extra}])
    with pytest.raises(ReplayFileError, match=match):
        read_replay(str(path))


# ---------------------------------------------------------------- seeds
def test_first_turn_seeds_are_the_one_turn_seeds() -> None:
    req = SampleRequest("t", "code", "p")
    assert [request_seed(7, req, j) for j in range(3)] == [sample_seed(7, "t", j) for j in range(3)]


def test_every_attempt_of_a_run_has_its_own_seed() -> None:
    seeds = {request_seed(7, SampleRequest("t", "code", "p"), j) for j in range(3)}
    seeds |= {request_seed(7, _request(t, j), 0) for t in (2, 3) for j in range(3)}
    assert len(seeds) == 9


def test_the_openai_sampler_sends_the_conversation_of_a_later_turn() -> None:
    from tasksieve.transforms.samplers.openai_sampler import request_kwargs

    cfg = SamplerConfig(backend="openai", endpoint="http://localhost:1/v1", model="m", samples=1)
    history = (("assistant", "```python\nwrong\n```"), ("user", "Your answer did not run."))
    req = SampleRequest("t", "code", "p", "add", history, turn=2, episode=1)
    messages = request_kwargs(cfg, req, 1, request_seed(0, req, 0))["messages"]
    assert messages[-2:] == [
        {"role": "assistant", "content": "```python\nwrong\n```"},
        {"role": "user", "content": "Your answer did not run."},
    ]
