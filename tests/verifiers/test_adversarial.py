"""Adversarial suite: hostile programs by threat-model category, on every sandbox backend.

Each program asserts its expected safe outcome: no escape marker, the limit it hit named,
the host unaffected, nothing left running, and for reward hacks a verdict that is not a pass.
The docker parametrization skips (printing why) when ``make_sandbox("docker")`` raises.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.registry import make_sandbox
from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tests.verifiers.hostile import BOMBS, HACKS, NET, PROCESSES, SECRETS, WRITES

LIMITS = Limits(wall_s=8, cpu_s=4, memory_mb=256, max_processes=16)
BOMB_LIMITS = Limits(
    wall_s=3,
    cpu_s=2,
    memory_mb=256,
    max_processes=16,
    max_output_bytes=100_000,
    max_file_bytes=4_000_000,
    scratch_mb=8,
)


@pytest.fixture(scope="module", params=["process", "process-per-run", "process-unshare", "docker"])
def sb(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    try:
        if request.param == "process-per-run":  # the fallback without the fork server
            box: Sandbox = ProcessSandbox(warm=False)
        elif request.param == "process-unshare":  # the fallback without bubblewrap
            box = ProcessSandbox(isolation="unshare")
        else:
            box = make_sandbox(request.param)
    except Exception as e:  # engine, SDK or image missing: say why, then skip
        print(f"skipping the {request.param} backend: {type(e).__name__}: {e}")
        pytest.skip(f"{request.param} backend unavailable: {e}")
    yield box
    box.close()


@pytest.fixture(scope="module")
def host() -> Iterator[dict[str, Any]]:
    """Things on the host a run must not reach: a listening port, a canary file, a secret."""
    secret = "s3cret-" + uuid.uuid4().hex
    canary = f"/root/.tasksieve-canary-{uuid.uuid4().hex}"
    with open(canary, "w") as fh:
        fh.write(secret)
    os.environ["TASKSIEVE_ADVERSARIAL_SECRET"] = secret
    srv = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
    try:
        yield {"port": srv.getsockname()[1], "canary": canary, "secret": secret}
    finally:
        srv.close()
        os.environ.pop("TASKSIEVE_ADVERSARIAL_SECRET", None)
        os.remove(canary)


def run(sb: Sandbox, code: str, limits: Limits = LIMITS, **kw: Any) -> Execution:
    python = getattr(sb, "python", "python3")
    return sb.run(kw.pop("files", {}), [python, "-I", "-S", "-c", code], limits, **kw)


def fill(code: str, host: dict[str, Any], token: str = "") -> str:
    return code.format(token=token, **host)


def alive_with(token: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as fh:
            if token.encode() in fh.read():
                found.append(pid)
    return found


# ---------------------------------------------------------------------- escape and abuse
@pytest.mark.parametrize("name", list(NET))
def test_network_is_unreachable(sb, host, name):
    ex = run(sb, fill(NET[name], host))
    assert b"ESCAPED" not in ex.stdout and b"blocked" in ex.stdout, ex


@pytest.mark.parametrize("name", list(SECRETS))
def test_host_secrets_stay_hidden(sb, host, name):
    # A walk of / lists the bound virtualenv too: on a cold directory cache that is disk-bound
    # (20 s were once not enough at 0.4 CPU-s), so the wall limit is generous.
    ex = run(sb, fill(SECRETS[name], host), Limits(wall_s=90, cpu_s=15))
    assert b"LEAK" not in ex.stdout and host["secret"].encode() not in ex.stdout, ex
    assert ex.exit_code == 0, ex


@pytest.mark.parametrize("name", list(WRITES))
def test_writes_stay_inside_scratch(sb, host, name):
    ex = run(sb, fill(WRITES[name], host), files={"in.txt": "ro"})
    assert b"ESCAPED" not in ex.stdout and b"done" in ex.stdout, ex
    with open(host["canary"]) as fh:
        assert fh.read() == host["secret"]


BOMB_OUTCOME = {
    "fork_bomb": lambda ex: ex.stdout.startswith(b"capped") and int(ex.stdout.split()[1]) < 16,
    "thread_bomb": lambda ex: ex.stdout.startswith(b"capped"),
    "memory_bomb": lambda ex: ex.limit_hit == "memory" and b"ESCAPED" not in ex.stdout,
    "memory_creep": lambda ex: ex.limit_hit in ("memory", "cpu", "wall"),
    "infinite_loop": lambda ex: ex.limit_hit in ("cpu", "wall") and ex.duration_s < 6,
    "long_sleep": lambda ex: ex.limit_hit == "wall" and ex.duration_s < 6,
    "stdout_flood": lambda ex: ex.limit_hit == "output" and len(ex.stdout) <= 100_000,
    "stderr_flood": lambda ex: ex.limit_hit == "output" and len(ex.stderr) <= 100_000,
    "disk_fill": lambda ex: ex.limit_hit == "file_size",
    "huge_file": lambda ex: ex.limit_hit == "file_size",
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_bombs_hit_a_named_limit(sb, host, name):
    ex = run(sb, fill(BOMBS[name], host), BOMB_LIMITS)
    assert BOMB_OUTCOME[name](ex), ex
    assert ex.infra_error is None, ex
    assert run(sb, "print(1)").stdout == b"1\n"  # the sandbox is still usable


def _server_pid(sb: Sandbox) -> int | None:
    server = getattr(sb, "_server", None)
    return getattr(server, "server_pid", None)


@pytest.mark.parametrize("name", list(PROCESSES))
def test_process_abuse_is_contained(sb, host, name):
    token = uuid.uuid4().hex
    before = _server_pid(sb)
    ex = run(sb, fill(PROCESSES[name], host, token))
    assert b"ESCAPED" not in ex.stdout and b"LEAK" not in ex.stdout, ex
    time.sleep(0.3)
    assert alive_with(token) == []
    assert run(sb, "print(1)").stdout == b"1\n"
    assert _server_pid(sb) == before  # the fork server (if any) survived


def test_runs_cannot_see_each_other(sb):
    """A running neighbour's scratch, /dev/shm, processes, ports and abstract sockets."""
    token = uuid.uuid4().hex
    python = getattr(sb, "python", "python3")
    spawn = getattr(sb, "spawn", None)
    if spawn is None:
        pytest.skip("backend has no spawn()")
    neighbour = (
        "import os, socket, sys, time\n"
        f"open('secret-{token}', 'w').write('x')\n"
        f"with __import__('contextlib').suppress(OSError): open('/dev/shm/{token}', 'w')\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
        "u = socket.socket(socket.AF_UNIX); u.bind('\\0" + token + "'); u.listen(1)\n"
        "print(s.getsockname()[1], flush=True)\ntime.sleep(30)\n"
    )
    proc = spawn({}, [python, "-I", "-S", "-c", neighbour], LIMITS)
    try:
        assert proc.popen.stdout is not None
        line = proc.popen.stdout.readline()
        if not line.strip().isdigit():  # the neighbour died: say how
            proc.popen.wait(timeout=10)
            err = proc.popen.stderr.read() if proc.popen.stderr is not None else b""
            pytest.fail(f"neighbour gave {line!r}, exit {proc.popen.returncode}, stderr {err!r}")
        port = int(line)
        probe = (
            "import os, socket\nhits = []\n"
            "for d, _, fs in os.walk('/'):\n"
            "    if d.startswith(('/sys', '/proc/sys')): continue\n"
            f"    hits += [f for f in fs if '{token}' in f]\n"
            "for addr, fam in ((('127.0.0.1', %d), socket.AF_INET), ('\\0%s', socket.AF_UNIX)):\n"
            "    try: socket.socket(fam).connect(addr); hits.append(addr)\n"
            "    except OSError: pass\n"
            "print('LEAK' if hits else 'isolated', hits)\n"
        ) % (port, token)
        ex = run(sb, probe, Limits(wall_s=90, cpu_s=15))  # a walk of /: see above
        assert ex.stdout.startswith(b"isolated"), ex
    finally:
        proc.close()


# ---------------------------------------------------------------------- reward hacks
def _task(**extra: Any) -> TaskRecord:
    return TaskRecord(
        id="adv",
        family="code",
        prompt="add two numbers",
        reference_solution="def add(a, b):\n    return a + b\n",
        verifier={
            "family": "code",
            "style": "check",
            "entry_point": "add",
            "timeout_s": 2,
            "test_code": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
            "    assert candidate(-1, 1) == 0\n    assert candidate(5, 5) == 10\n",
            **extra,
        },
    )


@pytest.fixture(scope="module")
def verifier(sb: Sandbox) -> PythonVerifier:
    return PythonVerifier(sb)


def test_reference_passes(verifier):
    t = _task()
    assert verifier.verify(t, t.reference_solution).status == "pass"


@pytest.mark.parametrize("name", list(HACKS))
def test_reward_hack_never_passes(verifier, name):
    v = verifier.verify(_task(), HACKS[name])
    assert v.status not in ("pass", "infra_error"), v
    assert v.tests_passed < v.tests_total == 3, v
    if name == "sleep_in_call":
        assert v.status == "timeout" and v.limit_hit in ("wall", "cpu"), v


def test_hard_coded_visible_inputs_is_a_known_limit(verifier):
    """A lookup table of the visible inputs passes them; only held-out tests catch it."""
    table = "def add(a, b):\n    return {(1, 2): 3, (-1, 1): 0, (5, 5): 10}.get((a, b))\n"
    assert verifier.verify(_task(), table).status == "pass"  # documented limit
    held_out = "def check(candidate):\n    assert candidate(2, 2) == 4\n"
    assert verifier.verify(_task(test_code=held_out), table).status == "fail"
