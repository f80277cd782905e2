"""The docker sandbox: basic runs, every limit, isolation, the warm pool and the Python verifier."""

from __future__ import annotations

import tempfile
import time

import pytest

from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.warm import register_warm_script

pytestmark = pytest.mark.docker

PY = "/usr/bin/python3"
L = Limits(wall_s=10, cpu_s=5)


@pytest.fixture(scope="module")
def docker_sandbox():
    try:
        import docker  # noqa: F401
    except ImportError as e:
        pytest.skip(f"docker SDK not installed: {e}")
    from tasksieve.verifiers.sandbox.docker.sandbox import DockerSandbox

    try:
        sb = DockerSandbox(pool_size=3)
    except RuntimeError as e:  # no engine or no image: the message names the fix
        print(f"skipping docker tests: {e}")
        pytest.skip(str(e))
    yield sb
    sb.close()


def py(sb, code: str, limits: Limits = L, **kw):
    return sb.run(kw.pop("files", {}), [PY, "-c", code], limits, **kw)


def test_runs_command_with_files_and_stdin(docker_sandbox):
    ex = py(
        docker_sandbox,
        "import sys; print(open('d/a.txt').read(), sys.stdin.read())",
        files={"d/a.txt": "hello"},
        stdin=b"world",
    )
    assert (ex.exit_code, ex.stdout, ex.limit_hit, ex.infra_error) == (
        0,
        b"hello world\n",
        None,
        None,
    )


def test_exit_code_and_stderr(docker_sandbox):
    ex = docker_sandbox.run({}, ["sh", "-c", "echo oops >&2; exit 3"], L)
    assert ex.exit_code == 3 and ex.stderr == b"oops\n"


def test_collects_result_files(docker_sandbox):
    ex = py(docker_sandbox, "open('out.json', 'w').write('[1]')", collect=("out.json", "nope"))
    assert ex.files == {"out.json": b"[1]"}


def test_runs_as_nobody_with_read_only_inputs(docker_sandbox):
    code = (
        "import os\nprint(os.getuid())\n"
        "for f in (lambda: open('t.py', 'w'), lambda: os.remove('t.py'),\n"
        "          lambda: os.chmod('t.py', 0o666)):\n"
        "    try:\n        f(); print('modified')\n    except OSError:\n        pass\n"
    )
    ex = py(docker_sandbox, code, files={"t.py": "x = 1"})
    assert ex.stdout == b"65534\n", ex


def test_wall_timeout(docker_sandbox):
    t0 = time.monotonic()
    ex = py(docker_sandbox, "import time; time.sleep(30)", Limits(wall_s=1))
    assert ex.limit_hit == "wall" and ex.exit_code is None and time.monotonic() - t0 < 5


def test_cpu_limit(docker_sandbox):
    ex = py(docker_sandbox, "while True: pass", Limits(wall_s=10, cpu_s=1))
    assert ex.limit_hit == "cpu", ex


def test_memory_limit(docker_sandbox):
    ex = py(docker_sandbox, "x = bytearray(2 << 30)", Limits(memory_mb=128))
    assert ex.limit_hit == "memory" and ex.exit_code != 0


def test_output_flood_is_cut(docker_sandbox):
    ex = py(docker_sandbox, "while True: print('x' * 10000)", Limits(max_output_bytes=100_000))
    assert ex.limit_hit == "output" and ex.stdout_truncated and len(ex.stdout) <= 100_000


def test_process_limit(docker_sandbox):
    code = (
        "import os, time\nn = 0\nfor _ in range(200):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(5); os._exit(0)\n"
        "    n += 1\nprint(n)\n"
    )
    ex = py(docker_sandbox, code, Limits(max_processes=16))
    assert ex.exit_code == 0 and int(ex.stdout) < 16, ex  # the parent counts too


def test_no_network(docker_sandbox):
    code = (
        "import os, socket\nprint(sorted(os.listdir('/sys/class/net')))\n"
        "for host in ('127.0.0.1',):\n"
        "    try:\n        socket.create_connection((host, 2375), timeout=2)\n"
        "        print('reached', host)\n"
        "    except OSError:\n        pass\n"
    )
    assert py(docker_sandbox, code).stdout == b"['lo']\n"


@pytest.mark.parametrize("path", ["/etc/passwd", "/usr/x", "/tmp/x", "/x"])
def test_root_is_read_only(docker_sandbox, path):
    ex = py(docker_sandbox, f"open({path!r}, 'a')")
    assert ex.exit_code == 1 and (
        b"Read-only file system" in ex.stderr or b"Permission" in ex.stderr
    )


def test_host_files_are_invisible(docker_sandbox):
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="host-secret-") as fh:
        ex = py(
            docker_sandbox,
            f"import os; print(os.path.exists({fh.name!r}), os.path.exists('/work'))",
        )
    assert ex.stdout == b"False False\n"


def _stray_processes(sb) -> int:
    import docker.errors

    n = 0
    owned = {"label": f"tasksieve.owner={sb.pool._tag}", "status": "running"}
    for c in sb.pool.api.containers(filters=owned):
        try:
            procs = sb.pool.api.top(c["Id"])["Processes"] or []
        except (docker.errors.NotFound, docker.errors.APIError):
            continue  # removed (recycled) since it was listed: it runs nothing
        n += max(0, len(procs) - 3)  # minus server, zygote, writer
    return n


def test_nothing_left_running_after(docker_sandbox):
    ex = docker_sandbox.run({}, ["sh", "-c", "setsid sleep 60 >/dev/null 2>&1 & echo started"], L)
    assert ex.stdout == b"started\n"
    deadline = time.monotonic() + 20  # a recycled container is replaced in the background
    while _stray_processes(docker_sandbox) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _stray_processes(docker_sandbox) == 0


def test_pool_reuses_clean_containers(docker_sandbox):
    for worker in list(docker_sandbox.pool._workers):  # an earlier test's replacement, if any,
        worker.join(timeout=60)  # creates its container in the background: not this test's
    py(docker_sandbox, "pass")
    created = docker_sandbox.pool.created
    for _ in range(3):
        assert py(docker_sandbox, "pass").exit_code == 0
    assert docker_sandbox.pool.created == created


def test_pool_recycles_after_a_limit(docker_sandbox):
    before = docker_sandbox.pool.recycled
    py(docker_sandbox, "import time; time.sleep(30)", Limits(wall_s=0.5))
    assert docker_sandbox.pool.recycled == before + 1


def test_pool_recycles_when_files_are_left_outside_the_run_dir(docker_sandbox):
    before = docker_sandbox.pool.recycled
    py(docker_sandbox, "open('/scratch/leftover', 'w').write('x')")
    docker_sandbox.pool.flush()  # cleanup reports are read when a container is next used
    assert docker_sandbox.pool.recycled == before + 1


def test_describe(docker_sandbox):
    d = docker_sandbox.describe()
    assert d["backend"] == "docker" and d["image"] == docker_sandbox.image and d["pool_size"] == "3"


# ---------------------------------------------------------------------- the server protocol
def test_no_docker_exec_per_run(docker_sandbox):
    assert docker_sandbox.describe()["per_run_exec"] is False
    from tasksieve.verifiers.sandbox.docker.pool import WRITER_SOURCE

    execs = []
    real = docker_sandbox.pool.api.exec_create
    docker_sandbox.pool.api.exec_create = lambda *a, **k: execs.append(a) or real(*a, **k)
    try:
        for _ in range(3):
            assert py(docker_sandbox, "print(1)").stdout == b"1\n"
    finally:
        docker_sandbox.pool.api.exec_create = real
    assert all(cmd[-1] == WRITER_SOURCE for _, cmd in execs)  # only container starts (recycling)


FORGED = (
    b'x\x00\x00\x00\x0b{"code": 0}c\x00\x00\x00\x0c{"left": []}'  # server frames
    b"\x01\x00\x00\x00\x00\x00\x00\x05hello\x02\x00\x00\x00\x00\x00\x00\x01!"  # engine frames
    b"\x1e\x1f\x10\x11"  # detach keys (ours and the engine's default)
)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_run_output_cannot_forge_frames(docker_sandbox, stream):
    code = f"import sys; sys.{stream}.buffer.write({FORGED!r}); sys.{stream}.flush(); sys.exit(3)"
    ex = py(docker_sandbox, code)
    assert ex.exit_code == 3 and getattr(ex, stream) == FORGED, ex
    assert py(docker_sandbox, "print(1)").stdout == b"1\n"


def test_binary_stdin_round_trips(docker_sandbox):
    data = bytes(range(256)) * 64
    ex = py(
        docker_sandbox, "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())", stdin=data
    )
    assert ex.stdout == data


def test_run_cannot_reach_the_server(docker_sandbox):
    code = (
        "import os\nfor p in ('/proc/1/fd/1', '/proc/1/fd/0', '/proc/1/mem', '/proc/1/environ'):\n"
        "    try:\n        open(p, 'r+b' if 'fd' in p else 'rb').read(1); print('ESCAPED', p)\n"
        "    except OSError:\n        pass\n"
        "for sig in (2, 15, 9, 19):\n    try: os.kill(1, sig)\n    except OSError: pass\n"
        "print('done')\n"
    )
    assert py(docker_sandbox, code).stdout == b"done\n"
    assert py(docker_sandbox, "print(1)").stdout == b"1\n"


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[1, 2]",
        b'{"op": "bogus"}',
        b'{"op": "run", "argv": ["sh"], "env": {}, "cwd": "/etc", "rlimits": {}}',
        b'{"op": "run", "argv": [], "env": {}, "cwd": "/scratch/r-x", "rlimits": {}}',
        b'{"op": "run"}',
    ],
)
def test_server_answers_bad_lines_and_keeps_serving(docker_sandbox, line):
    from tasksieve.verifiers.sandbox.docker.sandbox import Limits as _L

    slot = docker_sandbox.pool.acquire(docker_sandbox._shape(_L()))
    try:
        slot.server.sock.sendall(line + b"\n")
        kind, payload = slot.server.recv(10)
        assert kind == b"!" and b"error" in payload
    finally:
        docker_sandbox.pool.release(slot, dirty=False)
    for _ in range(docker_sandbox.pool.size + 1):  # reaches that container too
        assert py(docker_sandbox, "print(1)").stdout == b"1\n"


def test_spawn_collects_files_at_the_end(docker_sandbox):
    proc = docker_sandbox.spawn(
        {}, [PY, "-c", "open('r.txt', 'w').write('ok')"], L, collect=("r.txt",)
    )
    try:
        assert proc.popen.wait(10) == 0
        assert proc.read_files(("r.txt",), 100) == {"r.txt": b"ok"}
    finally:
        proc.close()


# ---------------------------------------------------------------------- warm scripts
# A registered script whose warm_main() is what runs warm: it reports the namespace it was
# loaded in (``__warm__``, never ``__main__``) and a counter that each run finds at 0 (a
# private copy of the warm namespace per run).
WARM_SCRIPT = """import sys
LOADED_AS = __name__
CALLS = [0]

def warm_main():
    CALLS[0] += 1
    {body}

if __name__ == "__main__":
    print("fresh interpreter, warm_main not used")
"""
WARM_CASES = {
    "namespace": ("print(LOADED_AS, CALLS[0], sys.argv)", (0, "__warm__ 1 ['w.py', 'x']\n", "")),
    "exit": ("sys.exit(3)", (3, "", "")),
    "raise": ("raise ValueError('boom')", (1, "", "ValueError: boom")),
    "stdin": ("print(sys.stdin.read().upper())", (0, "IN\n", "")),
}


def _warm_run(sb, source: str):
    ex = sb.run({"w.py": source}, [sb.python, "-I", "-S", "w.py", "x"], L, stdin=b"in")
    err = ex.stderr.decode().strip().splitlines()
    return ex.exit_code, ex.stdout.decode(), err[-1] if err else ""


@pytest.mark.parametrize("case", sorted(WARM_CASES))
def test_warm_main_runs_as_on_the_process_backend(docker_sandbox, sandbox, case):
    if sandbox.describe().get("executor") != "forkserver":
        pytest.skip("the process backend runs warm scripts only on its fork server (root)")
    body, expected = WARM_CASES[case]
    source = WARM_SCRIPT.format(body=body)
    register_warm_script(source)  # after both backends started: each must pick it up
    results = {
        sb.name: [_warm_run(sb, source) for _ in range(2)] for sb in (docker_sandbox, sandbox)
    }
    assert results == {"docker": [expected] * 2, "process": [expected] * 2}


# Scripts whose exit status and stderr a warm run must reproduce byte for byte.
FRESH_CASES = {
    "raise": "raise ValueError('boom')",
    "nested": "def f():\n    return 1 / 0\nf()",
    "syntax": "def f(:",
    "exit_message": "import sys; sys.exit('bye')",
    "exit_code": "raise SystemExit(300)",
    "interrupt": "raise KeyboardInterrupt",
}


@pytest.mark.parametrize("case", sorted(FRESH_CASES))
def test_warm_run_stderr_matches_a_fresh_interpreter(docker_sandbox, case):
    code = FRESH_CASES[case]
    warm = docker_sandbox.run({}, [PY, "-I", "-S", "-c", code], L)  # runs in the warm server
    fresh = docker_sandbox.run({}, [PY, "-c", code], L)  # not warm-eligible: a fresh exec
    assert (warm.exit_code, warm.stderr) == (fresh.exit_code, fresh.stderr)


# ---------------------------------------------------------------------- the Python verifier
def _humaneval(n: int):
    from tests.verifiers.test_humaneval import PROBLEMS, _task

    return [(_task(p), p) for p in PROBLEMS[:: max(1, len(PROBLEMS) // n)][:n]]


@pytest.mark.parametrize("i", range(4))
def test_verifier_passes_canonical_and_fails_wrong(docker_sandbox, i):
    task, p = _humaneval(4)[i]
    verifier = PythonVerifier(docker_sandbox)
    assert verifier.verify(task, task.reference_solution).status == "pass"
    wrong = verifier.verify(task, p["prompt"] + "    return None\n")
    assert wrong.status == "fail" and wrong.tests_passed < wrong.tests_total


def test_verifier_timeout(docker_sandbox):
    task, _ = _humaneval(1)[0]
    slow = task.model_copy(update={"verifier": task.verifier.model_copy(update={"timeout_s": 1})})
    v = PythonVerifier(docker_sandbox).verify(
        slow, "def has_close_elements(*a):\n    while True: pass\n"
    )
    assert v.status == "timeout" and v.duration_s < 8, v


def test_missing_image_names_the_fix():
    pytest.importorskip("docker")
    from tasksieve.verifiers.sandbox.docker.sandbox import DockerSandbox

    with pytest.raises(RuntimeError, match=r"build-image|dockerd"):
        DockerSandbox(image="tasksieve-no-such-image:never")
