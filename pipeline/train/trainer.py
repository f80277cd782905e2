"""TRL glue: the GRPO config from our flags, generation timing, and a per-step metrics log.

``TimedGRPOTrainer`` is TRL's GRPOTrainer with one addition: the seconds spent generating
each batch are logged as ``tasksieve/generate_seconds`` beside the reward function's
``tasksieve/verify_seconds``, so every logged step shows generation against verification
(TRL's own profiling timers only reach wandb, mlflow and trackio). ``MetricsLog`` appends
every ``on_log`` row to ``metrics.jsonl`` whatever ``--report-to`` says.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer


@dataclass(frozen=True)
class TrainSettings:
    """What ``tasksieve train`` asks of TRL (validated by the flags and here)."""

    output: Path
    steps: int
    num_generations: int
    prompts_per_step: int
    max_completion_length: int
    learning_rate: float
    temperature: float
    beta: float
    seed: int
    bf16: bool = False
    gradient_checkpointing: bool = False
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_server_base_url: str | None = None
    vllm_gpu_memory_utilization: float = 0.3
    report_to: tuple[str, ...] = ()
    quiet: bool = False
    verbose: bool = False
    """transformers' own tqdm bar and per-step lines (else ``tasksieve train`` shows its own)."""

    def __post_init__(self) -> None:
        if self.num_generations < 2:
            raise ValueError(
                "--num-generations must be at least 2 (GRPO compares completions of one prompt)"
            )
        if self.vllm_server_base_url and not (self.use_vllm and self.vllm_mode == "server"):
            raise ValueError("--vllm-server-base-url needs --use-vllm --vllm-mode server")
        if not self.learning_rate > 0:
            raise ValueError(f"--learning-rate must be > 0, got {self.learning_rate}")
        if not self.temperature > 0:
            raise ValueError(f"--temperature must be > 0, got {self.temperature}")

    @property
    def prompts_needed(self) -> int:
        """Dataset rows one run consumes (one batch of prompts per step)."""
        return self.steps * self.prompts_per_step


def grpo_config(s: TrainSettings) -> GRPOConfig:
    """The GRPOConfig for ``s``: one generation batch per optimizer step, logged every step."""
    extra: dict[str, Any] = {}
    if s.use_vllm:
        extra.update(use_vllm=True, vllm_mode=s.vllm_mode)
        if s.vllm_mode == "server" and s.vllm_server_base_url:
            extra["vllm_server_base_url"] = s.vllm_server_base_url
        if s.vllm_mode == "colocate":
            extra["vllm_gpu_memory_utilization"] = s.vllm_gpu_memory_utilization
    return GRPOConfig(
        output_dir=str(s.output),
        max_steps=s.steps,
        per_device_train_batch_size=s.prompts_per_step * s.num_generations,
        num_generations=s.num_generations,
        max_completion_length=s.max_completion_length,
        learning_rate=s.learning_rate,
        temperature=s.temperature,
        beta=s.beta,
        seed=s.seed,
        data_seed=s.seed,
        shuffle_dataset=False,  # the curriculum's schedule is the order
        logging_steps=1,
        save_strategy="no",  # the final model is saved by the command
        report_to=list(s.report_to) or "none",
        bf16=s.bf16,
        gradient_checkpointing=s.gradient_checkpointing,
        disable_tqdm=not s.verbose,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
        **extra,
    )


class TimedGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that logs the seconds each generation batch took."""

    generate_seconds: float = 0.0

    def _generate(self, prompts: list[Any]) -> Any:
        start = time.perf_counter()
        try:
            return super()._generate(prompts)
        finally:
            seconds = time.perf_counter() - start
            self.generate_seconds += seconds
            mode = "train" if self.model is None or self.model.training else "eval"
            self._metrics[mode]["tasksieve/generate_seconds"].append(seconds)


class MetricsLog(TrainerCallback):
    """Append each logged row (step, loss, rewards, timings) to a JSON Lines file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if not logs:
            return
        row = {"step": state.global_step, **logs}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, default=str) + "\n")
