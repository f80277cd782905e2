"""Timing helpers shared by the benchmarks: one timed pass, CPU used, summaries, and the
machine report every benchmark prints (``machine_report``: the load average before and after,
the fork limit of the same run, and goals judged only on a machine that was not overloaded).

CPU time is read from ``/proc/stat`` (all processes on the machine, busy jiffies), so it
includes whatever else runs at the time; the load average printed beside it says how much
that was. It is what explains a rate on a machine with few cores: with every core busy, the
rate is about cores / CPU-seconds per execution.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TextIO

from benchmarks.others_cpu import OthersCpu


@dataclass(frozen=True)
class Pass:
    """One timed pass over every job: executions per second, CPU ms per execution, verdicts."""

    rate: float
    cpu_ms: float
    verdicts: list[Any]


def busy_seconds() -> float:
    """CPU seconds spent by the whole machine so far (0.0 where /proc/stat is missing)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()[1:]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def timed_pass(check: Callable[[int], Any], n: int, workers: int) -> Pass:
    """Run ``check`` on job indices 0..n-1 from ``workers`` threads; rate, CPU and verdicts."""
    cpu0, t0 = busy_seconds(), time.perf_counter()
    if workers == 1:
        verdicts = [check(i) for i in range(n)]
    else:
        with ThreadPoolExecutor(workers) as pool:
            verdicts = list(pool.map(check, range(n)))
    wall, cpu = time.perf_counter() - t0, busy_seconds() - cpu0
    return Pass(n / wall, 1000 * cpu / n, verdicts)


def rotated(items: Sequence[str], r: int) -> list[str]:
    """``items`` rotated left by ``r`` (each round starts with a different setup)."""
    k = r % len(items) if items else 0
    return [*items[k:], *items[:k]]


def best(rates: list[float]) -> float:
    """The best (highest) rate of the rounds."""
    return max(rates)


def median(values: list[float]) -> float:
    """The median of the rounds."""
    return statistics.median(values)


def command_line(module: str) -> str:
    """The command that ran this benchmark, as a user would type it in the checkout."""
    return shlex.join(["python", "-m", module, *sys.argv[1:]])


# --- the machine report every benchmark prints (load before/after, fork limit, goals) ---

FORK_SAMPLER = r"""
import os, sys, time
budget, most = float(sys.argv[1]), int(sys.argv[2])
prog = compile("assert sum(range(100)) == 4950", "<job>", "exec")
null = os.open(os.devnull, os.O_RDWR)
n, t0 = 0, time.perf_counter()
while n < most and (n == 0 or time.perf_counter() - t0 < budget):
    pid = os.fork()
    if pid == 0:
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            exec(prog, {"__name__": "__main__"})
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("a forked child failed")
    n += 1
print(n, time.perf_counter() - t0)
"""
"""A warm ``python -I -S`` forking one child per execution of a tiny program, waiting for each:
the same measure as the ``fork`` setup of ``sandbox_throughput.py`` (one worker), on a fixed
program, so every benchmark can print it."""


def fork_limit(seconds: float = 0.5, most: int = 5000) -> float:
    """Children per second a warm interpreter forks and reaps, one at a time, for ``seconds``."""
    cmd = [sys.executable, "-I", "-S", "-c", FORK_SAMPLER, str(seconds), str(most)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + 10 * seconds)
    if out.returncode != 0:
        raise RuntimeError(f"fork-limit sample failed ({out.returncode}): {out.stderr[-500:]}")
    n, wall = out.stdout.split()
    return int(n) / float(wall)


def loads() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages."""
    one, five, fifteen = os.getloadavg()
    return one, five, fifteen


def cores() -> int:
    """The CPUs this process may run on (what a load average is compared with)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def machine_line() -> str:
    """CPUs and the load average now (1 min). Kept for the scripts that print it per round."""
    return f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"


def _load_text(avg: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in avg)


class MachineReport:
    """The machine's state around one benchmark run: load before and after, fork limit.

    ``start()`` prints ``before: N cores, load average 1m 5m 15m, fork limit R children/s``,
    ``finish()`` the same line as ``after:``. ``goal()`` judges a goal only while the highest
    1-minute load seen so far (before, and now) is within the core count.
    """

    OTHERS_MAX = 0.1  # of the cores: what other processes may use while a goal is judged

    def __init__(self, fork_seconds: float = 0.5, out: TextIO | None = None) -> None:
        self.fork_seconds = fork_seconds
        self.out = out
        self.cores = cores()
        self.others: OthersCpu | None = None  # set by a run whose own work is the load
        self.own_load: str | None = None  # a run that loads the machine on purpose: its rule
        self.before: tuple[float, float, float] | None = None
        self.after: tuple[float, float, float] | None = None
        self.fork_before: float | None = None
        self.fork_after: float | None = None

    def _print(self, text: str) -> None:
        print(text, file=self.out or sys.stdout, flush=True)

    def _line(self, when: str, avg: tuple[float, float, float], fork: float | None) -> str:
        forks = f"{fork:.0f} children/s" if fork is not None else "not measured"
        return (
            f"{when}: {self.cores} cores, load average {_load_text(avg)} (1/5/15 min), "
            f"fork limit {forks} (warm interpreter, one child per execution)"
        )

    def _fork(self) -> float | None:
        return fork_limit(self.fork_seconds) if self.fork_seconds > 0 else None

    def start(self) -> MachineReport:
        self.before = loads()
        self.fork_before = self._fork()
        self._print(self._line("before", self.before, self.fork_before))
        return self

    def finish(self) -> None:
        self.fork_after = self._fork()
        self.after = loads()
        self._print(self._line("after", self.after, self.fork_after))
        peak = self.peak_load()
        if self.others is not None:
            self._print(
                f"others: processes other than this run's kept {self.others.cores:.2f} of "
                f"{self.cores} cores busy during it ({self.others.seconds:.1f} CPU-s in "
                f"{self.others.wall:.0f} s, most by {self.others.top()}; goals judged up "
                f"to {self.OTHERS_MAX:g} of the cores, with the load below them before the run)"
            )
        elif peak > self.cores and self.own_load:
            self._print(f"load: {peak:.2f} > {self.cores} cores during the run, {self.own_load}")
        elif peak > self.cores:
            self._print(
                f"load: {peak:.2f} > {self.cores} cores during the run: figures are not "
                "a quiet machine's and no goal is judged"
            )

    def peak_load(self) -> float:
        """The highest 1-minute load average seen: before, after (once known) and now."""
        seen = [loads()[0]]
        seen += [avg[0] for avg in (self.before, self.after) if avg is not None]
        return max(seen)

    def verdict(self, ratio: float, target: float, higher: bool = True) -> str:
        """``met``, ``not met``, or ``not judged: load X > N cores``.

        With ``others`` set (a run that is itself the load: 64 sessions at once raise the load
        average to about 40 on 2 cores), the load before the run and the CPU that other
        processes used during it (``OthersCpu``) decide instead of the peak load."""
        problem = self.problem()
        if problem is not None:
            return f"not judged: {problem}"
        ok = ratio >= target if higher else ratio <= target
        return "met" if ok else "not met"

    def problem(self) -> str | None:
        """Why no goal may be judged now (None: it may): the peak load, or with ``others``
        set, the load before the run and other processes' CPU."""
        if self.others is None:
            peak = self.peak_load()
            return f"load {peak:.2f} > {self.cores} cores" if peak > self.cores else None
        before = self.before[0] if self.before is not None else loads()[0]
        if before > self.cores:
            return f"load {before:.2f} > {self.cores} cores before the run"
        if self.others.scans < 2:
            return "other processes' CPU not measured yet"
        if self.others.cores > self.OTHERS_MAX * self.cores:
            return (
                f"other processes kept {self.others.cores:.2f} cores busy "
                f"(> {self.OTHERS_MAX:g} of {self.cores})"
            )
        return None

    def goal(self, name: str, ratio: float, target: float, higher: bool = True) -> str:
        """Print and return ``goal NAME: RATIO (target >= TARGET): VERDICT`` (``<=`` when a
        lower figure is better)."""
        sign = ">=" if higher else "<="
        verdict = self.verdict(ratio, target, higher)
        line = f"goal {name}: {ratio:.2f} (target {sign} {target:g}): {verdict}"
        self._print(line)
        return line


_ACTIVE: list[MachineReport] = []


@contextlib.contextmanager
def machine_report(fork_seconds: float = 0.5, out: TextIO | None = None) -> Iterator[MachineReport]:
    """Print the before line, run the block, print the after line (also when it fails)."""
    report = MachineReport(fork_seconds, out).start()
    _ACTIVE.append(report)
    try:
        yield report
    finally:
        _ACTIVE.remove(report)
        report.finish()


def goal(name: str, ratio: float, target: float, higher: bool = True) -> str:
    """Judge a goal (``ratio >= target``, or ``<=`` with ``higher=False``) against the running
    report's loads, or, outside one, against the load now; print and return the line."""
    report = _ACTIVE[-1] if _ACTIVE else MachineReport(fork_seconds=0)
    return report.goal(name, ratio, target, higher)


@contextlib.contextmanager
def others_watched(interval: float = 2.0) -> Iterator[OthersCpu]:
    """Measure other processes' CPU over the block (``OthersCpu``) and let the running
    report judge its goals by it: for a benchmark whose own work is the load."""
    report = _ACTIVE[-1] if _ACTIVE else None
    with OthersCpu(interval) as others:
        yield others
    if report is not None:
        report.others = others


def verdict(ratio: float, target: float, higher: bool = True) -> str:
    """The verdict alone (``met``, ``not met``, ``not judged: ...``), for scripts that print
    their own goal lines."""
    report = _ACTIVE[-1] if _ACTIVE else MachineReport(fork_seconds=0)
    return report.verdict(ratio, target, higher)


def overloaded() -> str | None:
    """``not judged: load X > N cores`` when the load seen so far exceeded the cores, else
    None (for scripts whose goal is not one ratio)."""
    report = _ACTIVE[-1] if _ACTIVE else MachineReport(fork_seconds=0)
    problem = report.problem()
    return None if problem is None else f"not judged: {problem}"


def run_reported(main: Callable[[], int | None], skip_if: str | None = None) -> int:
    """``main()`` inside ``machine_report()``, its exit status (None: 0). ``skip_if``: an
    argument (a child mode's flag) under which the script runs without the report, so a child
    process prints only what its parent reads; ``--help`` runs without it too."""
    asked = sys.argv[1:]
    if (skip_if is not None and skip_if in asked) or {"-h", "--help"} & set(asked):
        return main() or 0
    with machine_report():
        return main() or 0
