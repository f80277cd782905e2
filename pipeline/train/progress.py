"""The training progress display: GRPO steps done of total, the last reward, time left.

``StepProgress`` is a transformers ``TrainerCallback``. On a terminal it draws one rich bar
that moves with every optimizer step and shows the mean reward TRL logged for it; otherwise it
prints one line when training ends (steps, seconds per step, first and last reward) and, on a
long run, one line a minute meanwhile. ``tasksieve train`` uses it instead of transformers'
tqdm bar and per-step dictionaries, which come back with ``--verbose``.

With ``steps=True`` (``tasksieve train --log-steps``) it also prints one line per logged step
(``step_line``): the mean reward and its spread, the share of completions that passed, how many
prompt groups had rewards that differ (only those give GRPO a gradient), the share cut off by
the completion budget, the loss and the gradient norm.

It does NOT show what happens inside a step (generation, verification), nor anything of a
multi-process (distributed) run but the main process's view.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from transformers import TrainerCallback

HEARTBEAT_S = 60.0
"""How often, off a terminal, one line says how far training is."""


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _num(logs: dict[str, Any], key: str) -> float | None:
    value = logs.get(key)
    return float(value) if isinstance(value, int | float) else None


def step_line(step: int, total: int, logs: dict[str, Any], groups: int | None = None) -> str:
    """``step 2/3: reward 0.375 (std 0.479), pass 0.375, spread in 2/2 groups, ...``.

    ``groups``: prompts per step, to turn TRL's ``frac_reward_zero_std`` into a count.
    Values the row does not hold are left out.
    """
    parts = [f"step {step}/{total}:"]
    reward, std = _num(logs, "reward"), _num(logs, "reward_std")
    if reward is not None:
        parts.append(f"reward {reward:.3f}" + (f" (std {std:.3f})," if std is not None else ","))
    passed = _num(logs, "tasksieve/pass_rate")
    if passed is not None:
        parts.append(f"pass {passed:.3f},")
    zero = _num(logs, "frac_reward_zero_std")
    if zero is not None:
        if groups:
            parts.append(f"spread in {round((1 - zero) * groups)}/{groups} groups,")
        else:
            parts.append(f"groups with spread {1 - zero:.2f},")
    for key, label, fmt in (
        ("completions/clipped_ratio", "clipped", ".2f"),
        ("completions/mean_length", "tokens", ".0f"),
        ("loss", "loss", ".4f"),
        ("grad_norm", "grad norm", ".4f"),
    ):
        value = _num(logs, key)
        if value is not None:
            parts.append(f"{label} {value:{fmt}},")
    return " ".join(parts).rstrip(",")


def signal_line(rows: list[dict[str, Any]], groups: int | None) -> str:
    """Whether the run had anything to learn from, over all logged steps.

    ``learning signal: rewards differ in 5 of 6 groups, non-zero gradient in 3 of 3 steps,
    clipped 0.04``. A group (one prompt's completions) whose rewards are all equal has zero
    advantages; a step with no such group has zero loss and gradient.
    """
    spread = [1 - z for r in rows if (z := _num(r, "frac_reward_zero_std")) is not None]
    grads = [g for r in rows if (g := _num(r, "grad_norm")) is not None]
    clipped = [c for r in rows if (c := _num(r, "completions/clipped_ratio")) is not None]
    parts = []
    if spread and groups:
        parts.append(
            f"rewards differ in {round(sum(spread) * groups)} of {len(spread) * groups} groups"
        )
    elif spread:
        parts.append(f"groups with differing rewards {sum(spread) / len(spread):.2f}")
    if grads:
        parts.append(f"non-zero gradient in {sum(g > 0 for g in grads)} of {len(grads)} steps")
    if clipped:
        parts.append(f"clipped {sum(clipped) / len(clipped):.2f}")
    return "learning signal: " + (", ".join(parts) if parts else "nothing logged")


class StepProgress(TrainerCallback):
    """Show GRPO steps as they finish: a bar on a terminal, lines otherwise."""

    def __init__(
        self,
        console: Console,
        *,
        live: bool | None = None,
        out: TextIO | None = None,
        steps: bool = False,
        groups: int | None = None,
    ) -> None:
        self.console = console
        self.steps = steps
        self.groups = groups
        self.live = console.is_terminal if live is None else live
        self.out = out
        self.heartbeat_s = HEARTBEAT_S
        self.total = 0
        self.done = 0
        self.rewards: list[float] = []
        self.started = 0.0
        self._said = 0.0
        self.logged: list[dict[str, Any]] = []
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.total = int(state.max_steps or 0)
        self.started = self._said = time.monotonic()
        if self.live:
            self._bar = Progress(
                TextColumn("GRPO steps"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("reward {task.fields[reward]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._task = self._bar.add_task("train", total=self.total or None, reward="-")
            self._bar.start()

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        value = (logs or {}).get("reward")
        if isinstance(value, int | float):
            self.rewards.append(float(value))
            self._show()
            if self.steps:
                self.logged.append(dict(logs))
                self._say(step_line(int(state.global_step), self.total, logs, self.groups))

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.done = int(state.global_step)
        self._show()
        now = time.monotonic()
        if not self.live and now - self._said >= self.heartbeat_s:
            self._said = now
            print(f"train: {self.line()}", file=self.out or sys.stderr)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.done = int(state.global_step)
        if self._bar is not None:
            self._show()
            self._bar.stop()
        else:
            print(f"train: {self.line()}", file=self.out or sys.stderr)
        if self.steps:
            self._say(signal_line(self.logged, self.groups))

    def _say(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line)
        else:
            print(f"train: {line}", file=self.out or sys.stderr)

    def line(self) -> str:
        """``4 of 10 steps in 31.0 s (7.8 s/step), reward 0.250 -> 0.500``."""
        took = time.monotonic() - self.started
        text = f"{self.done} of {self.total} steps in {took:.1f} s"
        if self.done:
            text += f" ({took / self.done:.1f} s/step)"
        if self.rewards:
            text += f", reward {_reward(self.rewards[0])} -> {_reward(self.rewards[-1])}"
        return text

    def _show(self) -> None:
        if self._bar is None or self._task is None:
            return
        last = self.rewards[-1] if self.rewards else None
        self._bar.update(self._task, completed=self.done, reward=_reward(last))
