"""MkDocs hook: generate the reference pages from the code on every build, so they cannot go stale.

Two pages are made in memory (nothing is written into ``docs/``, so there is nothing to edit by
hand): ``reference/cli.md`` from the real argparse parser (``tasksieve.pipeline.cli.build_parser``,
every subcommand and nested subcommand with its ``--help`` text) and ``reference/reasons.md``
from the reason registry (``tasksieve.transforms.reasons``: the stages in pipeline order and every
code). A reason's stage and meaning are prose kept here in ``REASON_DOCS``; a registered code
without an entry, or an entry for a code no longer registered, is logged as a warning, which
fails the strict build (``make docs``). The checkout is documented, not whichever tasksieve is
installed: the repository root goes first on ``sys.path``. It does NOT check that the prose of
a meaning is still true, only that every code has one.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

log = logging.getLogger("mkdocs.hooks.tasksieve")

CLI_PAGE = "reference/cli.md"
REASONS_PAGE = "reference/reasons.md"
GENERATED = (CLI_PAGE, REASONS_PAGE)
HELP_WIDTH = "100"

# code -> (stage, meaning). Stage names are those of ``STAGES``; codes ``<stage>.error`` are
# generated from ``ERRORS`` and need no entry.
REASON_DOCS: dict[str, tuple[str, str]] = {
    "ingest.unreadable_file": (
        "ingest",
        "the file could not be read past `source_line` (0: not at all): bad or truncated gzip,"
        " truncated or corrupt Parquet or Arrow, a JSON array never closed, a filesystem error;"
        " `detail` names the file and the error; one rejection per file (see [Corrupt or"
        " truncated input files](../scale.md#corrupt-or-truncated-input-files))",
    ),
    "validate.parse_error": ("validate", "the line is not a JSON object (or not UTF-8)"),
    "validate.schema": ("validate", "schema violation; detail is `path:line: id: field: message`"),
    "validate.duplicate_id": ("validate", "an earlier record has the same id"),
    "dedup.exact": (
        "exact_dedup",
        "same family, same prompt and same verifier spec (canonical JSON) as an earlier record;"
        " only Unicode NFC and whitespace are normalised (line ends, trailing spaces, runs of"
        " spaces inside a line, blank-line runs, outer whitespace); case, punctuation, operators,"
        " digits, indentation and line breaks count. The earliest (file, line, id) survives; the"
        " detail names it",
    ),
    "dedup.conflict": (
        "exact_dedup",
        "same family and prompt as another record but a different verifier spec: every member"
        " of the group is rejected (at most one test suite can match the prompt and nothing says"
        " which); the detail names the other members by `id (file:line)` and the spec fields"
        " that differ",
    ),
    "dedup.near": (
        "near_dedup",
        "MinHash-LSH candidate confirmed by Jaccard >= threshold; the earliest (file, line, id)"
        " of a cluster survives",
    ),
    "dedup.index": (
        "near_dedup",
        "duplicates a task kept by an earlier run (`--dedup-index`; see [The near-dedup"
        " index](../scale.md#the-near-dedup-index-lookup-per-worker-compaction))",
    ),
    "verifier.unsupported": ("gates", "no verifier for the family"),
    "gate.too_few_tests": (
        "gates",
        "a code task has fewer tests than `--min-tests`: it cannot give a meaningful reward",
    ),
    "gate.reference_failed": ("gates", "no run of the reference solution passed its tests"),
    "gate.reference_flaky": (
        "gates",
        "the reference's runs (`--reference-runs`, default 3) disagree; the detail lists every"
        " run's status",
    ),
    "gate.trivial_passes": ("gates", "a trivial solution (one that must fail) passes the tests"),
    "gate.infra_error": (
        "gates",
        "the sandbox broke on every retry while running the reference (also written by the"
        " test-strength stage when an infra error leaves its whole measurement undecided)",
    ),
    "repo.snapshot": (
        "gates",
        "a repo task's snapshot is not in the snapshot store (`--snapshot-store`), does not match"
        " its hash, or no store was given; the detail names the task and the store",
    ),
    "repo.environment": (
        "gates",
        "a repo task's environment failed to build (`pip install --target`); the detail holds"
        " pip's last lines",
    ),
    "repo.too_large": (
        "gates",
        "a repo task's snapshot (or environment) is over the size a packed run may send; use a"
        " sandbox with workspaces or a smaller repository",
    ),
    "repo.tests_missing": (
        "gates",
        "test ids of a repo task that do not exist or do not collect on the reference; the"
        " detail names them",
    ),
    "repo.fail_to_pass_passes_before": (
        "gates",
        "a repo task's `fail_to_pass` test already passes with the empty patch (named)",
    ),
    "repo.pass_to_pass_fails_before": (
        "gates",
        "a repo task's `pass_to_pass` test does not pass on the unchanged snapshot (named)",
    ),
    "gate.weak_tests": (
        "test_strength",
        "the task's tests let too many mutants of the reference through (mutation score below"
        " `--min-mutation-score`); the detail shows survivors with the input they differ on and"
        " their diff",
    ),
    "rollouts.no_samples": ("rollouts", "the sampler returned nothing for the task"),
    "rollouts.sampler_error": (
        "rollouts",
        "the sampler failed the task for good (e.g. an OpenAI-compatible or vLLM server that"
        " kept failing after retries, in any `--adaptive` round, or a sampler that raised on the"
        " task); the detail has the last error",
    ),
    "rollouts.turn_missing": (
        "rollouts",
        "multi-turn runs (`--turns`): the sampler returned nothing for a later turn of a failed"
        " episode (e.g. a replay file without that turn); the task is rejected rather than"
        " scored on the episodes that happened to continue",
    ),
    "verify.infra_error": (
        "verify",
        "the sandbox broke while verifying samples (after bounded retries) and the samples left"
        " cannot settle the task's band (also written by the ambiguity stage when an infra error"
        " leaves its whole measurement undecided)",
    ),
    "filter.ambiguous": (
        "ambiguity",
        "passing samples disagree with the reference on extra inputs the tests lack: the tests"
        " under-specify the task; the detail shows the inputs, outputs and samples",
    ),
    "filter.too_easy": ("filter", "pass rate at or above `--too-easy` (n, k, pass_rate recorded)"),
    "filter.too_hard": ("filter", "pass rate at or below `--too-hard` (n, k, pass_rate recorded)"),
}

FAMILY_DOCS: dict[str, tuple[str, str, str]] = {
    "decontam.": (
        "<benchmark>",
        "decontaminate",
        "matches an item of that contamination set (`humaneval` bundled, or a `--benchmark`"
        " set): by `substring`, `ngram13` (a shared 13-gram that is rare in the set and has at"
        " least 6 distinct words) or `containment` (at least 30% of the item's distinctive code"
        " 4-grams, identifiers canonicalised, and at least 10 of them, are in the task)",
    ),
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of ``parser``, in declaration order."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[str]:
    """Every command the parser accepts, nested ones included (``"benchmarks build"``)."""
    paths = []
    for name, _, sub in _subcommands(parser):
        paths.append(" ".join((*path, name)))
        paths += command_paths(sub, (*path, name))
    return paths


def cli_reference() -> str:
    """The CLI reference page: a table of commands, then each command's ``--help`` verbatim."""
    from tasksieve.pipeline.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH  # argparse wraps to this width: the page is stable
    try:
        parser = build_parser()
        rows: list[str] = []
        sections: list[str] = []

        def visit(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
            for name, summary, sub in _subcommands(p):
                full = " ".join(("tasksieve", *path, name))
                rows.append(f"| [`{full}`](#{full.replace(' ', '-')}) | {_cell(summary)} |")
                sections.append(f"## {full}\n\n{summary}\n\n```text\n{sub.format_help()}```\n")
                visit(sub, (*path, name))

        visit(parser, ())
        top = parser.format_help()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    head = (
        "# CLI reference\n\n"
        "Generated from the parser (`tasksieve.pipeline.cli.build_parser`) when the docs are"
        " built; do not edit. Guides: [curating](../curate.md),"
        " [validate and verify](../verify.md), [query](../query.md), [checks](../checks.md),"
        " [report](../report.md), [training](../train/README.md).\n\n"
        "| command | what it does |\n|---|---|\n" + "\n".join(rows) + "\n\n"
        "## tasksieve\n\n```text\n" + top + "```\n"
    )
    return head + "\n" + "\n".join(sections)


def reasons_reference() -> str:
    """The rejection-reasons page: stages in order, then every registered code."""
    from tasksieve.transforms import reasons

    fixed = sorted(reasons.REASONS - reasons.ERRORS)
    for code in fixed:
        if code not in REASON_DOCS:
            log.warning("reason %s is registered but has no entry in docs/hooks.py", code)
    for code in sorted(set(REASON_DOCS) - set(fixed)):
        log.warning(
            "docs/hooks.py describes %s, which transforms/reasons.py does not register", code
        )
    for prefix in reasons.FAMILIES:
        if prefix not in FAMILY_DOCS:
            log.warning("reason family %s* has no entry in docs/hooks.py", prefix)

    order = {stage: i for i, stage in enumerate(reasons.STAGES)}
    described = [(code, *REASON_DOCS.get(code, ("?", "not described yet"))) for code in fixed]
    described += [
        (p + FAMILY_DOCS[p][0], *FAMILY_DOCS[p][1:]) for p in reasons.FAMILIES if p in FAMILY_DOCS
    ]
    described.sort(key=lambda row: (order.get(row[1], len(order)), row[0]))
    stages = "\n".join(f"{i}. `{stage}`" for i, stage in enumerate(reasons.STAGES, 1))
    table = "\n".join(f"| `{c}` | {s} | {_cell(m)} |" for c, s, m in described)
    errors = ", ".join(f"`{reasons.error_reason(s)}`" for s in reasons.GUARDED)
    return (
        "# Rejection reasons\n\n"
        "Generated from `transforms/reasons.py` when the docs are built; do not edit. Every"
        " record that is not kept is written to `rejected/` with one of these codes in `reason`"
        " and its stage in `stage`; the data-quality checks refuse any other code.\n\n"
        "## Stages\n\nIn the order records pass them (`STAGES`; the catalog's `stages` view and"
        " the report's funnel use the same list):\n\n" + stages + "\n\n"
        "## Codes\n\n| reason | stage | meaning |\n|---|---|---|\n" + table + "\n\n"
        "## A stage that raised\n\n" + errors + ": the stage named raised an exception on the"
        " record (a bug, an input no check foresaw); `detail` has the exception and the"
        " innermost frames of its traceback; the run goes on (see [Faults](../scale.md#faults-a"
        "-record-that-makes-a-stage-raise-is-rejected-not-the-run)). Ingest is not guarded this"
        " way: a file it cannot read ends as `ingest.unreadable_file`.\n"
    )


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages to the site's files."""
    from mkdocs.structure.files import File

    for path, make in ((CLI_PAGE, cli_reference), (REASONS_PAGE, reasons_reference)):
        files.append(File.generated(config, path, content=make()))
    return files
