"""One sandbox, verifier cache and pool per worker process, shared by the sandbox stages."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterator

import apache_beam as beam
import pytest
from apache_beam.internal import pickler
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that

from tasksieve.transforms.reliability.detectors import AmbiguityFn, TestStrengthFn
from tasksieve.transforms.reliability.gates import GatesConfig, GatesFn
from tasksieve.transforms.rollouts.rounds import VerifyFn
from tasksieve.transforms.runtime.worker_sandbox import SandboxDoFn, SharedSandbox, WorkerSandbox
from tasksieve.verifiers import SandboxConfig
from tasksieve.verifiers.reliability import AmbiguityConfig, StrengthConfig
from tests.transforms.add_task import add_task, item_of

CFG = SandboxConfig()


def test_handles_of_one_run_share_the_process_sandbox() -> None:
    a, b = SharedSandbox(CFG, "run-a"), SharedSandbox(CFG, "run-a")
    ra, rb = a.acquire(), b.acquire()
    try:
        assert ra is rb and ra.users == 2
    finally:
        a.release(ra)
        b.release(rb)


def test_handles_of_different_runs_do_not_share() -> None:
    a, b = SharedSandbox(CFG, "run-b1"), SharedSandbox(CFG, "run-b2")
    ra, rb = a.acquire(), b.acquire()
    try:
        assert ra is not rb
    finally:
        a.release(ra)
        b.release(rb)


def test_a_release_that_is_not_the_last_keeps_it_open() -> None:
    handle = SharedSandbox(CFG, "run-c")
    first, second = handle.acquire(), handle.acquire()
    handle.release(first)
    try:
        assert second.pool.submit(lambda: 7).result() == 7
    finally:
        handle.release(second)


def test_the_last_release_closes_and_the_next_acquire_builds_anew() -> None:
    handle = SharedSandbox(CFG, "run-d")
    res = handle.acquire()
    handle.release(res)
    with pytest.raises(RuntimeError):  # the pool is shut down
        res.pool.submit(lambda: 0)
    again = handle.acquire()
    try:
        assert again is not res and again.users == 1
    finally:
        handle.release(again)


@pytest.mark.parametrize("library", [pickler.USE_CLOUDPICKLE, pickler.USE_DILL])
def test_a_pickled_handle_names_the_same_shared_sandbox(library: str) -> None:
    handle = SharedSandbox(CFG, "run-e")
    pickler.set_library(library)
    try:
        copy = pickler.loads(pickler.dumps(handle))
    finally:
        pickler.set_library(pickler.DEFAULT_PICKLE_LIB)
    assert isinstance(copy, SharedSandbox) and copy.key == handle.key
    res, res2 = handle.acquire(), copy.acquire()
    try:
        assert res is res2
    finally:
        handle.release(res)
        copy.release(res2)


class _Where(beam.DoFn):
    """Emit (pid, id of the sandbox resources) for each element: which sandbox served it."""

    def __init__(self, run_id: str) -> None:
        self.shared = SharedSandbox(CFG, run_id)
        self.res: WorkerSandbox | None = None

    def setup(self) -> None:
        self.res = self.shared.acquire()

    def teardown(self) -> None:
        if self.res is not None:
            self.shared.release(self.res)

    def process(self, element: int) -> Iterator[tuple[int, int]]:
        yield os.getpid(), id(self.res)


def _one_sandbox_per_process(seen: list[tuple[int, int]]) -> None:
    per_pid: dict[int, set[int]] = {}
    for pid, res in seen:
        per_pid.setdefault(pid, set()).add(res)
    assert per_pid and all(len(r) == 1 for r in per_pid.values()), per_pid


@pytest.mark.slow
def test_two_stages_in_worker_processes_use_one_sandbox_per_process() -> None:
    opts = PipelineOptions(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    with beam.Pipeline(options=opts) as p:
        items = p | beam.Create(range(8))
        first = items | "First" >> beam.ParDo(_Where("run-f"))
        second = items | "Second" >> beam.ParDo(_Where("run-f"))
        both = (first, second) | beam.Flatten()
        assert_that(both | beam.combiners.ToList(), functools.partial(_check, os.getpid()))


def _check(driver: int, lists: list[list[tuple[int, int]]]) -> None:
    (seen,) = lists
    assert len(seen) == 16
    assert all(pid != driver for pid, _ in seen)  # they ran in worker processes
    _one_sandbox_per_process(seen)


def test_the_curate_sandbox_stages_share_one_sandbox_and_pool() -> None:
    fns = [
        GatesFn(GatesConfig(), CFG, "run-g"),
        TestStrengthFn(StrengthConfig(), CFG, "run-g"),
        VerifyFn(CFG, "run-g"),
        AmbiguityFn(AmbiguityConfig(), CFG, "run-g"),
    ]
    copies = [pickler.loads(pickler.dumps(fn)) for fn in fns]  # as a worker gets them
    for fn in copies:
        fn.setup()
    try:
        assert len({id(fn.sandbox) for fn in copies}) == 1
        assert len({id(fn.verifiers) for fn in copies}) == 1
        assert copies[2].pool is copies[2].res.pool
    finally:
        for fn in copies:
            fn.teardown()
    assert all(fn.res is None for fn in copies)


@pytest.mark.parametrize("name", ["sandbox", "verifiers", "pool"])
def test_a_sandbox_dofn_has_no_resources_outside_setup_and_teardown(name: str) -> None:
    fn = SandboxDoFn(CFG, "run-h")
    with pytest.raises(AttributeError, match="outside setup/teardown"):
        getattr(fn, name)
    fn.setup()
    fn.teardown()
    with pytest.raises(AttributeError, match="outside setup/teardown"):
        getattr(fn, name)


def test_a_sandbox_dofn_finds_the_verifier_of_the_family() -> None:
    fn = SandboxDoFn(CFG, "run-i")
    fn.setup()
    try:
        found = fn.verifier_for(item_of(add_task("def add(a, b):\n    return a + b\n")), "gates")
        assert found is fn.verifiers.get("code")
    finally:
        fn.teardown()


def test_a_sandbox_dofn_rejects_a_family_without_a_verifier() -> None:
    item = item_of(add_task("def add(a, b):\n    return a + b\n"))
    item = dataclasses.replace(item, task=item.task.model_copy(update={"family": "no-such"}))
    fn = SandboxDoFn(CFG, "run-j")
    fn.setup()
    try:
        row = fn.verifier_for(item, "verify", n=0, n_requested=4)
    finally:
        fn.teardown()
    assert isinstance(row, dict)
    assert (row["stage"], row["reason"], row["n_requested"]) == (
        "verify",
        "verifier.unsupported",
        4,
    )
