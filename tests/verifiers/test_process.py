"""The process sandbox holds its limits: time, memory, output, network, files, processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
import time
import uuid

import pytest

from tasksieve.verifiers.sandbox.base import Limits
from tasksieve.verifiers.sandbox.process.runs import warm_job
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.process.userns import server_prefix

FAST = Limits(wall_s=5, cpu_s=3, memory_mb=256)


def py(sb: ProcessSandbox, code: str) -> list[str]:
    return [sb.python, "-I", "-S", "-c", code]


def test_runs_command_with_files_and_stdin(sandbox):
    ex = sandbox.run(
        {"in.txt": "hi"},
        py(sandbox, "import sys;print(open('in.txt').read(), sys.stdin.read())"),
        FAST,
        stdin=b"there",
    )
    assert ex.exit_code == 0 and ex.stdout == b"hi there\n" and ex.limit_hit is None


def test_describe_names_backend_and_isolation(sandbox):
    d = sandbox.describe()
    assert d["backend"] == "process" and d["isolation"] in ("bwrap", "unshare-mount")
    assert d["weak"] is False and d["executor"] in ("forkserver", "per-run")


def test_busy_loop_is_stopped(sandbox):
    ex = sandbox.run({}, py(sandbox, "while True: pass"), Limits(wall_s=2, cpu_s=1))
    assert ex.limit_hit in ("cpu", "wall") and ex.duration_s < 4


def test_sleep_hits_wall_limit(sandbox):
    t = time.monotonic()
    ex = sandbox.run({}, py(sandbox, "import time; time.sleep(60)"), Limits(wall_s=1))
    assert ex.limit_hit == "wall" and ex.exit_code is None and time.monotonic() - t < 3


def test_memory_bomb_is_stopped(sandbox):
    ex = sandbox.run({}, py(sandbox, "x = bytearray(2 * 1024**3)"), FAST)
    assert ex.exit_code != 0 and ex.limit_hit == "memory"


def test_output_flood_is_truncated(sandbox):
    lim = Limits(wall_s=5, max_output_bytes=10_000)
    ex = sandbox.run({}, py(sandbox, "import sys\nwhile True: sys.stdout.write('x' * 4096)"), lim)
    assert ex.limit_hit == "output" and ex.stdout_truncated and len(ex.stdout) == 10_000


def test_no_network_not_even_host_loopback(sandbox):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    code = (
        f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 2)\n"
        " print('CONNECTED')\nexcept OSError as e: print('blocked', e)\n"
        "names = {n for _, n in socket.if_nameindex()}\n"  # the way out, checked without sending
        "print('CONNECTED', names) if names - {'lo'} else print('blocked')"
    )
    ex = sandbox.run({}, py(sandbox, code), FAST)
    srv.close()
    assert b"CONNECTED" not in ex.stdout and ex.stdout.count(b"blocked") == 2


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize(
    "path",
    [
        "/etc/shadow",
        "/etc/passwd",
        "/home",
        os.path.abspath(__file__),
        os.path.join(REPO, "README.md"),
        os.path.join(REPO, ".git"),
    ],
)
def test_cannot_read_host_files(sandbox, path):
    code = (
        f"import os\np={path!r}\ntry:\n print(os.listdir(p) if os.path.isdir(p) else "
        "open(p).read()[:50])\nexcept OSError as e: print('denied', type(e).__name__)"
    )
    ex = sandbox.run({}, py(sandbox, code), FAST)
    assert ex.stdout.startswith(b"denied"), ex.stdout


@pytest.mark.parametrize("host_dir", ["/root", "/home", "/work"])
def test_host_dirs_show_only_the_interpreter_path(sandbox, host_dir):
    visible = [sandbox.python, sys.base_prefix]
    if sys.prefix != sys.base_prefix:  # a virtualenv's packages are bound read-only
        visible += [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    allowed = {
        os.path.realpath(p).split("/")[len(host_dir.split("/"))]
        for p in visible
        if os.path.realpath(p).startswith(host_dir + "/")
    }
    code = f"import os\ntry: print(sorted(os.listdir({host_dir!r})))\nexcept OSError: print([])"
    ex = sandbox.run({}, py(sandbox, code), FAST)
    assert set(eval(ex.stdout)) <= allowed, ex.stdout


@pytest.mark.parametrize("path", ["/usr/evil", "/etc/evil", "/evil", "in.txt"])
def test_cannot_write_outside_scratch_or_inputs(sandbox, path):
    code = (
        f"try:\n open({path!r}, 'w').write('x'); print('WROTE')\n"
        "except OSError as e: print('denied', e)"
    )
    ex = sandbox.run({"in.txt": "ro"}, py(sandbox, code), FAST)
    assert ex.stdout.startswith(b"denied"), ex.stdout


def test_can_write_scratch_and_collect(sandbox):
    ex = sandbox.run(
        {},
        py(sandbox, "open('out.txt', 'w').write('done')"),
        FAST,
        collect=("out.txt", "missing.txt"),
    )
    assert ex.files == {"out.txt": b"done"}


def test_collect_does_not_follow_symlinks(sandbox):
    ex = sandbox.run(
        {},
        py(sandbox, "import os; os.symlink('/etc/hostname', 'out.txt')"),
        FAST,
        collect=("out.txt",),
    )
    assert ex.files == {}


def test_disk_fill_is_bounded(sandbox):
    code = "import os\nfor i in range(1000):\n open(f'f{i}', 'wb').write(os.urandom(1 << 20))"
    ex = sandbox.run({}, py(sandbox, code), Limits(wall_s=10, scratch_mb=8))
    assert ex.exit_code != 0 and ex.limit_hit == "file_size"


def test_fork_bomb_is_contained(sandbox):
    code = (
        "import os\nn = 0\ntry:\n while True:\n  if os.fork() == 0:\n   import time; "
        "time.sleep(30); os._exit(0)\n  n += 1\nexcept OSError: print('capped', n)"
    )
    ex = sandbox.run({}, py(sandbox, code), Limits(wall_s=5, max_processes=16))
    assert ex.stdout.startswith(b"capped") and int(ex.stdout.split()[1]) < 16


def test_sees_only_its_own_processes(sandbox):
    ex = sandbox.run(
        {},
        py(sandbox, "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"),
        FAST,
    )
    assert len(eval(ex.stdout)) <= 4


def _alive_with(token: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if token.encode() in fh.read():
                    found.append(pid)
        except OSError:
            pass
    return found


@pytest.mark.parametrize("wall", [1.0, 10.0])
def test_nothing_left_running(sandbox, wall):
    token = uuid.uuid4().hex
    code = (
        "import os, subprocess, sys\n"
        f"for _ in range(3): subprocess.Popen(['/bin/sleep', '300', '{token}'],"
        " start_new_session=True)\n"
        "if os.fork() == 0: os.setsid(); import time; time.sleep(300)\n"
        f"import time; time.sleep({wall * 3})"
    )
    sandbox.run({}, py(sandbox, code), Limits(wall_s=wall) if wall < 5 else FAST)
    time.sleep(0.2)
    assert _alive_with(token) == []


def test_env_is_cleared(sandbox, monkeypatch):
    monkeypatch.setenv("TASKSIEVE_SECRET", "s3cret")
    ex = sandbox.run({}, py(sandbox, "import os; print(dict(os.environ))"), FAST)
    assert b"s3cret" not in ex.stdout


def test_warm_runs_get_exactly_the_job_environment_and_their_own_random_state(sandbox):
    code = "import json, os, random; print(json.dumps(list(os.environ.items())), random.random())"
    runs = [sandbox.run({}, py(sandbox, code), FAST).stdout.decode().rsplit(" ", 1) for _ in "ab"]
    want = list(warm_job([], FAST)["env"].items())
    assert [[tuple(kv) for kv in json.loads(env)] for env, _ in runs] == [want, want]
    assert runs[0][1] != runs[1][1]  # a fork's generator is seeded anew, as a fresh one's


def test_weak_mode_needs_opt_in():
    with pytest.raises(ValueError, match="allow_weak_isolation"):
        ProcessSandbox(isolation="none")


def test_weak_mode_says_so():
    with pytest.warns(RuntimeWarning, match="WEAK ISOLATION"):
        sb = ProcessSandbox(isolation="none", allow_weak_isolation=True)
    assert sb.describe()["weak"] is True and sb.describe()["filesystem_isolated"] is False
    assert sb.run({}, py(sb, "print(1)"), FAST).stdout == b"1\n"


def test_unshare_fallback_runs_and_isolates_network():
    try:
        sb = ProcessSandbox(isolation="unshare")
    except RuntimeError as e:
        pytest.skip(f"unshare cannot create namespaces here: {e}")
    ex = sb.run(
        {},
        py(
            sb,
            "import socket\nnames = {n for _, n in socket.if_nameindex()}\n"
            "print('reachable', names) if names - {'lo'} else print('blocked')",
        ),
        FAST,
    )
    d = sb.describe()
    assert ex.stdout == b"blocked\n" and d["isolation"] == "unshare-mount"
    assert d["filesystem_isolated"] is True and d["weak"] is False


@pytest.mark.parametrize("name", ["/abs", "../up", "a/../../b", ""])
def test_rejects_escaping_file_names(sandbox, name):
    with pytest.raises(ValueError):
        sandbox.run({name: "x"}, ["/bin/true"], FAST)


def test_warm_fork_server_is_used_where_it_can_start(sandbox):
    prefix, why = server_prefix(os.geteuid() == 0, sandbox.tools.unshare)
    if prefix is None or sandbox.tools.bwrap is None:  # unprivileged without subordinate uids
        pytest.skip(f"no fork server here: {why or 'no bubblewrap'}")
    d = sandbox.describe()
    assert d["executor"] == "forkserver" and d["seccomp"] is True


def test_per_run_fallback_still_works():
    sb = ProcessSandbox(warm=False)
    assert sb.describe()["executor"] == "per-run"
    ex = sb.run({"in.txt": "x"}, py(sb, "print(open('in.txt').read())"), FAST)
    assert ex.stdout == b"x\n"


def test_each_run_gets_its_own_uid_and_pid_namespace(sandbox):
    code = "import os; print(os.getuid(), os.getpid())"
    a, b = (sandbox.run({}, py(sandbox, code), FAST).stdout.split() for _ in range(2))
    if sandbox.describe()["executor"] == "forkserver":  # root, or unprivileged with subuids
        assert a[0] != b[0] and int(a[0]) >= 1000
    assert int(a[1]) <= 3 and int(b[1]) <= 3


def test_seccomp_refuses_namespace_and_ptrace_calls(sandbox):
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), libc.ptrace(16, 1, 0, 0), ctypes.get_errno())"
    )
    ex = sandbox.run({}, py(sandbox, code), FAST)
    assert ex.stdout.split()[:2] == [b"-1", b"-1"], ex


def test_warm_run_exit_codes_and_tracebacks_match_a_fresh_interpreter(sandbox):
    assert sandbox.run({}, py(sandbox, "import sys; sys.exit(3)"), FAST).exit_code == 3
    ex = sandbox.run({}, py(sandbox, "raise ValueError('boom')"), FAST)
    assert ex.exit_code == 1 and b"ValueError: boom" in ex.stderr
    ex = sandbox.run(
        {"s.py": "import sys; print(sys.argv)"}, [sandbox.python, "-I", "-S", "s.py", "x"], FAST
    )
    assert ex.stdout == b"['s.py', 'x']\n"


# Scripts whose exit status and stderr a warm run must reproduce byte for byte.
FRESH_CASES = {
    "raise": "raise ValueError('boom')",
    "nested": "def f():\n    return 1 / 0\nf()",
    "syntax": "def f(:",
    "exit_message": "import sys; sys.exit('bye')",
    "exit_code": "raise SystemExit(300)",
    "interrupt": "raise KeyboardInterrupt",
    # exit joins a thread the script left running, then runs atexit, as a fresh one does
    "thread": "import sys, threading, time\n"
    "def late():\n    time.sleep(0.2)\n    sys.stderr.write('late\\n')\n"
    "threading.Thread(target=late).start()",
    "atexit": "import atexit, sys; atexit.register(lambda: sys.stderr.write('bye\\n'))",
}


@pytest.mark.parametrize("case", sorted(FRESH_CASES))
def test_warm_run_stderr_matches_a_fresh_interpreter(sandbox, case):
    argv = py(sandbox, FRESH_CASES[case])
    fresh = subprocess.run(argv, capture_output=True, timeout=30)
    code = fresh.returncode if fresh.returncode >= 0 else 128 - fresh.returncode  # as bwrap's
    ex = sandbox.run({}, argv, FAST)
    assert (ex.exit_code, ex.stderr) == (code, fresh.stderr)
