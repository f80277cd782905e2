"""``POST /run_code``: SandboxFusion's shape, and hostile programs contained as in-process."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.service.runcode import RunCodeRequest, run_code
from tests.service.servers import Server

README = repr(str(Path(__file__).resolve().parents[2] / "README.md"))


@pytest.fixture(scope="module")
def local() -> Iterator[ProcessSandbox]:
    sandbox = ProcessSandbox()
    yield sandbox
    sandbox.close()


def test_python_with_stdin_and_files_in_and_out(server: Server) -> None:
    code = (
        "import sys\nprint(open('in.txt').read() + sys.stdin.read())\n"
        "open('out.txt','w').write('o')"
    )
    body = {
        "code": code,
        "language": "python",
        "stdin": "-stdin",
        "files": {"in.txt": base64.b64encode(b"file").decode()},
        "fetch_files": ["out.txt"],
        "run_timeout": 10,
    }
    got = server.post("/run_code", body).json()
    assert got["status"] == "Success" and got["compile_result"] is None
    run = got["run_result"]
    assert run["status"] == "Finished" and run["return_code"] == 0
    assert run["stdout"] == "file-stdin\n" and run["stderr"] == ""
    assert isinstance(run["execution_time"], float)
    assert base64.b64decode(got["files"]["out.txt"]) == b"o"


def test_bash_failure_is_failed_with_its_exit_code(server: Server) -> None:
    got = server.post("/run_code", {"code": "echo hi >&2; exit 3", "language": "bash"}).json()
    assert got["status"] == "Failed"
    assert got["run_result"]["return_code"] == 3 and got["run_result"]["stderr"] == "hi\n"


@pytest.mark.parametrize(
    "body",
    [
        {"code": "x", "language": "cobol"},
        {"code": "x", "files": {"a.txt": "%%% not base64"}},
        {"code": "x", "files": {"../escape.txt": ""}},
        {"code": "x", "fetch_files": ["/etc/passwd"]},
        {"code": "x", "run_timeout": 0},
        {"language": "python"},
    ],
    ids=["language", "base64", "file_escape", "fetch_absolute", "timeout", "no_code"],
)
def test_bad_requests_are_refused(server: Server, body: dict[str, Any]) -> None:
    assert server.post("/run_code", body).status_code in (400, 422)


def _loopback_port() -> int:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    _loopback_port.keep = srv  # type: ignore[attr-defined]
    return int(srv.getsockname()[1])


HOSTILE = {
    "fork_bomb": (
        "import os\nn = 0\ntry:\n while True:\n  if os.fork() == 0:\n   import time; "
        "time.sleep(30); os._exit(0)\n  n += 1\nexcept OSError: print('capped')",
        lambda r: "capped" in (r["run_result"]["stdout"] or ""),
    ),
    "network": (
        "import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 2)\n"
        " print('CONNECTED')\nexcept OSError: print('blocked')",
        lambda r: r["run_result"]["stdout"] == "blocked\n",
    ),
    "host_files": (
        "import os\nfor p in ('/etc/shadow', '/home', {readme!r}):\n try:\n"
        "  print(os.listdir(p) if os.path.isdir(p) else open(p).read()[:20])\n"
        " except OSError: print('denied')",
        lambda r: r["run_result"]["stdout"] == "denied\ndenied\ndenied\n",
    ),
    "sleep_forever": (
        "import time\ntime.sleep(3600)",
        lambda r: r["status"] == "Failed" and r["run_result"]["status"] == "TimeLimitExceeded",
    ),
    "memory_bomb": (
        "x = bytearray(4 * 1024**3)\nprint('allocated')",
        lambda r: r["status"] == "Failed" and "allocated" not in r["run_result"]["stdout"],
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_program_is_contained_as_in_process(
    server: Server, local: ProcessSandbox, name: str
) -> None:
    source, contained = HOSTILE[name]
    code = source.replace("{port}", str(_loopback_port())).replace("{readme!r}", README)
    body = {"code": code, "run_timeout": 2, "memory_limit_MB": 256}
    remote = server.post("/run_code", body).json()
    here = run_code(local, RunCodeRequest.model_validate(body)).model_dump()
    assert contained(here), here  # the in-process sandbox holds it...
    assert contained(remote), remote  # ...and so does the service
    assert remote["status"] == here["status"]
