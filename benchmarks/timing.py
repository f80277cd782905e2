"""Timing helpers shared by the throughput benchmarks: one timed pass, CPU used, summaries.

CPU time is read from ``/proc/stat`` (all processes on the machine, busy jiffies), so it
includes whatever else runs at the time; the load average printed beside it says how much
that was. It is what explains a rate on a machine with few cores: with every core busy, the
rate is about cores / CPU-seconds per execution.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


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


def machine_line() -> str:
    """CPUs and the load average now (1 min)."""
    return f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
