"""A bind source under /tmp (a checkout or virtualenv there) shows inside every isolated run.

The ``unshare`` fallback builds its new root on a tmpfs over its own view of /tmp; the
virtualenv's site-packages, when they live under /tmp, must still appear at
``capabilities.site_packages`` (read-only), while the rest of the host's /tmp stays out of
sight. The virtualenv's location is the one thing replaced here (``venv_site_paths``); the
sandbox, its mount guest and bubblewrap run for real.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.base import Limits, SandboxUnavailable
from tasksieve.verifiers.sandbox.process import binds
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

FAST = Limits(wall_s=10, cpu_s=5, memory_mb=256)
PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import planted_site_module
print(planted_site_module.VALUE)
"""


@pytest.fixture(params=["site-packages", "with space", "deep/er/site-packages"])
def site_under_tmp(request: pytest.FixtureRequest, monkeypatch) -> Iterator[Path]:
    """A fake site-packages dir under the literal /tmp, with a module and a secret sibling."""
    top = Path(tempfile.mkdtemp(prefix="tasksieve-site-", dir="/tmp"))
    site = top / request.param
    site.mkdir(parents=True)
    (site / "planted_site_module.py").write_text("VALUE = 'seen'\n")
    (top / "sibling-secret.txt").write_text("secret\n")
    monkeypatch.setattr(binds, "venv_site_paths", lambda: [str(site)])
    try:
        yield site
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(params=["unshare", "bwrap", "forkserver"])
def isolation(request: pytest.FixtureRequest) -> dict[str, object]:
    if request.param != "unshare" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed here")
    if request.param == "forkserver" and os.geteuid() != 0:
        pytest.skip("the fork server needs root (per-run uids)")
    return {
        "unshare": {"isolation": "unshare"},
        "bwrap": {"isolation": "bwrap", "warm": False},
        "forkserver": {"isolation": "bwrap"},
    }[str(request.param)]


def _sandbox(kwargs: dict[str, object]) -> ProcessSandbox:
    return ProcessSandbox(**kwargs)  # type: ignore[arg-type]


def test_site_packages_under_tmp_are_importable(site_under_tmp, isolation):
    sb = _sandbox(isolation)
    try:
        (inside,) = sb.capabilities.site_packages
        ex = sb.run({}, [sb.python, "-I", "-S", "-c", PROBE, inside], FAST)
        assert ex.infra_error is None and ex.exit_code == 0, ex
        assert ex.stdout == b"seen\n"
    finally:
        sb.close()


def test_site_packages_under_tmp_are_read_only(site_under_tmp, isolation):
    sb = _sandbox(isolation)
    code = "import sys\ntry:\n open(sys.argv[1] + '/x.py', 'w')\nexcept OSError as e:\n print(e)"
    try:
        (inside,) = sb.capabilities.site_packages
        ex = sb.run({}, [sb.python, "-I", "-S", "-c", code, inside], FAST)
        assert b"Read-only file system" in ex.stdout, ex
        assert not (site_under_tmp / "x.py").exists()
    finally:
        sb.close()


def test_the_rest_of_host_tmp_stays_hidden(site_under_tmp, isolation):
    sb = _sandbox(isolation)
    code = (
        "import os\n"
        "for root, dirs, files in os.walk('/', topdown=True):\n"
        "    dirs[:] = [d for d in dirs if root != '/' or d not in ('proc', 'sys', 'usr', 'dev')]\n"
        "    if 'sibling-secret.txt' in files: print('FOUND', root)\n"
        "print(os.listdir('/tmp'))"
    )
    try:
        ex = sb.run({}, [sb.python, "-I", "-S", "-c", code], FAST)
        assert ex.exit_code == 0 and b"FOUND" not in ex.stdout, ex
        assert ex.stdout.strip() == b"[]"
    finally:
        sb.close()


@pytest.mark.parametrize("isolation", ["unshare", "bwrap"])
def test_an_interpreter_under_tmp_is_refused_with_the_reason(isolation):
    if isolation == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed here")
    top = Path(tempfile.mkdtemp(prefix="tasksieve-py-", dir="/tmp"))
    try:
        (top / "bin").mkdir()
        python = top / "bin" / "python3"
        python.symlink_to(os.path.realpath(shutil.which("python3") or "/usr/bin/python3"))
        with pytest.raises(SandboxUnavailable, match="lies under /tmp"):
            ProcessSandbox(isolation=isolation, python=str(python), warm=False)
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize(
    ("target", "hidden"),
    [
        ("/tmp", True),
        ("/tmp/venv/lib", True),
        ("/tmpfoo", False),
        ("/var/tmp/x", False),
        ("/.tasksieve/site/0", False),
        (f"/tmp/{uuid.uuid4().hex}/../x", True),
    ],
)
def test_under_names_only_targets_inside_the_directory(target, hidden):
    plan = [("ro", "/src", target)]
    assert binds.under(plan, "/tmp") == ([target] if hidden else [])
