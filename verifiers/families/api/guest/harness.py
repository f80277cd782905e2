"""Sandbox side of the API verifier: moto server, seeding, the candidate, final-state dump.

Run inside the sandbox as ``python -I -S api_harness.py`` with ``api_config.json`` and
``solution.py`` beside it and a nonce line on stdin. It makes itself non-dumpable (so the
candidate, same uid, can neither ptrace it nor open its ``/proc/<pid>/fd`` or ``mem``),
serves S3/SQS/Logs with moto on 127.0.0.1 behind a gate that only lets signed s3/sqs/logs
requests through (``/moto-api`` and everything else gets 403) and records the candidate's
calls, seeds the initial state through boto3, runs the candidate in its own session with
fake credentials, kills it (and, in a pid namespace, every other process it can signal),
then reads the final state back through the API and prints one JSON line tagged with the
nonce. It only reports data; the parent compares with the expected state. The gate
(``gate``) and the read-back (``state``) are guest modules of their own, inlined here by
``tasksieve.verifiers.sandbox.guest.bundle``: the verifier sends ``bundle()`` of this file.

It does NOT guard against: the candidate killing this process (same uid; the parent sees no
result line and says so), the candidate exhausting memory or disk that this process also
needs, or moto behaving differently from AWS.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from tasksieve.verifiers.families.api.guest.gate import ALLOWED_SERVICES, Gate
from tasksieve.verifiers.families.api.guest.state import read_state

# Third-party modules this guest may import inside the sandbox: the host's site-packages,
# bound read-only (``Capabilities.site_packages``); the test of the layout reads this.
GUEST_REQUIRES = ("boto3", "botocore", "moto", "werkzeug")

REGION = "us-east-1"
FAKE_KEY = "testing"
TAIL_BYTES = 2000
_CANDIDATE_LIMITS = """
import os, resource, sys
mem, cpu = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
os.execv(sys.argv[4], sys.argv[4:])
"""


def _no_dump() -> None:
    """Make this process non-dumpable (PR_SET_DUMPABLE = 4) or fail."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _emit(nonce: str, event: str, **data: Any) -> None:
    sys.stdout.write(json.dumps({"nonce": nonce, "event": event, **data}) + "\n")
    sys.stdout.flush()


def _start_server(gate_factory: Callable[[Any], Gate]) -> tuple[Gate, int]:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class Quiet(MotoRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    gate = gate_factory(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, gate, threaded=True, request_handler=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return gate, int(server.server_port)


def _clients(endpoint: str) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id=FAKE_KEY, aws_secret_access_key=FAKE_KEY, region_name=REGION
    )
    cfg = Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=30)
    return {s: session.client(s, endpoint_url=endpoint, config=cfg) for s in ALLOWED_SERVICES}


def seed(c: dict[str, Any], initial: dict[str, Any]) -> None:
    """Create the task's buckets, objects, queues, messages and log groups."""
    for bucket, objects in initial.get("buckets", {}).items():
        c["s3"].create_bucket(Bucket=bucket)
        for key, body in objects.items():
            c["s3"].put_object(Bucket=bucket, Key=key, Body=body.encode("utf-8"))
    queues = list(initial.get("queues", []))
    queues += [q for q in initial.get("queue_messages", {}) if q not in queues]
    for q in queues:
        attrs = (
            {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
            if q.endswith(".fifo")
            else {}
        )
        url = c["sqs"].create_queue(QueueName=q, Attributes=attrs)["QueueUrl"]
        for body in initial.get("queue_messages", {}).get(q, []):
            extra = {"MessageGroupId": "seed"} if q.endswith(".fifo") else {}
            c["sqs"].send_message(QueueUrl=url, MessageBody=body, **extra)
    for group in initial.get("log_groups", []):
        c["logs"].create_log_group(logGroupName=group)


def run_candidate(cfg: dict[str, Any], endpoint: str) -> dict[str, Any]:
    """Run solution.py in its own session under the time budget; return how it ended."""
    site = os.pathsep.join(cfg["site_paths"])
    cwd = os.getcwd()  # the sandbox's scratch dir
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": cwd,
        "TMPDIR": cwd,
        "LANG": "C.UTF-8",
        "PYTHONPATH": site,
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": FAKE_KEY,
        "AWS_SECRET_ACCESS_KEY": FAKE_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    py = cfg["python"]
    mem = int(cfg["candidate_memory_mb"]) * 1024 * 1024
    cpu = max(1, int(cfg["timeout_s"]) + 1)
    cmd = [py, "-I", "-S", "-c", _CANDIDATE_LIMITS, str(mem), str(cpu), "--", py, "-s"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [*cmd, "solution.py"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            close_fds=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=float(cfg["timeout_s"]))
        except subprocess.TimeoutExpired:
            timed_out = True
        duration = time.monotonic() - t0
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if cfg.get("kill_all"):  # own pid namespace: take down anything that left the group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(-1, signal.SIGKILL)
        proc.wait()
        return {
            "exit_code": proc.returncode,
            "timed_out": timed_out,
            "duration_s": round(duration, 3),
            "stdout_tail": _tail(out),
            "stderr_tail": _tail(err),
        }


def _tail(f: Any) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - TAIL_BYTES))
    return f.read().decode("utf-8", errors="replace")


def main() -> int:
    """Seed, run, read back; print one nonce-tagged JSON line per phase."""
    nonce = sys.stdin.readline().strip()
    try:
        _no_dump()
        # Our own boto3 must not read config or service models the candidate could write.
        os.environ.update(
            HOME="/proc/nonexistent",
            AWS_CONFIG_FILE="/dev/null",
            AWS_SHARED_CREDENTIALS_FILE="/dev/null",
            AWS_EC2_METADATA_DISABLED="true",
        )
        os.environ.pop("AWS_DATA_PATH", None)
        with open("api_config.json", encoding="utf-8") as f:
            cfg = json.load(f)
        sys.path[:0] = list(cfg["site_paths"])
        t0 = time.monotonic()
        gate, port = _start_server(Gate)
        endpoint = f"http://127.0.0.1:{port}"
        clients = _clients(endpoint)
        seed(clients, cfg["initial"])
        t_seed = time.monotonic() - t0
    except Exception:
        _emit(nonce, "infra_error", detail=traceback.format_exc()[-1500:])
        return 3
    _emit(nonce, "ready")
    gate.t0 = time.monotonic()
    gate.phase = "candidate"
    try:
        cand = run_candidate(cfg, endpoint)
    except Exception:
        _emit(nonce, "infra_error", detail=traceback.format_exc()[-1500:])
        return 3
    gate.phase = "read"
    t1 = time.monotonic()
    state, errors = read_state(clients)
    _emit(
        nonce,
        "result",
        candidate=cand,
        state=state,
        read_errors=errors,
        calls=gate.calls,
        calls_dropped=gate.dropped,
        calls_denied=gate.denied,
        timings={"start_and_seed_s": round(t_seed, 3), "read_s": round(time.monotonic() - t1, 3)},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
