"""Watching training: pass@1 per family on held-out curated tasks, every N steps.

``HeldOutEval`` is a trainer callback. Before the first step, every ``every`` steps and after
the last, it answers each held-out task once, greedily, with the model being trained (the
chat messages the curation samplers send, ``--max-completion-length`` tokens), verifies the
answers with the training run's own ``BatchVerifier`` and scores them with the task's reward
spec. Each evaluation appends one row to ``metrics.jsonl`` beside the trainer's rows of the same
step (``eval/pass_at_1``, ``eval/<family>/pass_at_1``, ``eval/<family>/reward_mean``) and
prints one line, so a family falling while another rises (forgetting) is seen as it happens.

Greedy answers make pass@1 a plain share of tasks solved; it is an estimate from one sample
per task, so on a few tasks it moves in large steps. What this does NOT do: sample several
answers per task (use ``tasksieve eval`` on a saved checkpoint for pass@k with intervals), or
hold the held-out tasks out of anything but this run's training set (``plan`` refuses an
overlap of ids, not near-duplicates).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tasksieve.pipeline.train.data import TrainTask, messages
from tasksieve.pipeline.train.rewards import BatchVerifier


def family_pass(
    families: Sequence[str], passed: Sequence[bool], rewards: Sequence[float]
) -> dict[str, float]:
    """The logged row's values: overall and per-family pass@1 and mean reward."""
    by: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    for fam, ok, value in zip(families, passed, rewards, strict=True):
        by[fam].append((ok, value))
    row = {"eval/pass_at_1": sum(passed) / len(passed)}
    for fam, items in sorted(by.items()):
        row[f"eval/{fam}/pass_at_1"] = sum(ok for ok, _ in items) / len(items)
        row[f"eval/{fam}/reward_mean"] = sum(v for _, v in items) / len(items)
    return row


class HeldOutEval(TrainerCallback):
    """Evaluate the policy on held-out tasks at the start, every ``every`` steps, at the end."""

    def __init__(
        self,
        tasks: list[TrainTask],
        verifier: BatchVerifier,
        tokenizer: Any,
        every: int,
        max_new_tokens: int,
        log_path: Path,
        quiet: bool = False,
    ) -> None:
        self.tasks, self.verifier, self.tokenizer = tasks, verifier, tokenizer
        self.every, self.max_new_tokens = every, max_new_tokens
        self.log_path, self.quiet = log_path, quiet
        self.done: set[int] = set()
        self.rows: list[dict[str, Any]] = []

    def answers(self, model: Any) -> list[str]:
        """One greedy answer per held-out task from ``model``."""
        import torch

        out = []
        was_training = model.training
        model.eval()
        try:
            for t in self.tasks:
                enc = self.tokenizer.apply_chat_template(
                    messages(t.task),
                    add_generation_prompt=True,
                    return_tensors="pt",
                    return_dict=True,
                )
                ids = enc["input_ids"].to(model.device)
                with torch.no_grad():
                    gen = model.generate(
                        ids,
                        attention_mask=enc["attention_mask"].to(model.device),
                        max_new_tokens=self.max_new_tokens,
                        do_sample=False,
                        pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                    )
                out.append(self.tokenizer.decode(gen[0, ids.shape[1] :], skip_special_tokens=True))
        finally:
            if was_training:
                model.train()
        return out

    def evaluate(self, model: Any, step: int) -> dict[str, Any]:
        """Answer, verify and score every held-out task; log and return the row."""
        if step in self.done:
            return {}
        self.done.add(step)
        texts = self.answers(model)
        scored = self.verifier.score(
            [t.task for t in self.tasks], texts, [t.reference_s for t in self.tasks]
        )
        row: dict[str, Any] = {"step": step, "eval/tasks": len(self.tasks)}
        row |= family_pass(
            [s.family for s in scored], [s.verdict.passed for s in scored],
            [s.reward.value for s in scored],
        )  # fmt: skip
        with self.log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        self.rows.append(row)
        if not self.quiet:
            fams = ", ".join(
                f"{k.split('/')[1]} {v:.2f}" for k, v in row.items() if k.endswith("/pass_at_1")
                and k.count("/") == 2
            )  # fmt: skip
            print(
                f"held-out eval at step {step}: pass@1 {row['eval/pass_at_1']:.2f} ({fams})",
                file=sys.stderr,
            )
        return row

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.evaluate(kw["model"], state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.every and state.global_step % self.every == 0:
            self.evaluate(kw["model"], state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.evaluate(kw["model"], state.global_step)
