"""OpenMP settings for the CPU sampler that must be made before torch is imported.

torch's CPU kernels run on OpenMP (libgomp). By default its worker threads spin while they
wait at the end of each parallel region. On a machine whose cores are busy with other work,
a spinning thread burns the time slice the thread it waits for needs, and a small model runs
thousands of short parallel regions per token: sampling slows down by one to two orders of
magnitude (see benchmarks/cpu_share.py). With ``OMP_WAIT_POLICY=PASSIVE`` waiting threads
sleep instead, and the sampler slows down about in proportion to the CPU share it gets.
libgomp reads the variable once, when it is loaded (``import torch``), so this module sets it
when the ``transforms`` package is imported, before any stage imports torch (Beam's
RunInference module does). What it does NOT do: override a policy the user set, or help a
process that imported torch before ``transforms`` (``passive_waits`` says so; the sampler logs
it).
"""

from __future__ import annotations

import os
import sys

VARIABLE = "OMP_WAIT_POLICY"


def prefer_passive_waits() -> None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless it is set or OpenMP may be loaded already."""
    if VARIABLE not in os.environ and "torch" not in sys.modules:
        os.environ[VARIABLE] = "PASSIVE"


def passive_waits() -> bool:
    """Whether OpenMP threads of this process sleep when idle (as far as can be told)."""
    return os.environ.get(VARIABLE, "").upper() == "PASSIVE"
