"""`tasksieve train`'s progress: steps of total and reward, a bar on a terminal, lines otherwise."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main

transformers = pytest.importorskip("transformers")

from rich.console import Console  # noqa: E402

from tasksieve.pipeline.train.progress import StepProgress  # noqa: E402


def _steps(display: StepProgress, rewards: list[float], max_steps: int) -> None:
    """Drive the callback the way the Trainer does, with transformers' own state objects."""
    state = transformers.TrainerState(max_steps=max_steps)
    control = transformers.TrainerControl()
    display.on_train_begin(None, state, control)
    for reward in rewards:
        state.global_step += 1
        display.on_step_end(None, state, control)
        display.on_log(None, state, control, logs={"loss": 0.1, "reward": reward})
    display.on_train_end(None, state, control)


def test_off_a_terminal_one_line_says_steps_and_reward() -> None:
    out = io.StringIO()
    _steps(StepProgress(Console(file=io.StringIO()), live=False, out=out), [0.25, 0.5], 2)
    (line,) = out.getvalue().splitlines()
    assert line.startswith("train: 2 of 2 steps in ")
    assert line.endswith("s/step), reward 0.250 -> 0.500")


def test_off_a_terminal_a_long_run_says_how_far_it_is_meanwhile() -> None:
    out = io.StringIO()
    display = StepProgress(Console(file=io.StringIO()), live=False, out=out)
    display.heartbeat_s = 0.0  # every step is "a minute later"
    _steps(display, [0.0, 0.0, 1.0], 3)
    lines = out.getvalue().splitlines()
    assert [line.split(" steps")[0] for line in lines] == [
        "train: 1 of 3",
        "train: 2 of 3",
        "train: 3 of 3",
        "train: 3 of 3",
    ]


def test_on_a_terminal_the_bar_shows_steps_and_the_last_reward() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    _steps(StepProgress(console), [0.25, 0.75], 2)
    text = screen.getvalue()
    assert "2/2" in text
    assert "reward 0.750" in text


@pytest.mark.parametrize("logs", [None, {}, {"loss": 1.0}, {"reward": "high"}])
def test_rows_without_a_reward_leave_it_unknown(logs: dict[str, object] | None) -> None:
    out = io.StringIO()
    display = StepProgress(Console(file=io.StringIO()), live=False, out=out)
    state = transformers.TrainerState(max_steps=1)
    display.on_train_begin(None, state, transformers.TrainerControl())
    display.on_log(None, state, transformers.TrainerControl(), logs=logs)
    assert display.rewards == []
    assert "reward" not in display.line()


def test_verbose_and_quiet_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["train", "--tasks", "t", "--output", "o", "--verbose", "--quiet"])
    assert stop.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.train
def test_train_prints_its_progress_line_and_no_step_dictionaries(
    curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("trl")
    from tasksieve.transforms.samplers.model_cache import bundled_gguf

    try:
        bundled_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    argv = ["train", "--tasks", str(curated), "--output", str(tmp_path / "ckpt"), "--steps", "2"]
    argv += ["--prompts-per-step", "1", "--num-generations", "2", "--max-completion-length", "16"]
    argv += ["--cpu-threads", "1"]
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "train: 2 of 2 steps in " in err
    assert "'loss'" not in err  # transformers' per-step dictionaries are behind --verbose


def test_with_log_steps_each_step_gets_a_line_and_the_run_a_signal_summary() -> None:
    out = io.StringIO()
    display = StepProgress(Console(file=io.StringIO()), live=False, out=out, steps=True, groups=2)
    state = transformers.TrainerState(max_steps=2)
    control = transformers.TrainerControl()
    display.on_train_begin(None, state, control)
    rows = [
        {"reward": 0.25, "reward_std": 0.46, "tasksieve/pass_rate": 0.25,
         "frac_reward_zero_std": 0.5, "completions/clipped_ratio": 0.0, "grad_norm": 0.8},
        {"reward": 0.5, "reward_std": 0.53, "tasksieve/pass_rate": 0.5,
         "frac_reward_zero_std": 0.0, "completions/clipped_ratio": 0.25, "grad_norm": 1.1},
    ]  # fmt: skip
    for row in rows:
        state.global_step += 1
        display.on_step_end(None, state, control)
        display.on_log(None, state, control, logs=row)
    display.on_train_end(None, state, control)
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "train: step 1/2: reward 0.250 (std 0.460), pass 0.250, spread in 1/2 groups, "
        "clipped 0.00, grad norm 0.8000"
    )
    assert lines[1].startswith(
        "train: step 2/2: reward 0.500 (std 0.530), pass 0.500, spread in 2/2"
    )
    assert lines[-1] == (
        "train: learning signal: rewards differ in 3 of 4 groups, "
        "non-zero gradient in 2 of 2 steps, clipped 0.12"
    )
