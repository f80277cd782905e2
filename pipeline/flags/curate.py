"""The ``tasksieve curate`` flags (standard library only, so building the parser stays cheap).

The command itself lives in ``tasksieve.pipeline.commands.curate``, imported only when curate runs.
"""

from __future__ import annotations

import argparse

from tasksieve.pipeline.commands.decontaminate import add_decontam_flags
from tasksieve.pipeline.flags.adaptive import add_adaptive_flags
from tasksieve.pipeline.flags.agent import add_agent_flags
from tasksieve.pipeline.flags.reliability import add_reliability_flags
from tasksieve.pipeline.flags.repo import add_snapshot_store_flag
from tasksieve.pipeline.flags.runner import runner_name
from tasksieve.pipeline.flags.sampler import add_dtype_flag, add_server_flags
from tasksieve.pipeline.flags.shared import add_dedup_flags, add_format_flag, positive_int
from tasksieve.pipeline.flags.turns import add_episode_flags
from tasksieve.pipeline.flags.vllm import add_vllm_flags

EPILOG = """\
Arguments curate does not know are passed to Beam as pipeline options.

output (--format json): one JSON object on stdout with keys output, manifest, run_id,
config_fingerprint, counts, rejected_by_reason, pass_rate_histogram.
exit status: 0 run published, 2 usage or input error, 3 internal error (records lost),
4 data-quality expectations failed (--expectations): the run is not published and is kept
in OUTPUT.failed-RUNID beside the output
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``curate`` and its flags."""
    p = sub.add_parser(
        "curate",
        help="run the whole curation pipeline on Beam",
        description="Validate, dedup, decontaminate, gate, sample, verify, score and write.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--input",
        "-i",
        nargs="+",
        action="extend",
        required=True,
        help="files, dirs or globs (repeatable: every --input adds to the list)",
    )
    p.add_argument("--output", "-o", required=True, help="output directory")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier run's output")
    p.add_argument("--benchmark", action="append", default=[], help="extra benchmark set")
    p.add_argument("--no-humaneval", action="store_true", help="skip the bundled HumanEval")
    add_decontam_flags(p)
    p.add_argument("--samples", "-k", type=int, default=4, help="samples per task (default 4)")
    p.add_argument(
        "--sampler", default="transformers", choices=["transformers", "replay", "openai", "vllm"]
    )
    p.add_argument("--replay", help="recorded completions for --sampler replay")
    p.add_argument(
        "--model",
        help="local model directory (default: bundled SmolLM2-135M); with --sampler openai, "
        "the model name the server serves; with --sampler vllm, what vLLM loads",
    )
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
    p.add_argument(
        "--rollout-cache",
        metavar="DIR",
        help="where completions and verdicts are cached by content, so a re-run reuses them "
        "(default: OUTPUT.rollout-cache beside the output; any Beam filesystem path)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="sample and verify everything afresh; read and write no rollout cache",
    )
    add_server_flags(p)
    add_vllm_flags(p)
    add_adaptive_flags(p)
    add_episode_flags(p)
    add_agent_flags(p)
    p.add_argument("--too-hard", type=float, default=0.0, help="reject pass rate <= this")
    p.add_argument("--too-easy", type=float, default=1.0, help="reject pass rate >= this")
    add_dedup_flags(p)
    p.add_argument(
        "--reference-runs",
        type=int,
        default=3,
        help="runs of the reference; runs that disagree reject as gate.reference_flaky",
    )
    p.add_argument("--min-tests", type=int, default=3, help="minimum tests for code tasks")
    add_reliability_flags(p)
    p.add_argument(
        "--sandbox", default="process", help="sandbox backend: process, docker or remote"
    )
    p.add_argument(
        "--sandbox-url",
        default="",
        metavar="URL[,URL...]",
        help="--sandbox remote: the sandbox service's URLs (token in $TASKSIEVE_SERVICE_TOKEN)",
    )
    p.add_argument("--sandbox-workers", type=int, default=2)
    p.add_argument("--allow-weak-isolation", action="store_true")
    add_snapshot_store_flag(p)
    p.add_argument(
        "--runner",
        default="DirectRunner",
        type=runner_name,
        help="Beam runner (default DirectRunner; DaskRunner with --dask_client_address=ADDRESS: "
        "see docs/runners.md)",
    )
    p.add_argument(
        "--expectations",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="run the data-quality checks (tasksieve check) before publishing; "
        "a failure keeps the run aside unpublished and exits 4 (default off)",
    )
    talk = p.add_mutually_exclusive_group()
    talk.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also log a line per task and per check as the stages go (default: the progress "
        "display and the summary)",
    )
    talk.add_argument(
        "--quiet", "-q", action="store_true", help="no progress display: the summary and errors"
    )
    add_format_flag(p, "summary on stdout: a table (text) or one JSON object (json)")
