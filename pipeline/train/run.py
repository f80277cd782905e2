"""``tasksieve train``: check the inputs, build the dataset and reward, run GRPO, save.

Every input problem (flags, run directory, schema version, families, model directory,
sandbox) is found before the model loads and ends the command with one line on stderr and
exit 2. A verification infra failure during training ends it with exit 3 and no checkpoint.
The checkpoint directory gets the model and tokenizer, ``tasksieve_lineage.json`` (which
curate run, which tasks, which settings; also stored in the model's config.json as
``tasksieve_lineage``), ``metrics.jsonl`` and ``completions.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tasksieve.pipeline.flags.shared import url_list
from tasksieve.pipeline.train.curriculum import parse_family_weights, schedule
from tasksieve.pipeline.train.data import (
    TrainInputError,
    TrainTask,
    check_families,
    load_run,
    prompt_rows,
    read_tasks,
)
from tasksieve.pipeline.train.exits import EXIT_INFRA, EXIT_OK, EXIT_USAGE
from tasksieve.pipeline.train.rewards import RetryPolicy
from tasksieve.schemas import FAMILIES, Manifest
from tasksieve.verifiers import SandboxConfig

LINEAGE_FILE = "tasksieve_lineage.json"
METRICS_FILE = "metrics.jsonl"
COMPLETIONS_FILE = "completions.jsonl"


@dataclass(frozen=True)
class Plan:
    """Everything checked before the model loads."""

    run: Path
    manifest: Manifest
    tasks: list[TrainTask]
    output: Path
    model_dir: Path | None  # None: the bundled model
    sandbox: SandboxConfig
    retry: RetryPolicy
    held_out: list[TrainTask] | None = None
    family_weights: dict[str, float] | None = None


def _say(args: argparse.Namespace, msg: str) -> None:
    if not args.quiet:
        print(msg, file=sys.stderr)


def check_output(output: Path, overwrite: bool) -> None:
    """Refuse a non-empty output unless ``--overwrite`` and it is an earlier checkpoint."""
    if output.exists() and not output.is_dir():
        raise TrainInputError(f"--output {output} exists and is not a directory")
    if not output.is_dir() or not any(output.iterdir()):
        return
    if not overwrite:
        raise TrainInputError(f"--output {output} is not empty; pass --overwrite to replace it")
    if not (output / LINEAGE_FILE).is_file():
        raise TrainInputError(
            f"--output {output} is not a tasksieve checkpoint (no {LINEAGE_FILE}); "
            "refusing to delete it, choose another directory"
        )


def plan(args: argparse.Namespace) -> Plan:
    """Check every input; raises TrainInputError or ValueError with a one-line message."""
    families = check_families(args.families)
    from tasksieve.pipeline.outputs.remote import localize

    run, manifest = load_run(localize(args.tasks))  # a remote output: from a local copy
    tasks = read_tasks(run, families)
    held_out = _held_out(args, tasks)
    weights = None
    if args.family_weights:
        weights = parse_family_weights(args.family_weights, FAMILIES)
        if not any(weights.get(t.task.family, 1.0) > 0 for t in tasks):
            raise TrainInputError("--family-weights gives every training task weight 0")
    output = Path(args.output)
    check_output(output, args.overwrite)
    model_dir = Path(args.model) if args.model else None
    if model_dir is not None and not (model_dir / "config.json").is_file():
        raise TrainInputError(f"--model {model_dir}: no config.json (a transformers model dir)")
    workers = args.verify_workers or None
    sandbox = SandboxConfig(
        backend=args.sandbox,
        allow_weak_isolation=args.allow_weak_isolation,
        workers=workers or 2,
        urls=url_list(args.sandbox_url),
        priority="training",
    )
    return Plan(
        run,
        manifest,
        tasks,
        output,
        model_dir,
        sandbox,
        RetryPolicy(args.infra_retries, args.retry_backoff),
        held_out,
        weights,
    )


def _held_out(args: argparse.Namespace, tasks: list[TrainTask]) -> list[TrainTask] | None:
    """The ``--eval-tasks`` run's tasks, refused when one is also a training task."""
    if args.eval_tasks is None:
        if args.eval_every is not None:
            raise TrainInputError("--eval-every needs --eval-tasks OUT_DIR")
        return None
    from tasksieve.pipeline.outputs.remote import localize

    run, _ = load_run(localize(args.eval_tasks))
    held = read_tasks(run)
    both = sorted({t.task.id for t in held} & {t.task.id for t in tasks})
    if both:
        raise TrainInputError(
            f"--eval-tasks {args.eval_tasks}: {len(both)} task(s) are also training tasks "
            f"(e.g. {both[0]}); held-out tasks must not be trained on"
        )
    return held


def lineage(p: Plan, args: argparse.Namespace, model_id: str) -> dict[str, Any]:
    """What the checkpoint was trained on and how."""
    from importlib.metadata import version

    return {
        "tasks_run_id": p.manifest.run_id,
        "tasks_dir": str(p.run.resolve()),
        "tasks_schema_version": p.manifest.schema_version,
        "tasks_config_fingerprint": p.manifest.config_fingerprint,
        "tasks_created_at": p.manifest.created_at,
        "families": dict(sorted(Counter(t.task.family for t in p.tasks).items())),
        "task_ids": sorted(t.task.id for t in p.tasks),
        "model": model_id,
        "steps": args.steps,
        "num_generations": args.num_generations,
        "prompts_per_step": args.prompts_per_step,
        "curriculum": args.curriculum,
        "curriculum_floor": args.curriculum_floor,
        "family_weights": p.family_weights,
        "eval_tasks": sorted(t.task.id for t in p.held_out) if p.held_out else None,
        "seed": args.seed,
        "trl_version": version("trl"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def run_train(args: argparse.Namespace) -> int:
    """Run ``tasksieve train``; returns an exit status."""
    try:
        p = plan(args)
        settings = _settings(args, p.output)
        if args.end_at_fence and args.use_vllm:
            raise ValueError("--end-at-fence works with transformers generation, not --use-vllm")
    except (TrainInputError, ValueError) as e:
        print(f"tasksieve train: {e}", file=sys.stderr)
        return EXIT_USAGE
    from tasksieve.pipeline.train.rewards import BatchVerifier, VerificationFailed, VerifierReward
    from tasksieve.verifiers import SandboxUnavailable

    try:
        verifier = BatchVerifier(p.sandbox, args.verify_workers, p.retry)
    except (SandboxUnavailable, ValueError) as e:
        print(f"tasksieve train: no usable sandbox: {e}", file=sys.stderr)
        return EXIT_USAGE
    if p.output.exists() and args.overwrite:
        shutil.rmtree(p.output)
    p.output.mkdir(parents=True, exist_ok=True)
    reward_fn = VerifierReward(verifier, p.output / COMPLETIONS_FILE)
    try:
        return _train(p, args, settings, reward_fn)
    except VerificationFailed as e:
        print(f"tasksieve train: verification failed, step not scored: {e}", file=sys.stderr)
        return EXIT_INFRA
    finally:
        reward_fn.close()
        verifier.close()


def _settings(args: argparse.Namespace, output: Path) -> Any:
    from tasksieve.pipeline.train.trainer import TrainSettings

    report = tuple(r for r in args.report_to.split(",") if r and r != "none")
    return TrainSettings(
        output=output,
        steps=args.steps,
        num_generations=args.num_generations,
        prompts_per_step=args.prompts_per_step,
        max_completion_length=args.max_completion_length,
        learning_rate=args.learning_rate,
        temperature=args.temperature,
        beta=args.beta,
        seed=args.seed,
        bf16=args.bf16,
        gradient_checkpointing=args.gradient_checkpointing,
        use_vllm=args.use_vllm,
        vllm_mode=args.vllm_mode,
        vllm_server_base_url=args.vllm_server_base_url,
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        report_to=report,
        quiet=args.quiet,
        verbose=args.verbose,
    )


def task_order(p: Plan, args: argparse.Namespace, settings: Any) -> list[int]:
    """Which task each prompt of the run is (indexes into ``p.tasks``), by the curriculum."""
    return schedule(
        [t.pass_rate for t in p.tasks],
        settings.prompts_needed,
        args.curriculum,
        args.seed,
        args.curriculum_floor,
        [p.family_weights.get(t.task.family, 1.0) for t in p.tasks] if p.family_weights else None,
    )


def _train(p: Plan, args: argparse.Namespace, settings: Any, reward_fn: Any) -> int:
    import datasets
    import torch
    from rich.console import Console
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
    from transformers.utils import logging as hf_logging

    from tasksieve.pipeline.train.progress import StepProgress
    from tasksieve.pipeline.train.trainer import MetricsLog, TimedGRPOTrainer, grpo_config
    from tasksieve.transforms.samplers.model_cache import DEFAULT_MODEL_ID, ensure_default_model

    if not args.verbose:
        hf_logging.set_verbosity_error()
        # transformers' notices about renamed options TRL still passes (not ours to fix)
        warnings.filterwarnings("ignore", category=FutureWarning)
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    model_dir = p.model_dir or ensure_default_model()
    model_id = str(p.model_dir) if p.model_dir else DEFAULT_MODEL_ID
    order = task_order(p, args, settings)
    dataset = datasets.Dataset.from_list(prompt_rows(p.tasks, order))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    if args.end_at_fence:
        from tasksieve.pipeline.train.stops import end_at_fence

        end_at_fence(model, tokenizer)
    trainer = TimedGRPOTrainer(
        model=model,
        reward_funcs=[reward_fn],
        args=grpo_config(settings),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[MetricsLog(p.output / METRICS_FILE)],
    )
    if not args.verbose:  # with tqdm off, transformers prints every log row instead
        trainer.remove_callback(PrinterCallback)
    if not args.verbose and not args.quiet:
        trainer.add_callback(
            StepProgress(Console(stderr=True), steps=args.log_steps, groups=args.prompts_per_step)
        )
    if p.held_out:
        from tasksieve.pipeline.train.watch import HeldOutEval

        trainer.add_callback(
            HeldOutEval(
                p.held_out,
                reward_fn.verifier,
                tokenizer,
                args.eval_every or 0,
                args.max_completion_length,
                p.output / METRICS_FILE,
                args.quiet,
            )
        )
    _say(args, f"training on {len(p.tasks)} tasks of run {p.manifest.run_id} ({model_id})")
    start = time.perf_counter()
    trainer.train()
    took = time.perf_counter() - start
    meta = lineage(p, args, model_id)
    model.config.tasksieve_lineage = meta  # saved into the checkpoint's config.json
    trainer.save_model(str(p.output))
    tokenizer.save_pretrained(str(p.output))
    (p.output / LINEAGE_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    _say(
        args,
        f"trained {args.steps} steps in {took:.1f}s (generation {trainer.generate_seconds:.1f}s, "
        f"verification {reward_fn.verify_seconds:.1f}s); checkpoint in {p.output}",
    )
    return EXIT_OK
