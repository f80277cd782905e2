"""The machine report every benchmark prints: load before and after, fork limit, goals."""

from __future__ import annotations

import io
import re
import sys

import pytest

from benchmarks import timing


def test_fork_limit_is_measured_by_forking() -> None:
    rate = timing.fork_limit(seconds=0.2)
    assert 1 < rate < 1_000_000


def test_report_prints_before_and_after_lines_even_when_the_block_fails() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), timing.machine_report(fork_seconds=0.1, out=out):
        raise RuntimeError("benchmark failed")
    lines = out.getvalue().splitlines()
    pattern = (
        r"{}: \d+ cores, load average [\d.]+ [\d.]+ [\d.]+ \(1/5/15 min\), "
        r"fork limit \d+ children/s \(warm interpreter, one child per execution\)"
    )
    assert re.fullmatch(pattern.format("before"), lines[0]), lines
    assert any(re.fullmatch(pattern.format("after"), line) for line in lines[1:]), lines


def test_goals_are_judged_only_within_the_core_count() -> None:
    out = io.StringIO()
    report = timing.MachineReport(fork_seconds=0, out=out)
    report.cores = 10_000  # no machine has this load: judged
    assert report.goal("proc/a", 3.2, 3.0).endswith("(target >= 3): met")
    assert report.goal("proc/fork", 0.4, 0.5).endswith(": not met")
    assert report.verdict(0.2, 0.3, higher=False) == "met"
    report.cores = 1
    report.before = (5000.0, 4.0, 3.0)  # the run started on an overloaded machine
    assert report.goal("proc/a", 9.0, 3.0).endswith("not judged: load 5000.00 > 1 cores")
    assert report.verdict(9.0, 3.0) == "not judged: load 5000.00 > 1 cores"


def test_module_goal_uses_the_running_report(capsys: pytest.CaptureFixture[str]) -> None:
    with timing.machine_report(fork_seconds=0) as report:
        report.cores = 1
        report.before = (7500.0, 0.0, 0.0)
        line = timing.goal("x", 5.0, 1.0)
        assert timing.overloaded() == "not judged: load 7500.00 > 1 cores"
    assert line == "goal x: 5.00 (target >= 1): not judged: load 7500.00 > 1 cores"
    out = capsys.readouterr().out
    assert "fork limit not measured" in out and "no goal is judged" in out


def test_run_reported_wraps_main_but_not_a_child_mode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench", "--child", "x"])
    assert timing.run_reported(lambda: 3, skip_if="--child") == 3
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(sys, "argv", ["bench", "--help"])
    assert timing.run_reported(lambda: 0) == 0
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(sys, "argv", ["bench"])
    assert timing.run_reported(lambda: None) == 0
    out = capsys.readouterr().out
    assert out.startswith("before: ") and "\nafter: " in out


def test_machine_line_keeps_its_form() -> None:
    assert re.fullmatch(r"\d+ CPUs, load average \d+\.\d\d", timing.machine_line())


SPIN = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"


def _spin_under(parent_code: str) -> float:
    """Run a 0.6 CPU-s busy loop in a child of a child and return the wall seconds taken."""
    import subprocess
    import time

    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", parent_code], check=True, timeout=60)
    return time.monotonic() - t0


def test_others_cpu_counts_what_is_not_the_runs_own() -> None:
    """Another process tree's busy loop is counted; the run's own descendants' is not."""
    import subprocess

    from benchmarks.others_cpu import OthersCpu

    nested = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {SPIN!r}])\n"
    with OthersCpu(interval=0.1) as ours:
        _spin_under(nested)
    stranger = subprocess.Popen(["sleep", "30"])  # the "run" is this sleeper's tree instead
    try:
        with OthersCpu(interval=0.1, root=stranger.pid) as theirs:
            _spin_under(nested)
    finally:
        stranger.kill()
        stranger.wait()
    assert theirs.seconds >= 0.5, theirs.seconds  # the loop (and its parents) seen as others
    assert ours.seconds < theirs.seconds - 0.4, (ours.seconds, theirs.seconds)
    assert ours.scans >= 3 and 0 <= ours.cores < 1


def test_a_run_that_is_its_own_load_is_judged_by_the_others_cpu() -> None:
    from benchmarks.others_cpu import OthersCpu

    out = io.StringIO()
    report = timing.MachineReport(fork_seconds=0, out=out)
    report.cores, report.before = 2, (0.5, 0.5, 0.5)
    others = OthersCpu()
    others.seconds, others.wall, others.scans = 1.0, 100.0, 50  # 0.01 cores
    report.others = others
    report.after = (40.0, 10.0, 3.0)  # the run's own 64 sessions
    assert report.verdict(10.4, 10) == "met" and report.verdict(9.0, 10) == "not met"
    others.seconds = 30.0  # 0.3 cores: more than 0.1 of 2
    assert (
        report.verdict(10.4, 10) == "not judged: other processes kept 0.30 cores busy (> 0.1 of 2)"
    )
    others.seconds, report.before = 1.0, (3.0, 1.0, 1.0)
    assert report.verdict(10.4, 10) == "not judged: load 3.00 > 2 cores before the run"
    report.finish()
    assert "others: processes other than this run's kept 0.01 of 2 cores" in out.getvalue()


def _cpuacct_group() -> str | None:
    """A fresh cpuacct cgroup's path (cgroup v1, as root), or None where none can be made."""
    import os
    import time
    from pathlib import Path

    path = Path("/sys/fs/cgroup/cpuacct") / f"test-others-{os.getpid()}-{time.monotonic_ns()}"
    try:
        path.mkdir()
    except OSError:
        return None
    return str(path)


def test_an_orphan_in_the_runs_cgroup_is_the_runs_own() -> None:
    """A process whose parent exited (reparented to init, as a sandbox's can be) is counted as
    other work unless the run's cgroup is named; named, it is the run's own."""
    import os
    import subprocess
    import time
    from pathlib import Path

    from benchmarks.others_cpu import OthersCpu, in_cgroups

    group = _cpuacct_group()
    if group is None:
        pytest.skip("no cpuacct cgroup can be made here (needs root and cgroup v1)")
    name = "/" + Path(group).name
    # the child joins the group and forks a spinner, exiting in the same instant: no scan
    # sees the spinner before it is reparented to init
    orphaning = (
        "import os\n"
        f"open({group + '/cgroup.procs'!r}, 'w').write(str(os.getpid()))\n"
        "if os.fork():\n    os._exit(0)\n"
        f"exec({SPIN!r})\n"
    )
    try:
        seen = {}
        for label, groups in (("unnamed", ()), ("named", (name,))):
            with OthersCpu(interval=0.1, own_cgroups=groups) as others:
                subprocess.run([sys.executable, "-c", orphaning], check=True, timeout=60)
                deadline = time.monotonic() + 20
                while (
                    time.monotonic() < deadline
                    and (Path(group) / "cgroup.procs").read_text().strip()
                ):
                    time.sleep(0.1)  # until the orphaned spinner has ended
            seen[label] = others.seconds
        assert seen["unnamed"] >= 0.4, seen  # reparented to init: seen as another's work
        assert seen["named"] < seen["unnamed"] - 0.3, seen
        assert in_cgroups(os.getpid(), ("/",)) and not in_cgroups(os.getpid(), (name,))
    finally:
        os.rmdir(group)


def test_a_process_seen_as_the_runs_own_stays_so_once_reparented() -> None:
    """A spinner that a scan saw under its parent stays the run's own after the parent exits."""
    import os
    import subprocess
    import time

    from benchmarks.others_cpu import OthersCpu

    late_orphan = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', {SPIN!r}], start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(0.4)\n"  # scans see the spinner as this process's child first
    )
    with OthersCpu(interval=0.05) as others:
        done = subprocess.run(
            [sys.executable, "-c", late_orphan], check=True, timeout=60, capture_output=True
        )
        spinner = int(done.stdout.split()[0])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and os.path.exists(f"/proc/{spinner}"):
            time.sleep(0.05)  # until init has reaped the orphan
    assert others.seconds < 0.3, (others.seconds, others.by_name)


def test_a_run_that_loads_the_machine_on_purpose_says_how_it_judges() -> None:
    out = io.StringIO()
    report = timing.MachineReport(fork_seconds=0, out=out)
    report.cores, report.own_load = 2, "from its busy processes: judged by its own rule"
    report.start()
    report.before = (3.5, 1.0, 1.0)
    report.finish()
    text = out.getvalue()
    assert "during the run, from its busy processes: judged by its own rule" in text
    assert "no goal is judged" not in text
