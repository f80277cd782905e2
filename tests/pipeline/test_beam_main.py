"""``python -m pipeline.curate.beam_main``: the curate flags as Beam launchers spell them."""

from __future__ import annotations

from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tasksieve.pipeline.cli import build_parser
from tasksieve.pipeline.commands.curate import check_beam_args
from tasksieve.pipeline.curate import beam_main

REPLAY = "examples/replay/completions.jsonl"
BASE = ["--input=examples/tasks/sql.jsonl", "--output=out"]

# Curate flags with a dash in their name, and a value each (None: a switch).
DASHED: list[tuple[str, str | None]] = [
    ("--max-new-tokens", "7"),
    ("--batch-size", "3"),
    ("--no-humaneval", None),
    ("--sandbox-workers", "3"),
    ("--allow-weak-isolation", None),
    ("--too-hard", "0.1"),
    ("--too-easy", "0.9"),
    ("--reference-runs", "1"),
    ("--min-tests", "2"),
    ("--decontam-threshold", "0.5"),
    ("--near-threshold", "0.7"),
    ("--shingle-size", "4"),
    ("--num-perm", "64"),
    ("--benchmark-field", "text"),
    ("--min-mutation-score", "0.5"),
    ("--max-mutants", "4"),
    ("--ambiguity-threshold", "0.2"),
    ("--no-weak-tests", None),
    ("--no-ambiguity", None),
    ("--sandbox-url", "http://127.0.0.1:8000"),
    ("--api-key-env", "TOKEN_VAR"),
    ("--max-concurrency", "3"),
    ("--request-timeout", "5"),
    ("--max-attempts", "2"),
    ("--extra-body", '{"a": 1}'),
    ("--top-p", "0.5"),
    ("--vllm-arg", "--max-model-len=4096"),
    ("--vllm-api", "completions"),
    ("--gpu-accelerator", "type:nvidia-l4;count:1;install-nvidia-driver"),
    ("--adaptive-round", "2"),
    ("--adaptive-first-round", "2"),
    ("--adaptive-confidence", "0.9"),
    ("--adaptive-streak", "8"),
    ("--band-turn", "2"),
    ("--rollout-cache", "cache-dir"),
    ("--no-cache", None),
    ("--dedup-index-lookup", "shuffle"),
    ("--snapshot-store", "snapshots"),
    ("--agent-max-steps", "5"),
    ("--agent-max-tokens", "2000"),
    ("--agent-wall", "60"),
    ("--agent-command-timeout", "10"),
    ("--agent-protocol-errors", "2"),
    ("--agent-observation-bytes", "4000"),
    ("--agent-concurrency", "2"),
    ("--agent-hidden", "none"),
    ("--agent-tools", None),
]


@pytest.mark.parametrize(("flag", "value"), DASHED)
def test_snake_case_spelling_parses_like_the_dashed_flag(flag: str, value: str | None) -> None:
    snake = "--" + flag[2:].replace("-", "_")
    tail_dashed = [flag if value is None else f"{flag}={value}"]
    tail_snake = [snake if value is None else f"{snake}={value}"]
    dashed, beam_dashed = beam_main.parse([*BASE, *tail_dashed])
    snaked, beam_snaked = beam_main.parse([*BASE, *tail_snake])
    assert vars(snaked) == vars(dashed)
    assert beam_snaked == beam_dashed == []


def test_every_dashed_curate_flag_is_covered_by_the_cases() -> None:
    flags = beam_main.curate_flags(beam_main.curate_parser())
    dashed = {f for f in flags if "-" in f[2:]}
    covered = {f for f, _ in DASHED}
    # Flags whose snake spelling is tested elsewhere or that take no part in a launch.
    rest = dashed - covered
    assert rest <= {
        "--benchmark-id-field",
        "--no-canonical-ids",
        "--dedup-index",
        "--canonical-ids",
        "--strip-comments",
        "--strip-docstrings",
        "--no-near-dedup",
        "--no-expectations",
    }, sorted(rest)


def test_no_curate_flag_renames_a_beam_option() -> None:
    beam_options = set(PipelineOptions([]).get_all_options())
    flags = beam_main.curate_flags(beam_main.curate_parser())
    clashing = {f for f in flags if f[2:].replace("-", "_") in beam_options}
    assert clashing == {"--runner"}  # the same meaning for both: the Beam runner


def test_repeated_input_options_are_all_kept() -> None:
    args, _ = beam_main.parse(["--input=a.jsonl", "--input=b.jsonl", "--input", "c", "d", "-o=x"])
    assert args.input == ["a.jsonl", "b.jsonl", "c", "d"]


def test_tasksieve_curate_keeps_every_repeated_input() -> None:
    args, _ = build_parser().parse_known_args(["curate", "-i", "a", "--input", "b", "-o", "x"])
    assert args.input == ["a", "b"]


def test_flags_the_beam_provider_appends_are_accepted() -> None:
    appended = ["--runner=DirectRunner", "--labels=airflow-version=v3-3-2", "--job_name=ts-x"]
    args, beam_args = beam_main.parse([*BASE, *appended])
    assert args.runner == "DirectRunner"
    assert beam_args == ["--labels=airflow-version=v3-3-2", "--job_name=ts-x"]
    check_beam_args(beam_args)  # Beam knows them: no error


def test_the_provider_command_line_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The options the DAG hands the provider, turned into flags by the provider itself."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))  # importing airflow creates its home
    hooks = pytest.importorskip(
        "airflow.providers.apache.beam.hooks.beam",
        reason="needs the airflow extra (apache-airflow-providers-apache-beam)",
    )
    options = {
        "input": ["a.jsonl", "b.jsonl"],
        "output": "runs/r1",
        "overwrite": True,
        "sampler": "replay",
        "samples": 4,
        "format": "json",
        "too_easy": 0.9,
        "job_name": "tasksieve-r1",
        "labels": ["tasksieve-run=r1", "airflow-version=v3-3-2"],
        "direct_num_workers": 2,
    }
    argv = ["--runner=DirectRunner", *hooks.beam_options_to_args(options)]
    args, beam_args = beam_main.parse(argv)
    assert (args.input, args.output, args.overwrite) == (["a.jsonl", "b.jsonl"], "runs/r1", True)
    assert (args.sampler, args.samples, args.too_easy, args.format) == ("replay", 4, 0.9, "json")
    check_beam_args(beam_args)
    assert "--direct_num_workers=2" in beam_args


def test_unknown_option_is_refused_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = beam_main.main(
        [*BASE, "--sampler=replay", f"--replay={REPLAY}", "--bogus_option=1", "--quiet"]
    )
    assert code == 2
    assert "--bogus_option" in capsys.readouterr().err


@pytest.mark.parametrize("stray", ["positional", "-x"])
def test_stray_argument_is_a_usage_error(stray: str) -> None:
    with pytest.raises(SystemExit) as exc:
        beam_main.parse([*BASE, stray])
    assert exc.value.code == 2
