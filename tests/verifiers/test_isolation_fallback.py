"""Without bubblewrap the process sandbox still isolates the filesystem, or refuses.

The ``unshare`` fallback (forced with ``isolation="unshare"``, or chosen by ``auto`` when
bwrap is not on PATH) must keep a candidate away from the host's files: nothing planted in
the host's /tmp (``sitecustomize.py``, ``conftest.py``), no world-writable host file
overwritten, the host's /tmp not even visible. Where no namespace method works the sandbox
refuses unless weak isolation is accepted, and then says ``weak: True``. Missing tools are
simulated through PATH (the sandbox looks them up there).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.base import Limits, SandboxUnavailable
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

FAST = Limits(wall_s=10, cpu_s=5, memory_mb=256)
KINDS = {
    "forkserver": {},
    "per-run": {"warm": False},
    "unshare": {"isolation": "unshare"},
}


@pytest.fixture(scope="module", params=list(KINDS))
def sb(request: pytest.FixtureRequest) -> Iterator[ProcessSandbox]:
    box = ProcessSandbox(**KINDS[request.param])
    try:
        yield box
    finally:
        box.close()


@pytest.fixture
def host_files() -> Iterator[dict[str, str]]:
    """A world-writable dir and .py file on the host, and names a run might plant."""
    token = uuid.uuid4().hex
    shared = Path("/var/tmp") / f"tasksieve-ww-{token}"
    shared.mkdir()
    shared.chmod(0o777)
    victim = shared / "victim.py"
    victim.write_text("VALUE = 1\n")
    victim.chmod(0o666)
    tmp_victim = Path("/tmp") / f"tasksieve-ww-{token}.py"
    tmp_victim.write_text("VALUE = 1\n")
    tmp_victim.chmod(0o666)
    planted = [
        "/tmp/sitecustomize.py",
        "/tmp/conftest.py",
        f"/tmp/tasksieve-planted-{token}",
        f"/var/tmp/tasksieve-planted-{token}",
        f"/dev/shm/tasksieve-planted-{token}",
        str(shared / "sitecustomize.py"),
    ]
    before = {p: os.path.exists(p) for p in planted}
    try:
        yield {
            "token": token,
            "victims": f"{victim}\n{tmp_victim}",
            "planted": "\n".join(p for p in planted if not before[p]),
        }
    finally:
        shutil.rmtree(shared, ignore_errors=True)
        tmp_victim.unlink(missing_ok=True)
        for p in planted:
            if not before[p] and os.path.exists(p):
                os.remove(p)


def _run(sb: ProcessSandbox, code: str) -> bytes:
    ex = sb.run({}, [sb.python, "-I", "-S", "-c", code], FAST)
    assert ex.exit_code == 0 and ex.infra_error is None, ex
    return ex.stdout


def test_planting_files_on_the_host_fails(sb, host_files):
    code = (
        f"for p in {host_files['planted']!r}.split():\n"
        " try: open(p, 'w').write('import os; os.system(\"id\")\\n'); print('wrote', p)\n"
        " except OSError: pass\nprint('done')"
    )
    _run(sb, code)
    left = [p for p in host_files["planted"].split() if os.path.exists(p)]
    assert left == []


def test_world_writable_host_files_stay_unchanged(sb, host_files):
    code = (
        f"for p in {host_files['victims']!r}.split():\n"
        " try: open(p, 'w').write('VALUE = 2\\n')\n except OSError: pass\nprint('done')"
    )
    _run(sb, code)
    for p in host_files["victims"].split():
        assert Path(p).read_text() == "VALUE = 1\n"


def test_host_tmp_is_invisible(sb, host_files):
    code = "import os\nprint(sorted(os.listdir('/tmp')))\nprint(os.path.isdir('/var/tmp'))"
    out = _run(sb, code)
    assert host_files["token"].encode() not in out
    assert out.splitlines()[1] == b"False"


def test_describe_says_what_the_run_got(sb):
    d = sb.describe()
    assert d["isolation"] in ("bwrap", "unshare-mount")
    assert d["filesystem_isolated"] is True and d["weak"] is False


@pytest.fixture
def path_without(tmp_path, monkeypatch) -> Iterator[object]:
    """Put only the named tools (symlinked from the real PATH) on PATH."""

    def keep(*tools: str) -> None:
        for tool in tools:
            real = shutil.which(tool)
            if real is None:
                pytest.skip(f"{tool} is not installed here")
            os.symlink(real, tmp_path / tool)
        monkeypatch.setenv("PATH", str(tmp_path))

    yield keep


def test_auto_without_bwrap_uses_the_private_root(path_without):
    path_without("unshare", "setpriv")
    sb = ProcessSandbox(warm=False)
    try:
        d = sb.describe()
        assert d["isolation"] == "unshare-mount" and d["filesystem_isolated"] is True
        assert d["weak"] is False
        out = sb.run({}, [sb.python, "-I", "-S", "-c", "print(open('/x', 'w'))"], FAST)
        assert out.exit_code != 0 and b"Read-only file system" in out.stderr, out
    finally:
        sb.close()


@pytest.mark.parametrize("isolation", ["auto", "unshare", "bwrap"])
def test_without_any_tool_it_refuses(path_without, isolation):
    path_without()
    with pytest.raises(SandboxUnavailable, match="allow-weak-isolation"):
        ProcessSandbox(isolation=isolation)


def test_weak_isolation_when_accepted_warns_and_says_weak(path_without):
    path_without()
    with pytest.warns(RuntimeWarning, match="WEAK ISOLATION"):
        sb = ProcessSandbox(allow_weak_isolation=True)
    d = sb.describe()
    assert d["isolation"] == "none" and d["weak"] is True and d["filesystem_isolated"] is False
    assert sb.run({}, [sb.python, "-I", "-S", "-c", "print(1)"], FAST).stdout == b"1\n"
