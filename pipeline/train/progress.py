"""The training progress display: GRPO steps done of total, the last reward, time left.

``StepProgress`` is a transformers ``TrainerCallback``. On a terminal it draws one rich bar
that moves with every optimizer step and shows the mean reward TRL logged for it; otherwise it
prints one line when training ends (steps, seconds per step, first and last reward) and, on a
long run, one line a minute meanwhile. ``tasksieve train`` uses it instead of transformers'
tqdm bar and per-step dictionaries, which come back with ``--verbose``.

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


class StepProgress(TrainerCallback):
    """Show GRPO steps as they finish: a bar on a terminal, lines otherwise."""

    def __init__(
        self, console: Console, *, live: bool | None = None, out: TextIO | None = None
    ) -> None:
        self.console = console
        self.live = console.is_terminal if live is None else live
        self.out = out
        self.heartbeat_s = HEARTBEAT_S
        self.total = 0
        self.done = 0
        self.rewards: list[float] = []
        self.started = 0.0
        self._said = 0.0
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
