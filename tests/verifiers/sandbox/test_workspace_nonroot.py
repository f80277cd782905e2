"""Workspaces opened by an unprivileged user: both methods, in a user namespace.

Run from root as uid 65534 (``setpriv``), with the interpreter, this checkout and the
virtualenv's packages on its path; skipped where that user cannot reach them (a checkout or
interpreter under a private home, say; the system interpreter of the same version stands in
for one it cannot reach) or when the tests do not run as root.
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

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = """
import sys
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.test_memory_outside_rlimits import SEM_HOARD, SHM_HOARD
from tasksieve.verifiers.sandbox.workspace import SessionLimits, WorkspaceSpec
sb = ProcessSandbox(isolation=sys.argv[1], warm=False)
limits = SessionLimits(disk_mb=4, max_processes=40)
with sb.open_workspace(WorkspaceSpec(sys.argv[2], limits=limits)) as ws:
    ws.exec("cd pkg; export Q=7; echo x >> mod.py")
    r = ws.exec("echo $PWD $Q; id -u; echo y > /planted; ls -A /snapshot 2>/dev/null; "
                "head -c 6000000 /dev/zero > big")
    print(r.stdout.decode().strip().replace(chr(10), " "))
    print("refused" if b"Read-only" in r.stderr and b"No space" in r.stderr else r.stderr)
    print("+x" in ws.diff())
    r = ws.exec("for f in /proc/1/fd/* /proc/1/root /proc/1/cwd; do ls $f/ 2>&1 | head -1; "
                "done; head -c1 /proc/1/mem 2>&1")  # the agent: the same host uid, not dumpable
    lines = r.stdout.splitlines()
    print("closed" if len(lines) > 4 and all(b"Permission denied" in x for x in lines) else lines)
with sb.open_workspace(WorkspaceSpec(sys.argv[2], limits=SessionLimits(memory_mb=64))) as ws:
    for hoard in (SHM_HOARD, SEM_HOARD):  # no cgroup counts these for an unprivileged user
        print(ws.run([sb.python, "-I", "-S", "-c", hoard]).stdout.decode().strip())
"""


def _reachable(path: str) -> bool:
    r = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "test", "-r", path]
    )
    return r.returncode == 0


@pytest.mark.parametrize("method", ["bwrap", "unshare"])
def test_unprivileged_workspace(method: str) -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root (to become uid 65534) and setpriv")
    same = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    pythons = [os.path.realpath(getattr(sys, "_base_executable", sys.executable)), same]
    python = next((p for p in pythons if os.path.exists(p) and _reachable(p)), "")
    site = sysconfig.get_paths()["purelib"]
    if not python or not all(_reachable(p) for p in (site, str(ROOT / "tasksieve"))):
        pytest.skip("uid 65534 cannot reach the interpreter, the packages or this checkout")
    home = Path(tempfile.mkdtemp(prefix="tasksieve-nonroot-"))  # pytest's tmp is root-only
    try:
        _run(python, site, method, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _run(python: str, site: str, method: str, home: Path) -> None:
    snap = home / "snap"
    (snap / "pkg").mkdir(parents=True)
    (snap / "pkg" / "mod.py").write_text("a\n")
    for p in (home, snap, snap / "pkg", snap / "pkg" / "mod.py"):
        os.chown(p, 65534, 65534)
    r = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", python, "-c",
         SCRIPT, method, str(snap)],
        capture_output=True, text=True, timeout=120, cwd="/",
        env={"PYTHONPATH": f"{ROOT}:{site}", "HOME": str(home), "PATH": os.environ["PATH"]},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    want = ["/workspace/pkg 7 1000", "refused", "True", "closed"]
    assert r.stdout.split("\n")[:4] == want, r.stdout
    # SysV IPC: bounded by the session's memory (bubblewrap's session held 1 GB and 31,999
    # semaphore sets before), or refused where the kernel keeps the limits out of reach
    shm, sem = (json.loads(line) for line in r.stdout.split("\n")[4:6])
    assert shm["held_mb"] <= 64 and shm["errno"] is not None, shm
    assert sem["big"] == -1 and sem["sets"] <= 64 and sem["mq"] == -1, sem
