"""Several samples of one task in one fork-server entry: each sample's verdict is its own.

Hostile samples (hang, CPU spin, crash, fork bomb, a daemon left behind, files left in /tmp,
a full scratch, attempts on the tests process and on other samples) sit between honest ones
in one ``verify_many`` call on the real fork server. The honest samples must pass, each
hostile one must get the verdict it gets alone, and ``probe`` samples (honest only if nothing
of an earlier sample is visible) must pass right after each hostile one. No sample may fall
back to a lone run, so the multi-sample entry is what is tested.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tasksieve.schemas import TaskRecord
from tasksieve.verifiers.families.python.verifier import PythonVerifier
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

TASK = TaskRecord(
    id="multi",
    family="code",
    prompt="add two numbers",
    reference_solution="def add(a, b):\n    return a + b\n",
    verifier={
        "family": "code",
        "style": "check",
        "entry_point": "add",
        "timeout_s": 1,
        "test_code": "def check(candidate):\n"
        "    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
        "    assert candidate(5, 5) == 10\n",
    },
)
GOOD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
# Honest only when no process, file, directory or SysV IPC object of an earlier sample is
# visible here, and the sample's own directory is its cwd, HOME and TMPDIR.
PROBE = """
import os
def add(a, b):
    mine = os.getcwd()
    left = [n for n in os.listdir('/tmp') if n.startswith('left')]
    ipc = [k for k in ('shm', 'sem', 'msg') if len(open('/proc/sysvipc/' + k).readlines()) > 1]
    own = os.environ.get('HOME') == mine == os.environ.get('TMPDIR')
    ok = not left and not ipc and mine.startswith('/tmp/c') and own
    return a + b if ok else -999
"""
HOSTILE = {
    # SysV objects anyone may open (mode 0666, fixed keys) outlive the sample's processes
    # unless the entry removes them (first: its probe
    # must share its entry, and an entry holds at most eight samples).
    "sysv": (
        "import ctypes\nlibc = ctypes.CDLL(None)\n"
        "ids = [libc.shmget(0x7473, 4096, 0o1666), libc.semget(0x7474, 2, 0o1666),\n"
        "       libc.msgget(0x7475, 0o1666)]\n"
        "def add(a, b):\n    return a + b if min(ids) >= 0 else -1\n",
        "pass",
    ),
    "spin": ("def add(a, b):\n    while True:\n        pass\n", "timeout"),
    "sleep": ("import time\ndef add(a, b):\n    time.sleep(60)\n", "timeout"),
    "crash_load": ("import os\nos._exit(3)\n", "error"),
    "crash_call": ("import os\ndef add(a, b):\n    os._exit(4)\n", "fail"),
    "fork_bomb": (
        "import os\nif os.fork() == 0:\n    while True:\n        try:\n            os.fork()\n"
        "        except OSError:\n            pass\n" + GOOD,
        "pass",
    ),
    # A daemon that outlives its sample would keep writing /tmp/left-late after the clean-up.
    "daemon": (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    while True:\n"
        "        open('/tmp/left-late', 'w').close()\n        time.sleep(0.01)\n"
        "open('/tmp/left-file', 'w').write('x')\nos.mkdir('/tmp/left-dir')\n" + GOOD,
        "pass",
    ),
    "fill_scratch": (
        "try:\n    with open('/tmp/left-big', 'wb') as fh:\n"
        "        while True:\n            fh.write(b'x' * (1 << 20))\nexcept OSError:\n"
        "    pass\n" + GOOD,
        "pass",
    ),
    # Tampering: signal every pid, write into other samples' and the tests' directories,
    # read the tests; none of it may work, so the sample is judged on its (honest) add.
    "tamper": (
        "import os, signal\nhits = []\nfor pid in range(1, 400):\n"
        "    if pid != os.getpid():\n        try:\n            os.kill(pid, signal.SIGKILL)\n"
        "            hits.append(pid)\n        except OSError:\n            pass\n"
        "dirs = ['/tmp/.t'] + ['/tmp/c%d' % i for i in range(40)]\n"
        "dirs = [d for d in dirs if d != os.getcwd() and os.path.isdir(d)]\n"
        "for p in ['/tmp/.t/tests.json', '/tmp/harness.py'] + [d + '/solution.py' for d in dirs]:\n"
        "    try:\n        open(p, 'a').write('x')\n        hits.append(p)\n"
        "    except OSError:\n        pass\n"
        "for d in dirs:\n    try:\n        os.listdir(d)\n"
        "        hits.append(d)\n    except OSError:\n        pass\n"
        "def add(a, b):\n    return a + b if not hits else -len(hits)\n",
        "pass",
    ),
}


@pytest.fixture(scope="module")
def counted(verifier: PythonVerifier) -> Iterator[tuple[PythonVerifier, list[str]]]:
    """The shared verifier, with every lone ``verify`` call recorded."""
    alone: list[str] = []
    real = verifier.verify

    def verify(task: TaskRecord, solution: str):  # type: ignore[no-untyped-def]
        alone.append(solution)
        return real(task, solution)

    verifier.verify = verify  # type: ignore[method-assign]
    try:
        yield verifier, alone
    finally:
        del verifier.verify


def test_hostile_samples_affect_only_their_own_verdicts(
    sandbox: ProcessSandbox, counted: tuple[PythonVerifier, list[str]]
) -> None:
    if not sandbox.capabilities.paired_runs:
        pytest.skip("needs the fork server (bubblewrap; root or subordinate uids)")
    verifier, alone = counted
    names = list(HOSTILE)
    sols = [GOOD]
    for name in names:
        sols += [HOSTILE[name][0], PROBE]
    sols.append(WRONG)
    verdicts = verifier.verify_many(TASK, sols)
    assert alone == [], "a sample fell back to a lone run"
    got = [v.status for v in verdicts]
    assert got[0] == "pass", verdicts[0]
    for k, name in enumerate(names):
        hostile, probe = verdicts[1 + 2 * k], verdicts[2 + 2 * k]
        assert hostile.status == HOSTILE[name][1], (name, hostile)
        assert probe.status == "pass", (f"probe after {name}", probe)
    assert got[-1] == "fail" and verdicts[-1].tests_passed == 0 and verdicts[-1].tests_total == 3


def test_same_verdicts_as_lone_runs(
    sandbox: ProcessSandbox, counted: tuple[PythonVerifier, list[str]]
) -> None:
    if not sandbox.capabilities.paired_runs:
        pytest.skip("needs the fork server (bubblewrap; root or subordinate uids)")
    verifier, alone = counted
    sols = [GOOD, WRONG, "def add(a, b):\n    return 3\n", "syntax error(", HOSTILE["spin"][0]]
    many = verifier.verify_many(TASK, sols)
    n = len(alone)
    single = [verifier.verify(TASK, s) for s in sols]
    assert len(alone) == n + len(sols)
    for m, s in zip(many, single, strict=True):
        assert (m.status, m.tests_passed, m.tests_total) == (
            s.status,
            s.tests_passed,
            s.tests_total,
        )
        assert [c.passed for c in m.checks] == [c.passed for c in s.checks]


def test_without_the_fork_server_each_sample_runs_alone() -> None:
    box = ProcessSandbox(warm=False)
    try:
        verifier = PythonVerifier(box)
        assert [v.status for v in verifier.verify_many(TASK, [GOOD, WRONG])] == ["pass", "fail"]
    finally:
        box.close()
