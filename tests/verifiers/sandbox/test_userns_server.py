"""The fork server of an unprivileged user with subordinate uids, run for real as ``nobody``.

``nobody`` gets a subordinate range in a private mount namespace only
(``benchmarks.sandbox_unprivileged.as_nobody``: ``newuidmap`` reads the ``/etc/subuid`` bound
there; the host's files are not changed). The first test checks what the sandbox says and
does there: the fork server, a per-run uid inside the namespace that is a host uid of the
granted range outside it, two live runs never sharing one. The second runs the sandbox's
hostile-run suites (limits, escapes, reclamation, several samples in one entry, pair runs)
as that user, and requires that none of them skipped for want of the fork server. Skipped
where the tests do not run as root, or ``newuidmap`` or bubblewrap is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from benchmarks.sandbox_unprivileged import SUB_COUNT, SUB_START, as_nobody

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = r"""
import json, os, sys, time
from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
sb = ProcessSandbox()
code = ("import os, sys, time; print(os.getuid(), flush=True); "
        "open('/tmp/x', 'w').close(); time.sleep(3)")
procs = [sb.spawn({}, [sb.python, "-I", "-S", "-c", code], Limits(wall_s=10)) for _ in range(2)]
inner = [int(p.popen.stdout.readline()) for p in procs]
time.sleep(0.3)
host = set()  # host uids of this user's processes' children now: the runs' outer uids
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/status") as fh:
            uid = next(int(x.split()[1]) for x in fh if x.startswith("Uid:"))
    except (OSError, StopIteration):
        continue
    if uid != os.getuid():
        host.add(uid)
for p in procs:
    p.kill()
    p.close()
setuid = sb.run({}, [sb.python, "-I", "-S", "-c", "import os; os.setuid(0)"], Limits(wall_s=10))
print(json.dumps({"describe": sb.describe(), "why": sb.warm_unavailable, "inner": inner,
                  "host": sorted(host), "setuid_rc": setuid.exit_code,
                  "setuid_err": setuid.stderr.decode()[-200:]}))
sb.close()
"""
SUITES = [
    "tests/verifiers/test_process.py",
    "tests/verifiers/test_multi_samples.py",
    "tests/verifiers/test_reclaim.py",
    "tests/verifiers/test_pair_linger.py",
    "tests/verifiers/test_memory_outside_rlimits.py",
]


def _nobody(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0 or not all(map(shutil.which, ("newuidmap", "newgidmap", "bwrap"))):
        pytest.skip("needs root (to become nobody), newuidmap/newgidmap (uidmap) and bubblewrap")
    stash = tempfile.mkdtemp(prefix="tasksieve-userns-")
    home = os.path.join(stash, "home")
    os.mkdir(home)
    os.chown(home, 65534, 65534)
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home,
           "PYTHONPATH": f"{ROOT}:{site}", "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    try:
        return subprocess.run(
            as_nobody(argv, env, stash, subids=True),
            capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        )  # fmt: skip
    finally:
        shutil.rmtree(stash, ignore_errors=True)


def test_runs_get_mapped_uids_of_the_granted_range() -> None:
    r = _nobody([sys.executable, "-c", SCRIPT], 120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.splitlines()[-1])
    d = got["describe"]
    assert d["executor"] == "forkserver", got["why"]
    assert d["uid"] == "per-run subordinate uid in a user namespace" and d["seccomp"] is True
    a, b = got["inner"]
    assert a != b and min(a, b) >= 1000  # inside: two live runs, two unprivileged uids
    granted = [u for u in got["host"] if SUB_START <= u < SUB_START + SUB_COUNT]
    assert len(granted) >= 2, got["host"]  # outside: host uids of the granted range
    assert got["setuid_rc"] != 0 and "PermissionError" in got["setuid_err"]


@pytest.mark.slow
def test_hostile_run_suites_pass_on_the_unprivileged_fork_server() -> None:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *SUITES]
    r = _nobody(argv, 900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert not [s for s in skips if "fork server" in s or "root-mode" in s], skips
