"""``tasksieve eval``: measure a model on verifiable tasks; ``tasksieve eval compare A B``.

The top level imports the standard library and the flag modules only (the CLI builds its
parser from here); Beam, the samplers and the verifiers come in when the command runs
(``pipeline.eval.run``).
"""

from __future__ import annotations

import argparse
import json
import sys

from tasksieve.pipeline.flags.agent import add_agent_flags
from tasksieve.pipeline.flags.repo import add_snapshot_store_flag
from tasksieve.pipeline.flags.sampler import add_dtype_flag, add_server_flags
from tasksieve.pipeline.flags.shared import add_format_flag, positive_int
from tasksieve.pipeline.flags.turns import add_episode_flags
from tasksieve.pipeline.flags.vllm import add_vllm_flags

EXIT_OK, EXIT_USAGE, EXIT_INTERNAL = 0, 2, 3
EPILOG = """\
INPUT is one curated output (its kept tasks, with their curated pass rates for the
difficulty buckets) or task files (validated first, as curate does). The output holds
scores/ (one row per task: n, c, pass@k, failures, cost, rewards), rollouts/, rejected/,
meta/, summary.json, manifest.json, catalog.duckdb and report.html.

--agent (repo tasks): each of a task's n samples is an episode in its own workspace, with
the same budgets as curate --agent; success is reported by step, episode endings counted,
and trajectories/ holds one row per step.

output (--format json): summary.json's object plus keys output and run_id.
exit status: 0 published, 2 usage or input error, 3 internal error (a task lost)
"""


def ks(text: str) -> tuple[int, ...]:
    """argparse type of ``--k 1,5,10``: distinct whole numbers >= 1, in order."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,5,10, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"every k must be at least 1, got {text!r}")
    return tuple(sorted(set(values)))


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``eval`` and its ``compare`` subcommand."""
    p = sub.add_parser(
        "eval",
        help="measure a model on verifiable tasks: pass@k per family, cost, failures",
        description="Sample n completions per task, verify each in the sandbox, and report "
        "unbiased pass@k with bootstrap intervals, per family, difficulty bucket and source.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--input", "-i", nargs="+", action="extend", help="curated output or task files")
    p.add_argument("--output", "-o", help="output directory of the eval")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier eval's output")
    p.add_argument("--k", type=ks, default=(1,), help="the k of pass@k, e.g. 1,5,10 (default 1)")
    p.add_argument(
        "--samples", "-n", type=positive_int, default=1, help="samples per task (default 1)"
    )
    p.add_argument(
        "--sampler", default="transformers", choices=["transformers", "replay", "openai", "vllm"]
    )
    p.add_argument("--replay", help="recorded completions for --sampler replay")
    p.add_argument("--model", help="as for curate: model directory, served name or vLLM model")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument(
        "--batch-size",
        type=positive_int,
        default=8,
        help="tasks per model call of the transformers sampler (default 8; each holds K rows)",
    )
    add_dtype_flag(p)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    add_server_flags(p)
    add_vllm_flags(p)
    add_episode_flags(p)
    add_agent_flags(p)
    p.add_argument("--sandbox", default="process", help="process, docker or remote")
    add_snapshot_store_flag(p)
    p.add_argument("--sandbox-url", default="", metavar="URL[,URL...]")
    p.add_argument("--sandbox-workers", type=int, default=2)
    p.add_argument("--allow-weak-isolation", action="store_true")
    p.add_argument("--runner", default="DirectRunner", help="Beam runner (default DirectRunner)")
    p.add_argument(
        "--resamples", type=int, default=2000, help="bootstrap resamples of the intervals"
    )
    p.add_argument("--quiet", "-q", action="store_true", help="warnings and errors only")
    add_format_flag(p, "summary on stdout: a table (text) or one JSON object (json)")
    sub_eval = p.add_subparsers(dest="eval_command", metavar="SUBCOMMAND")
    c = sub_eval.add_parser(
        "compare",
        help="compare two evals task by task: paired bootstrap, flipped tasks, a verdict",
        description="Pair the tasks both evals scored; report B - A per task (pass@1 and every "
        "reward component) with a paired bootstrap interval, the tasks that flipped, and a "
        "verdict: better, worse or not distinguishable.",
        epilog="exit status: 0 compared, 2 A or B is not an eval output or they share no task",
    )
    c.add_argument("a", metavar="A", help="eval output of the baseline")
    c.add_argument("b", metavar="B", help="eval output of the candidate")
    c.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    add_format_flag(c, "a table (text) or one JSON object (json)")


def run(args: argparse.Namespace) -> int:
    """Entry point of ``tasksieve eval`` (and of ``eval compare``)."""
    if args.eval_command == "compare":
        from tasksieve.pipeline.commands.eval_compare import run_compare

        return run_compare(args)
    if not args.input or not args.output:
        print("tasksieve eval: error: --input and --output are required", file=sys.stderr)
        return EXIT_USAGE
    return _run_eval(args)


def _snapshot_store(args: argparse.Namespace) -> str | None:
    """Where repo tasks' snapshots are: the flag, the variable, a ``snapshots/`` folder found
    from the inputs, else the store the curated input was made with (its manifest's config)."""
    from pathlib import Path

    from tasksieve.pipeline.flags.repo import snapshot_store

    found = snapshot_store(args, args.input)
    if found:
        return found
    for raw in args.input:
        for manifest in (Path(raw) / "manifest.json", Path(raw) / "current" / "manifest.json"):
            try:
                store = json.loads(manifest.read_text("utf-8"))["config"]["sandbox"][
                    "snapshot_store"
                ]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if isinstance(store, str) and Path(store).is_dir():
                return store
    return None


def _run_eval(args: argparse.Namespace) -> int:
    import logging

    from tasksieve.pipeline.commands.curate import check_sampler_args
    from tasksieve.pipeline.curate.counters import ConservationError
    from tasksieve.pipeline.eval.config import EvalConfig
    from tasksieve.pipeline.eval.inputs import EvalInputError
    from tasksieve.pipeline.eval.report import render_text
    from tasksieve.pipeline.eval.run import evaluate
    from tasksieve.pipeline.flags.agent import agent_config
    from tasksieve.pipeline.flags.sampler import server_fields
    from tasksieve.pipeline.flags.shared import url_list
    from tasksieve.pipeline.flags.turns import episode_config
    from tasksieve.pipeline.flags.vllm import vllm_fields
    from tasksieve.pipeline.outputs.staging import OutputExists
    from tasksieve.transforms.ingest.files import InputError
    from tasksieve.transforms.samplers import SamplerConfig, SamplerUnavailable
    from tasksieve.verifiers import SandboxConfig, SandboxUnavailable

    logging.basicConfig(level=logging.ERROR if args.quiet else logging.WARNING, force=True)
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    try:
        check_sampler_args(args)
        cfg = EvalConfig(
            inputs=tuple(args.input),
            output=args.output,
            overwrite=args.overwrite,
            ks=args.k,
            sampler=SamplerConfig(
                backend=args.sampler,
                model=args.model,
                samples=args.samples,
                max_new_tokens=args.max_new_tokens,
                batch_size=args.batch_size,
                dtype=args.dtype,
                temperature=args.temperature,
                seed=args.seed,
                replay_path=args.replay,
                **server_fields(args),
                **vllm_fields(args),
            ),
            sandbox=SandboxConfig(
                backend=args.sandbox,
                allow_weak_isolation=args.allow_weak_isolation,
                workers=args.sandbox_workers,
                urls=url_list(args.sandbox_url),
                snapshot_store=_snapshot_store(args),
            ),
            episodes=episode_config(args),
            agent=agent_config(args),
            runner=args.runner,
            resamples=args.resamples,
        )
        result = evaluate(cfg)
    except (
        EvalInputError,
        InputError,
        OutputExists,
        ValueError,
        ImportError,
        OSError,
        SandboxUnavailable,
        SamplerUnavailable,
    ) as exc:
        print(f"tasksieve eval: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConservationError as exc:
        print(f"tasksieve eval: internal error: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    if args.format == "json":
        out = {"output": str(result.output), "run_id": result.manifest["run_id"], **result.summary}
        print(json.dumps(out))
    else:
        print(render_text(result.summary, str(result.output)))
    return EXIT_OK
