"""The curate stage that runs the data-quality suites between writing a run and publishing it.

Standard library only at the top (``pipeline.curate.run`` imports it); Great Expectations is
imported
only when the stage runs (``--expectations``). A failed run is moved to ``OUT.failed-RUNID``
beside the output, so the published output stays as it was and the failed shards, their
``checks.json`` and Data Docs stay readable. Failed runs are never deleted automatically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tasksieve.pipeline.outputs.checks.run import CheckResult


class ExpectationsFailed(Exception):
    """The data-quality checks failed: the run was kept aside in ``failed_dir``, unpublished."""

    def __init__(self, message: str, failed_dir: Path) -> None:
        super().__init__(message)
        self.failed_dir = failed_dir


def failed_dir(out: Path, run_id: str) -> Path:
    """Where a run whose checks failed is kept: ``OUT.failed-RUNID`` beside ``OUT``."""
    return out.parent / f"{out.name}.failed-{run_id}"


def run_checks(staging: Path) -> CheckResult:
    """Run the suites on the staged run (writes its ``checks.json`` and Data Docs)."""
    from tasksieve.pipeline.outputs.checks.run import check_output

    return check_output(staging)


def refuse_if_failed(result: CheckResult, staging: Path, out: Path, run_id: str) -> None:
    """On failed checks, move the staged run aside and raise ExpectationsFailed."""
    from tasksieve.pipeline.outputs.checks.run import describe_failures

    if result.success:
        return
    failed = failed_dir(out, run_id)
    os.rename(staging, failed)
    raise ExpectationsFailed(
        f"{describe_failures(result)}. The run was not published; its output is in {failed} "
        f"(report: {failed / 'report.html'}, results: {failed / 'checks.json'}, "
        f"Data Docs: {failed / 'gx' / 'index.html'})",
        failed,
    )
