"""Publish a finished curate run by pointing ``ROOT/current`` at it, atomically.

Layout kept under a dataset root (the Airflow DAG curates into it; anyone may)::

    ROOT/runs/<run-name>/   one curate output per run (manifest.json, tasks/, ...), kept
    ROOT/current            symlink -> runs/<run-name>, the published run

:func:`point_current` makes a new relative symlink under a temporary name and renames it over
``current`` (rename(2) replaces the old link in one step), so a reader resolving ``current``
sees the old run or the new one, never a missing or half-written link. Earlier runs stay
where they are and stay readable through their own paths.

What this does NOT guard against: a reader that resolved ``current`` once and keeps reading
the old run after the swap (it sees a whole run, just an older one), two publishers racing
(the last rename wins), and filesystems without symlinks or atomic rename (object stores).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from tasksieve.pipeline.outputs.layout import CURRENT, RUNS, RunLayout
from tasksieve.pipeline.outputs.report.checks import load_checks


class NotPublishable(ValueError):
    """The run cannot be published (failed or missing checks, not under the root's runs/).

    A directory that is no finished run at all raises the layout's ``NotAnOutput``."""


def point_current(root: Path, run_dir: Path, *, require_checks: bool) -> Path:
    """Make ``root/current`` point at ``run_dir`` (which must lie in ``root/runs``).

    With ``require_checks`` the run must hold a ``checks.json`` whose ``success`` is true.
    Returns the path of the ``current`` link. Raises ``NotPublishable``, or ``NotAnOutput``
    (``tasksieve.pipeline.outputs.layout``) when ``run_dir`` is not a finished run.
    """
    root = root.resolve()
    run_dir = run_dir.resolve()
    if run_dir.parent != root / RUNS:
        raise NotPublishable(f"{run_dir} is not a run directory under {root / RUNS}")
    RunLayout.find(run_dir)  # a finished run: its manifest reads
    if require_checks:
        checks = load_checks(run_dir)
        if checks is None:
            raise NotPublishable(f"{run_dir}: no checks.json; run `tasksieve check` first")
        if checks.error:
            raise NotPublishable(f"{run_dir}: {checks.error}")
        if checks.success is not True:
            raise NotPublishable(f"{run_dir}: checks.json says the data-quality checks failed")
    current = root / CURRENT
    if current.exists() and not current.is_symlink():
        raise NotPublishable(f"{current} exists and is not a symlink; move it away first")
    tmp = root / f".{CURRENT}.{secrets.token_hex(4)}"
    os.symlink(os.path.join(RUNS, run_dir.name), tmp)
    try:
        os.replace(tmp, current)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return current


def published_run(root: Path) -> Path | None:
    """The run directory ``root/current`` points at, or None when nothing is published."""
    current = root / CURRENT
    if not current.is_symlink():
        return None
    return current.resolve()
