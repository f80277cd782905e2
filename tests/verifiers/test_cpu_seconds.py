"""Sandbox CPU seconds: what a verification's processes really used, measured in the sandbox.

A candidate that spins for 0.3 s of CPU must be charged at least 0.2 s; one that sleeps 0.3 s
far less than its wall time. Checked on the process backend's one-shot runs, pair runs
(``PythonVerifier.verify``), multi-sample entries (``verify_many``) and killed runs, on the
docker backend (skipped without an engine), and on the verdicts of the sql and api families.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.sandbox.base import Limits, Sandbox, sum_cpu
from tasksieve.verifiers.sandbox.cpu import charge, metering
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

SPIN_S, SLEEP_S = 0.3, 0.3
SPIN = (
    f"import time\nt = time.process_time()\nwhile time.process_time() - t < {SPIN_S}:\n    pass\n"
)
SLEEP = f"import time\ntime.sleep({SLEEP_S})\n"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def _code_task(body: str) -> tuple[TaskRecord, str]:
    solution = (
        "def f(x):\n" + "".join(f"    {line}\n" for line in body.splitlines()) + "    return x\n"
    )
    task = TaskRecord.model_validate(
        {
            "id": "code.cpu",
            "family": "code",
            "prompt": "Return x.",
            "reference_solution": solution,
            "verifier": {
                "family": "code",
                "style": "asserts",
                "entry_point": "f",
                "asserts": ["assert f(1) == 1"],
            },
        }
    )
    return task, solution


def _run(sb: Sandbox, code: str) -> tuple[float | None, float]:
    ex = sb.run({"a.py": code}, [sb.python, "-I", "-S", "a.py"], Limits(wall_s=20))
    assert ex.exit_code == 0, ex.stderr
    return ex.cpu_s, ex.duration_s


def _assert_spin_and_sleep(sb: Sandbox) -> None:
    spin, _ = _run(sb, SPIN)
    assert spin is not None and spin >= 0.2
    sleep, wall = _run(sb, SLEEP)
    assert wall >= SLEEP_S
    assert sleep is not None and sleep < 0.5 * wall


def test_one_shot_runs_of_the_fork_server(sandbox: ProcessSandbox) -> None:
    _assert_spin_and_sleep(sandbox)


def test_a_killed_run_counts_the_processes_it_still_had(sandbox: ProcessSandbox) -> None:
    """The kernel drops the time of what an exiting namespace init takes along; the server
    reads the live processes first. Here a child spins, says so, then sleeps until killed."""
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        f"    {SPIN.replace(chr(10), chr(10) + '    ').rstrip()}\n"
        "    print('spun', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = sandbox.spawn({"a.py": code}, [sandbox.python, "-I", "-S", "a.py"], Limits(wall_s=30))
    try:
        assert proc.popen.stdout is not None
        assert proc.popen.stdout.readline().strip() == b"spun"
    finally:
        proc.kill()
        proc.close()
    assert proc.cpu_s is not None and proc.cpu_s >= 0.2


def test_cold_launcher_runs_are_not_measured() -> None:
    """bwrap hands its init to the host's reaper: no measure, so None rather than a guess."""
    sb = ProcessSandbox(warm=False)
    try:
        cpu, _ = _run(sb, "pass\n")
        assert cpu is None
    finally:
        sb.close()


def test_pair_runs_put_the_candidate_and_tests_cpu_on_the_verdict(
    verifier: PythonVerifier,
) -> None:
    task, spin = _code_task(SPIN)
    v = verifier.verify(task, spin)
    assert v.status == "pass" and v.cpu_s is not None and v.cpu_s >= 0.2
    task, sleep = _code_task(SLEEP)
    v = verifier.verify(task, sleep)
    assert v.status == "pass" and v.duration_s >= SLEEP_S
    assert v.cpu_s is not None and v.cpu_s < 0.5 * v.duration_s


# a child that spins for SPIN_S after the program's own work is done, then sleeps
CHILD_SPINS_ON = (
    "import os, time\n"
    "r, w = os.pipe()\n"
    "if os.fork() == 0:\n"
    f"    t = time.process_time()\n    while time.process_time() - t < {SPIN_S}:\n"
    "        pass\n    os.write(w, b'x')\n    time.sleep(60)\n"
    "os.read(r, 1)\n"
)


def test_a_pair_counts_what_the_candidate_left_running(verifier: PythonVerifier) -> None:
    """A child that outlives the candidate (this init inherits it) is still counted."""
    solution = CHILD_SPINS_ON + "def f(x):\n    return x\n"
    task, _ = _code_task("pass")
    v = verifier.verify(task, solution)
    assert v.status == "pass" and v.cpu_s is not None and v.cpu_s >= 0.2


def test_multi_sample_entries_charge_each_sample_its_own(verifier: PythonVerifier) -> None:
    task, spin = _code_task(SPIN)
    _, sleep = _code_task(SLEEP)
    got = verifier.verify_many(task, [spin, sleep, spin])
    assert [v.status for v in got] == ["pass"] * 3
    cpu = [v.cpu_s for v in got]
    assert all(c is not None for c in cpu), cpu
    assert cpu[0] >= 0.2 and cpu[2] >= 0.2  # type: ignore[operator]
    assert cpu[1] < 0.5 * got[1].duration_s and got[1].duration_s >= SLEEP_S  # type: ignore[operator]


@pytest.mark.docker
def test_docker_runs_report_the_container_cgroup_cpu() -> None:
    try:
        from tasksieve.verifiers.sandbox.docker.sandbox import DockerSandbox

        sb = DockerSandbox(pool_size=1)
    except (ImportError, RuntimeError) as e:  # no SDK, engine or image: the message says which
        pytest.skip(f"no docker sandbox here: {e}")
    try:
        _assert_spin_and_sleep(sb)
        task, spin = _code_task(SPIN)  # the code family's relay: two spawned runs, summed
        v = PythonVerifier(sb).verify(task, spin)
        assert v.status == "pass" and v.cpu_s is not None and v.cpu_s >= 0.2
    finally:
        sb.close()


@pytest.mark.parametrize("family", ["sql", "api"])
def test_sql_and_api_verdicts_carry_the_cpu_of_their_runs(
    sandbox: ProcessSandbox, family: str
) -> None:
    from tasksieve.verifiers.registry import get_verifier

    if family == "sql":
        pytest.importorskip("duckdb")
    else:
        pytest.importorskip("moto")
    line = (EXAMPLES / f"{family}.jsonl").read_text(encoding="utf-8").splitlines()[0]
    task = TaskRecord.model_validate_json(line)
    v = get_verifier(family, sandbox)
    try:
        t0 = time.monotonic()
        verdict = v.verify(task, task.reference_solution)
    finally:
        v.close()
    assert verdict.status == "pass", verdict.detail
    assert verdict.cpu_s is not None and 0 < verdict.cpu_s < 4 * (time.monotonic() - t0)


def test_a_verification_sums_its_runs_and_is_unmeasured_if_one_is() -> None:
    assert sum_cpu([0.25, 0.5]) == 0.75
    assert sum_cpu([0.25, None]) is None and sum_cpu([]) is None
    with metering() as outer:
        charge(0.5)
        with metering() as inner:
            charge(None)
        charge(0.25)
    assert outer.total() == 0.75 and inner.total() is None
    charge(1.0)  # no meter open: nothing to charge


def test_a_one_shot_run_counts_what_outlived_its_command(sandbox: ProcessSandbox) -> None:
    """The command exits while a child it started still spins; init ends and reaps the child
    before it exits itself, so the child's time is counted."""
    code = CHILD_SPINS_ON
    cpu, _ = _run(sandbox, code)
    assert cpu is not None and cpu >= 0.2
