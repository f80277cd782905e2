"""How the process sandbox starts: probes through the fork server, probes remembered per boot.

A root start with bubblewrap must not run a cold probe (its probe is a run through the fork
server); a cold start remembers a method that worked and skips the probe next time, but
probes again when anything the answer depends on differs (a kernel knob, the interpreter, the
seccomp filter), and never trusts a record another user owns. A warm script registered after
the server started runs warm without a restart, and the server's common modules arrive while
it idles.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process import probecache
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.warm import register_warm_script

L = Limits(wall_s=10, cpu_s=5, memory_mb=256)
ROOT = os.geteuid() == 0


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "probes"
    monkeypatch.setenv(probecache.CACHE_ENV, str(where))
    return where


@pytest.fixture
def cold_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The commands of every cold (per-run) sandbox started meanwhile."""
    seen: list[list[str]] = []
    real = ProcessSandbox._spawn_cold

    def spy(self: ProcessSandbox, files, command, limits, collect, uid):  # type: ignore[no-untyped-def]
        seen.append(list(command))
        return real(self, files, command, limits, collect, uid)

    monkeypatch.setattr(ProcessSandbox, "_spawn_cold", spy)
    yield seen


def _key(knobs: tuple[str, ...] = probecache.USERNS_KNOBS, python: str = "/usr/bin/env") -> str:
    key = probecache.probe_key(
        "bwrap", ["/usr/bin/env"], python, ["--ro-bind", "/usr"], b"x", knobs
    )
    assert key is not None
    return key


def test_key_follows_every_input(tmp_path: Path) -> None:
    knob = tmp_path / "max_user_namespaces"
    knob.write_text("100\n")
    base = _key((str(knob),))
    assert _key((str(knob),)) == base  # stable while nothing changes
    knob.write_text("0\n")  # user namespaces switched off at run time
    assert _key((str(knob),)) != base
    knob.write_text("100\n")
    assert _key((str(knob),)) == base
    assert _key((str(knob),), python="/usr/bin/true") != base
    other = probecache.probe_key("bwrap", ["/usr/bin/env"], "/usr/bin/env", [], b"x", (str(knob),))
    assert other != base  # another mount plan
    seccomp = probecache.probe_key(
        "bwrap", ["/usr/bin/env"], "/usr/bin/env", ["--ro-bind", "/usr"], b"y", (str(knob),)
    )
    assert seccomp != base


def test_only_own_regular_records_count(cache: Path) -> None:
    key = _key()
    assert not probecache.known_good(key)
    probecache.remember(key, "bwrap")
    assert probecache.known_good(key)
    assert (cache.stat().st_mode & 0o777) == 0o700
    assert probecache.forget() == 1 and not probecache.known_good(key)
    (cache / f"{key}.ok").symlink_to("/etc/hostname")
    assert not probecache.known_good(key)
    (cache / f"{key}.ok").unlink()
    if ROOT:
        (cache / f"{key}.ok").write_text("bwrap\n")
        os.chown(cache / f"{key}.ok", 65534, 65534)
        assert not probecache.known_good(key)


def test_off_and_unwritable_caches_just_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(probecache.CACHE_ENV, "off")
    assert probecache.cache_dir() is None
    probecache.remember(_key(), "bwrap")  # nowhere to write: no error
    assert not probecache.known_good(_key())
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(probecache.CACHE_ENV, str(blocker / "probes"))
    probecache.remember(_key(), "bwrap")
    assert not probecache.known_good(_key())


def test_cold_start_probes_once_per_key(cache: Path, cold_runs: list[list[str]]) -> None:
    first = ProcessSandbox(warm=False)
    first.close()
    assert len(cold_runs) == 1 and "probe.txt" in cold_runs[0][-1]
    assert len(list(cache.glob("*.ok"))) == 1
    second = ProcessSandbox(warm=False)
    try:
        assert len(cold_runs) == 1  # remembered: no probe run
        ex = second.run({"a.txt": "hi"}, [second.python, "-I", "-S", "-c", "print(open('a.txt').read())"], L)  # fmt: skip  # noqa: E501
        assert (ex.exit_code, ex.stdout) == (0, b"hi\n")
    finally:
        second.close()
    unremembered = ProcessSandbox(warm=False, probe_cache=False)
    unremembered.close()
    assert len(cold_runs) == 3  # the probe, then the run above, then a fresh probe


def test_a_changed_record_key_probes_again(cache: Path, cold_runs: list[list[str]]) -> None:
    ProcessSandbox(warm=False).close()
    (record,) = cache.glob("*.ok")
    record.rename(cache / f"{'0' * 64}.ok")  # as if a knob or program had changed since
    ProcessSandbox(warm=False).close()
    assert len(cold_runs) == 2 and len(list(cache.glob("*.ok"))) == 2


@pytest.mark.skipif(not ROOT, reason="the fork server needs root")
def test_root_start_probes_only_through_the_fork_server(
    cache: Path, cold_runs: list[list[str]]
) -> None:
    sb = ProcessSandbox()
    try:
        assert sb.describe()["executor"] == "forkserver" and sb.method == "bwrap"
        assert cold_runs == [] and not cache.exists()
    finally:
        sb.close()


WARM = """import sys
LOADED_AS = __name__

def warm_main():
    print(LOADED_AS, sys.argv[1:])

if __name__ == "__main__":
    print("cold")
# {token}
"""


@pytest.mark.skipif(not ROOT, reason="the fork server needs root")
def test_late_warm_script_and_idle_preimports_need_no_restart() -> None:
    sb = ProcessSandbox()
    try:
        pid = sb._server.server_pid if sb._server else None
        source = WARM.format(token=uuid.uuid4().hex)
        register_warm_script(source)  # after the server started
        ex = sb.run({"w.py": source}, [sb.python, "-I", "-S", "w.py", "x"], L)
        assert (ex.exit_code, ex.stdout) == (0, b"__warm__ ['x']\n")
        assert sb._server is not None and sb._server.server_pid == pid
        check = "import sys; print('unittest' in sys.modules and 'decimal' in sys.modules)"
        deadline, out = time.monotonic() + 20, b""
        while out != b"True\n" and time.monotonic() < deadline:
            out = sb.run({}, [sb.python, "-I", "-S", "-c", check], L).stdout
            time.sleep(0.05)
        assert out == b"True\n"  # the common modules were imported while the server idled
        assert sb._server.server_pid == pid
    finally:
        sb.close()
