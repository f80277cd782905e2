"""Flags of ``tasksieve train`` (standard library only: the CLI builds its parser from here).

The command itself is ``tasksieve.pipeline.train.run.run``, imported only when ``train`` runs.
"""

from __future__ import annotations

import argparse

from tasksieve.pipeline.flags.agent import add_agent_flags
from tasksieve.pipeline.flags.repo import add_snapshot_store_flag
from tasksieve.pipeline.flags.shared import positive_int

CURRICULA = ("none", "band")
VLLM_MODES = ("colocate", "server")

_EPILOG = """\
input:
  --tasks is a finished `tasksieve curate` output (manifest.json, tasks/**/*.parquet), or
  a publish root whose `current` link names one. Its manifest must carry this version's
  schema_version; its run id is recorded as the checkpoint's lineage.

curriculum:
  none  every kept task equally often (shuffled, then repeated)
  band  tasks drawn with weight max(floor, 4 p (1 - p)), p the task's measured pass rate:
        tasks near p = 0.5 (where a GRPO group's rewards differ most) come up most often

rewards:
  each completion is verified by its task's family verifier in the sandbox (the whole
  batch in parallel) and scored by the task's reward spec; an infra_error is retried with
  backoff and, if it persists, fails the step (exit 3) instead of scoring 0.

outputs (in --output):
  the model and tokenizer (safetensors), tasksieve_lineage.json, metrics.jsonl (one row per
  logged step; with --eval-tasks also one row per held-out evaluation: eval/pass_at_1,
  eval/FAMILY/pass_at_1, eval/FAMILY/reward_mean), completions.jsonl (every completion with
  its verdict and reward)

exit status: 0 trained, 2 usage or input error, 3 verification infra failure
"""


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0.0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``train`` sub-command."""
    p = sub.add_parser(
        "train",
        help="GRPO-train a model on curated tasks (TRL), rewarded by the verifiers",
        description="Train a causal LM with TRL's GRPOTrainer on the kept tasks of a curate "
        "run; every completion is rewarded by its task's verifier in the sandbox.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--tasks", required=True, metavar="OUT_DIR", help="a curate output")
    p.add_argument("--output", required=True, metavar="CKPT_DIR", help="checkpoint directory")
    p.add_argument(
        "--model", metavar="DIR", help="model directory (default: the bundled SmolLM2-135M)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --output")
    p.add_argument("--families", nargs="+", metavar="FAMILY", help="train on these families only")
    p.add_argument("--steps", type=positive_int, default=100, help="optimizer steps")
    p.add_argument(
        "--num-generations", type=positive_int, default=4, help="completions per prompt (G)"
    )
    p.add_argument(
        "--prompts-per-step", type=positive_int, default=2, help="prompts per step per device"
    )
    p.add_argument("--max-completion-length", type=positive_int, default=256)
    p.add_argument(
        "--end-at-fence",
        action="store_true",
        help="end each completion right after its fenced code block closes (the extractor "
        "reads nothing after it; curation's embedded sampler stops there too); not with vLLM",
    )
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--beta", type=_non_negative, default=0.0, help="KL coefficient")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--curriculum", choices=CURRICULA, default="none")
    p.add_argument(
        "--curriculum-floor",
        type=_fraction,
        default=0.05,
        help="band curriculum: least weight of any task (default 0.05)",
    )
    p.add_argument(
        "--family-weights",
        metavar="FAMILY=W[,...]",
        help="weigh families in the training mix, e.g. code=1,sql=2 (others weigh 1); "
        "tasks are then drawn with their family's weight (times the band weight)",
    )
    w = p.add_argument_group("watching training (held-out pass@1 per family)")
    w.add_argument(
        "--eval-tasks",
        metavar="OUT_DIR",
        help="a curate output of held-out tasks (no id may be a training task): each is "
        "answered greedily and verified before training, every --eval-every steps and after",
    )
    w.add_argument(
        "--eval-every",
        type=positive_int,
        default=None,
        metavar="N",
        help="steps between held-out evaluations (default: before and after training only)",
    )
    g = p.add_argument_group("verification")
    g.add_argument(
        "--sandbox", default="process", help="sandbox backend: process, docker or remote"
    )
    g.add_argument(
        "--sandbox-url",
        default="",
        metavar="URL[,URL...]",
        help="--sandbox remote: the sandbox service's URLs (token in $TASKSIEVE_SERVICE_TOKEN); "
        "requests go at the service's training priority, ahead of curation",
    )
    g.add_argument("--allow-weak-isolation", action="store_true")
    g.add_argument(
        "--verify-workers",
        type=positive_int,
        default=None,
        help="completions verified at once (default: the number of CPUs)",
    )
    g.add_argument(
        "--infra-retries", type=int, default=3, help="retries of an infra_error (default 3)"
    )
    g.add_argument(
        "--retry-backoff", type=_non_negative, default=0.5, help="first backoff, seconds"
    )
    gpu = p.add_argument_group("accelerators (passed to TRL)")
    gpu.add_argument("--use-vllm", action="store_true", help="generate with vLLM")
    gpu.add_argument("--vllm-mode", choices=VLLM_MODES, default="colocate")
    gpu.add_argument("--vllm-server-base-url", help="server mode: URL of a `trl vllm-serve` server")
    gpu.add_argument(
        "--vllm-gpu-memory-utilization", type=_fraction, default=0.3, help="colocate mode"
    )
    gpu.add_argument("--bf16", action="store_true", help="bfloat16 mixed precision")
    gpu.add_argument("--gradient-checkpointing", action="store_true")
    gpu.add_argument(
        "--report-to",
        default="none",
        help="trainer reporting: none, tensorboard, wandb, ... (comma-separated)",
    )
    p.add_argument(
        "--cpu-threads",
        type=positive_int,
        default=None,
        metavar="N",
        help="torch threads on the CPU (default: torch's choice); 1 on a shared or "
        "oversubscribed machine, where idle-spinning threads can slow steps many times over",
    )
    add_agent_flags(p)  # train --agent: pipeline.train.agent (docs/train/agent.md)
    add_snapshot_store_flag(p)
    talk = p.add_mutually_exclusive_group()
    talk.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="transformers' own progress bar and every logged step (default: one progress "
        "display with steps, reward and time left)",
    )
    talk.add_argument("--quiet", action="store_true", help="only errors on stderr")
    p.add_argument(
        "--log-steps",
        action="store_true",
        help="one line per step: reward and its spread, pass rate, prompt groups with "
        "differing rewards, clipped completions, loss, gradient norm",
    )


def run(args: argparse.Namespace) -> int:
    """Entry point of ``tasksieve train``; returns one of the EXIT_* codes
    (``tasksieve.pipeline.train.exits``)."""
    if args.agent:
        from tasksieve.pipeline.train.agent import run_agent_train

        return run_agent_train(args)
    from tasksieve.pipeline.train.run import run_train

    return run_train(args)
