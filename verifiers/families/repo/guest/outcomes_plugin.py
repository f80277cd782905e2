"""A pytest plugin that records one outcome per test id, loaded with ``-p``.

It writes one JSON line per finished test phase to the file named by ``TASKSIEVE_OUTCOMES``,
opened when the plugin loads (before any code of the repository is imported) and flushed
after every line, so a run killed half-way still reports the tests it finished. Collection
errors are recorded under the id of the file that failed to collect.

Code under test runs in the same interpreter as pytest and could rewrite this plugin's state;
the host therefore also checks the report against what it asked for (an id it asked for and
that never reported counts as not passed).
"""

from __future__ import annotations

import json
import os
from typing import IO, Any

_sink: IO[str] | None = None


def _emit(record: dict[str, Any]) -> None:
    if _sink is not None:
        _sink.write(json.dumps(record) + "\n")
        _sink.flush()


def pytest_configure(config: Any) -> None:
    global _sink
    path = os.environ.get("TASKSIEVE_OUTCOMES")
    if path and _sink is None:
        _sink = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run
        os.environ.pop("TASKSIEVE_OUTCOMES", None)  # code under test need not learn where


def pytest_runtest_logreport(report: Any) -> None:
    _emit({"id": report.nodeid, "phase": report.when, "outcome": report.outcome})


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _emit({"id": report.nodeid, "phase": "collect", "outcome": "error"})


def pytest_unconfigure(config: Any) -> None:
    global _sink
    if _sink is not None:
        _sink.close()
        _sink = None
