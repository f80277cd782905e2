"""The GRPO reward function: every completion verified by its task's family verifier.

``VerifierReward`` is a TRL reward function (``prompts``, ``completions`` and the dataset's
columns as keyword arguments, one float per completion). For a batch it extracts each
solution the way the curation samplers do (``extract_solution``), verifies the whole batch
in parallel on a thread pool through one ``VerifierCache`` over a sandbox made by
``SandboxConfig`` (so any backend works unchanged), and scores each verdict with the task's
reward spec through ``tasksieve.verifiers.rewards.reward``, the function curation uses.

An ``infra_error`` verdict is retried with exponential backoff; one that persists raises
``VerificationFailed``, which fails the training step loudly: it is never scored 0. What this
does NOT guard against: a sandbox that returns wrong verdicts without flagging an infra
error, or a verifier that hangs past its own time limits (the sandbox enforces those).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.transforms.samplers.extract import extract_solution
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.registry import VerifierCache
from tasksieve.verifiers.rewards import Reward, reward


class VerificationFailed(RuntimeError):
    """Verification kept hitting infra errors after every retry: the step cannot be scored."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently an ``infra_error`` verdict is retried."""

    retries: int = 3
    backoff_s: float = 0.5

    def __post_init__(self) -> None:
        if not 0 <= self.retries <= 20:
            raise ValueError(f"infra retries must be in 0..20, got {self.retries}")
        if not (self.backoff_s >= 0 and math.isfinite(self.backoff_s)):
            raise ValueError(f"retry backoff must be a finite number >= 0, got {self.backoff_s}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (1-based): backoff doubling each time."""
        return float(self.backoff_s * 2 ** (attempt - 1))


@dataclass(frozen=True)
class Scored:
    """One completion's solution, verdict and reward."""

    task_id: str
    family: str
    completion: str
    solution: str
    verdict: Verdict
    reward: Reward
    attempts: int


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or the content of conversational messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    raise TypeError(f"cannot read a completion of type {type(completion).__name__}")


def solution_of(task: TaskRecord, text: str) -> str:
    """The solution in ``text``, extracted as the curation samplers extract it."""
    spec = task.verifier
    entry = getattr(spec, "entry_point", None) if task.family == "code" else None
    return extract_solution(text, task.family, entry)


class BatchVerifier:
    """Verify batches of (task, completion) in parallel and score them; close when done."""

    def __init__(
        self, sandbox: SandboxConfig, workers: int | None = None, retry: RetryPolicy | None = None
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.sandbox = sandbox.make()
        self.verifiers = VerifierCache(self.sandbox)
        self.pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2)
        self._calibrated: set[str] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.verifiers.close()
        self.sandbox.close()

    def _calibrate(self, task: TaskRecord, reference_s: float | None) -> None:
        with self._lock:
            if reference_s is None or task.id in self._calibrated:
                return
            self._calibrated.add(task.id)
        self.verifiers.get(task.family).calibrate(task, reference_s)

    def _verify(self, task: TaskRecord, solution: str) -> tuple[Verdict, int]:
        verifier = self.verifiers.get(task.family)
        attempt = 0
        while True:
            verdict = verifier.verify(task, solution)
            if verdict.status != "infra_error" or attempt >= self.retry.retries:
                return verdict, attempt + 1
            attempt += 1
            time.sleep(self.retry.delay(attempt))

    def score(
        self,
        tasks: Sequence[TaskRecord],
        completions: Sequence[str],
        reference_s: Sequence[float | None] | None = None,
    ) -> list[Scored]:
        """Verify and score ``completions[i]`` against ``tasks[i]``, all in parallel.

        Raises VerificationFailed when some verdict is still an infra_error after retries.
        """
        refs = list(reference_s) if reference_s is not None else [None] * len(tasks)
        for task, ref in zip(tasks, refs, strict=True):
            self._calibrate(task, ref)
        solutions = [solution_of(t, c) for t, c in zip(tasks, completions, strict=True)]
        results = list(self.pool.map(self._verify, tasks, solutions))
        out = []
        for task, text, sol, ref, (verdict, attempts) in zip(
            tasks, completions, solutions, refs, results, strict=True
        ):
            scored = reward(verdict, task.reward, ref)
            if not isinstance(scored, Reward):
                raise VerificationFailed(
                    f"task {task.id}: infra_error after {attempts} attempts: {scored.detail}"
                )
            out.append(Scored(task.id, task.family, text, sol, verdict, scored, attempts))
        return out


def batch_metrics(scored: Sequence[Scored]) -> dict[str, float]:
    """Per-family reward mean and std and pass rate, plus the batch's pass rate and retries."""
    by_family: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        by_family[s.family].append(s)
    out: dict[str, float] = {}
    for family, items in sorted(by_family.items()):
        values = [s.reward.value for s in items]
        mean = sum(values) / len(values)
        out[f"tasksieve/{family}/reward_mean"] = mean
        out[f"tasksieve/{family}/reward_std"] = math.sqrt(
            sum((v - mean) ** 2 for v in values) / len(values)
        )
        out[f"tasksieve/{family}/pass_rate"] = sum(s.verdict.passed for s in items) / len(items)
    if scored:
        out["tasksieve/pass_rate"] = sum(s.verdict.passed for s in scored) / len(scored)
        out["tasksieve/infra_retries"] = float(sum(s.attempts - 1 for s in scored))
        out["tasksieve/completion_chars"] = sum(len(s.completion) for s in scored) / len(scored)
    return out


class VerifierReward:
    """TRL reward function over a ``BatchVerifier``; also writes every completion to a log."""

    __name__ = "verifier_reward"  # TRL names reward functions by ``__name__``

    def __init__(self, verifier: BatchVerifier, log_path: Path | None = None) -> None:
        self.verifier = verifier
        self._log: TextIO | None = log_path.open("a", encoding="utf-8") if log_path else None
        self._tasks: dict[str, TaskRecord] = {}
        self.verify_seconds = 0.0  # total over the run
        self.last: list[Scored] = []  # the latest batch, scored

    def _task(self, text: str) -> TaskRecord:
        if text not in self._tasks:
            self._tasks[text] = TaskRecord.model_validate_json(text)
        return self._tasks[text]

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        task: Sequence[str],
        reference_s: Sequence[float | None] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        trainer_state: Any = None,
        **_columns: Any,
    ) -> list[float]:
        start = time.perf_counter()
        tasks = [self._task(t) for t in task]
        texts = [completion_text(c) for c in completions]
        scored = self.verifier.score(tasks, texts, reference_s)
        seconds = time.perf_counter() - start
        self.verify_seconds += seconds
        self.last = scored
        if log_metric is not None:
            log_metric("tasksieve/verify_seconds", seconds)
            for name, value in batch_metrics(scored).items():
                log_metric(name, value)
        step = int(getattr(trainer_state, "global_step", 0) or 0)
        self._write(step, scored)
        return [s.reward.value for s in scored]

    def _write(self, step: int, scored: Sequence[Scored]) -> None:
        if self._log is None:
            return
        for s in scored:
            row = {
                "step": step,
                "task_id": s.task_id,
                "family": s.family,
                "completion": s.completion,
                "solution": s.solution,
                "status": s.verdict.status,
                "tests_passed": s.verdict.tests_passed,
                "tests_total": s.verdict.tests_total,
                "reward": s.reward.value,
                "reward_components": s.reward.components.model_dump(),
                "attempts": s.attempts,
            }
            self._log.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._log.flush()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
