"""A code verdict on the fork server returns without waiting for its namespace to empty.

The pair's uids stay taken until the server reports the namespace gone, and nothing the
candidate started outlives it. Only where pair runs exist (root, bubblewrap).
"""

from __future__ import annotations

import pytest

from tasksieve.schemas import CodeSpec, TaskRecord
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.sandbox.process.pair import reap_lingering
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.process.uids import UIDS
from tests.verifiers.reclaim_util import marker, marks, survivors

SLEEPER = """import os, sys
if os.fork() == 0:
    os.execv(sys.executable, [sys.executable, "-I", "-c", "import time; time.sleep(300)", {mark!r}])

def add(a, b):
    return a + b
"""


def _task() -> TaskRecord:
    return TaskRecord(
        id="code.add_linger",
        family="code",
        prompt="Write add(a, b).",
        verifier=CodeSpec(style="asserts", entry_point="add", asserts=["assert add(2, 3) == 5"]),
        reference_solution="def add(a, b):\n    return a + b\n",
    )


def test_lingering_pair_returns_uids_and_leaves_nothing(
    sandbox: ProcessSandbox, verifier: PythonVerifier
) -> None:
    if not sandbox.capabilities.paired_runs:
        pytest.skip(f"pair runs need the fork server: {sandbox.warm_unavailable}")
    reap_lingering(5.0)
    before = set(UIDS._used)
    with marks() as made:
        made.append(mark := marker())
        for _ in range(3):
            v = verifier.verify(_task(), SLEEPER.format(mark=mark))
            assert (v.status, v.tests_passed) == ("pass", 1), v.detail
        assert survivors(mark, 15.0) == []
        reap_lingering(5.0)
        assert set(UIDS._used) == before
