"""Sandbox side of the API verifier: moto server, seeding, the candidate, final-state dump.

Run inside the sandbox as ``python -I -S api_harness.py`` with ``api_config.json`` and
``solution.py`` beside it and a nonce line on stdin. It makes itself non-dumpable (so the
candidate, same uid, can neither ptrace it nor open its ``/proc/<pid>/fd`` or ``mem``),
serves S3/SQS/Logs with moto on 127.0.0.1 behind a gate that only lets signed s3/sqs/logs
requests through (``/moto-api`` and everything else gets 403) and records the candidate's
calls, seeds the initial state through boto3, runs the candidate in its own session with
fake credentials, kills it (and, in a pid namespace, every other process it can signal),
then reads the final state back through the API and prints one JSON line tagged with the
nonce. It only reports data; the parent compares with the expected state.

It does NOT guard against: the candidate killing this process (same uid; the parent sees no
result line and says so), the candidate exhausting memory or disk that this process also
needs, or moto behaving differently from AWS.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

# Third-party modules this guest may import inside the sandbox: the host's site-packages,
# bound read-only (``Capabilities.site_packages``); the test of the layout reads this.
GUEST_REQUIRES = ("boto3", "botocore", "moto", "werkzeug")

REGION = "us-east-1"
FAKE_KEY = "testing"
ALLOWED_SERVICES = frozenset({"s3", "sqs", "logs"})
MAX_CALLS = 2000
MAX_OBJECTS = 5000
MAX_OBJECT_BYTES = 16_000_000
MAX_TOTAL_BYTES = 64_000_000
MAX_MESSAGES = 5000
MAX_EVENTS = 10000
PREVIEW_CHARS = 2000
TAIL_BYTES = 2000
_CANDIDATE_LIMITS = """
import os, resource, sys
mem, cpu = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
os.execv(sys.argv[4], sys.argv[4:])
"""

Start = Callable[[str, list[tuple[str, str]]], Any]


class Gate:
    """WSGI middleware: lets signed s3/sqs/logs calls through and logs the candidate's."""

    def __init__(self, app: Callable[[dict[str, Any], Start], Iterable[bytes]]) -> None:
        self.app = app
        self.phase = "seed"
        self.t0 = time.monotonic()
        self.calls: list[dict[str, Any]] = []
        self.dropped = 0
        self.denied = 0
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start: Start) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        service = _signing_service(environ)
        call: dict[str, Any] | None = None
        if self.phase == "candidate":
            call = {
                "t": round(time.monotonic() - self.t0, 3),
                "service": service or "?",
                "op": _operation(service, environ),
                "method": environ.get("REQUEST_METHOD", ""),
                "path": path[:200],
            }
        allowed = service in ALLOWED_SERVICES and not path.startswith(("/moto-api", "/latest/"))

        def start_logged(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            if call is not None:
                call["status"] = int(status.split(" ", 1)[0])
            return start(status, headers, *exc)

        if call is not None:
            with self.lock:
                if len(self.calls) < MAX_CALLS:
                    self.calls.append(call)
                else:
                    self.dropped += 1
        if not allowed:
            with self.lock:
                self.denied += 1
            start_logged("403 Forbidden", [("Content-Type", "text/plain")])
            return [b"denied by the tasksieve harness: only signed s3/sqs/logs API calls\n"]
        return self.app(environ, start_logged)


def _signing_service(environ: dict[str, Any]) -> str | None:
    """The service named in a SigV4 credential scope (header or presigned query)."""
    auth = str(environ.get("HTTP_AUTHORIZATION", ""))
    cred = ""
    if "Credential=" in auth:
        cred = auth.split("Credential=", 1)[1].split(",", 1)[0]
    else:
        cred = parse_qs(str(environ.get("QUERY_STRING", ""))).get("X-Amz-Credential", [""])[0]
    parts = cred.strip().split("/")
    return parts[3].lower() if len(parts) == 5 else None


def _operation(service: str | None, environ: dict[str, Any]) -> str:
    """A best-effort operation name: X-Amz-Target for JSON APIs, method and shape for S3."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        return target.rsplit(".", 1)[-1]
    if service != "s3":
        return "?"
    method = str(environ.get("REQUEST_METHOD", ""))
    parts = [p for p in str(environ.get("PATH_INFO", "")).split("/", 2)[1:] if p]
    query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
    if not parts:
        return "ListBuckets" if method == "GET" else f"{method} /"
    if "delete" in query and method == "POST":
        return "DeleteObjects"
    level = "Object" if len(parts) > 1 else "Bucket"
    if method == "PUT" and level == "Object" and "HTTP_X_AMZ_COPY_SOURCE" in environ:
        return "CopyObject"
    listing = {
        "list-type",
        "prefix",
        "delimiter",
        "marker",
        "max-keys",
        "encoding-type",
        "continuation-token",
        "start-after",
        "fetch-owner",
    }
    if method == "GET" and level == "Bucket" and not query.keys() - listing:
        return "ListObjectsV2" if "list-type" in query else "ListObjects"
    verb = {"PUT": "Put", "GET": "Get", "HEAD": "Head", "DELETE": "Delete"}.get(method, method)
    sub = "".join(k.capitalize() for k in sorted(query) if k.isalpha())[:40]
    if level == "Bucket" and method == "PUT" and not sub:
        return "CreateBucket"
    return f"{verb}{level}{sub}"


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


def read_s3(s3: Any) -> dict[str, Any]:
    """Every bucket's objects as sha256, size and a text preview (capped in number)."""
    buckets: dict[str, dict[str, Any]] = {}
    seen, truncated, budget = 0, False, [MAX_TOTAL_BYTES]
    for b in s3.list_buckets().get("Buckets", []):
        name = b["Name"]
        objs: dict[str, Any] = {}
        buckets[name] = objs
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for o in page.get("Contents", []):
                if seen >= MAX_OBJECTS:
                    truncated = True
                    break
                seen += 1
                objs[o["Key"]] = _object(s3, name, o["Key"], int(o.get("Size", 0)), budget)
    return {"buckets": buckets, "truncated": truncated}


def _object(s3: Any, bucket: str, key: str, size: int, budget: list[int]) -> dict[str, Any]:
    """One object's digest and preview; not read (sha256 None) past the size caps."""
    if size > MAX_OBJECT_BYTES or size > budget[0]:
        return {"size": size, "sha256": None, "preview": "(not read: over the size cap)"}
    budget[0] -= size
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    text = data[: PREVIEW_CHARS * 4].decode("utf-8", errors="replace")[:PREVIEW_CHARS]
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "preview": text}


def read_sqs(sqs: Any) -> dict[str, Any]:
    """Every queue's readable messages in receive order plus counts of unreadable ones."""
    queues: dict[str, Any] = {}
    urls: list[str] = []
    for page in sqs.get_paginator("list_queues").paginate():
        urls += page.get("QueueUrls", [])
    for url in urls:
        name = url.rstrip("/").rsplit("/", 1)[-1]
        keys = ["ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=keys)["Attributes"]
        hidden = sum(int(attrs.get(k, 0)) for k in keys)
        bodies: list[str] = []
        while len(bodies) < MAX_MESSAGES:
            msgs = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=43200, WaitTimeSeconds=0
            ).get("Messages", [])
            if not msgs:
                break
            bodies += [m["Body"] for m in msgs]
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)
            ]
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        queues[name] = {
            "messages": bodies,
            "hidden": hidden,
            "truncated": len(bodies) >= MAX_MESSAGES,
        }
    return {"queues": queues}


def read_logs(logs: Any) -> dict[str, Any]:
    """Every log group's events over all streams, ordered by timestamp (capped)."""
    groups: dict[str, Any] = {}
    for page in logs.get_paginator("describe_log_groups").paginate():
        for g in page.get("logGroups", []):
            groups[g["logGroupName"]] = _group_events(logs, g["logGroupName"])
    return {"groups": groups}


def _group_events(logs: Any, group: str) -> dict[str, Any]:
    events: list[tuple[int, int, int, str]] = []
    streams: list[str] = []
    for page in logs.get_paginator("describe_log_streams").paginate(logGroupName=group):
        streams += [s["logStreamName"] for s in page.get("logStreams", [])]
    for si, stream in enumerate(streams):
        token: str | None = None
        while len(events) < MAX_EVENTS:
            kw: dict[str, Any] = {"logGroupName": group, "logStreamName": stream}
            kw.update({"nextToken": token} if token else {"startFromHead": True})
            resp = logs.get_log_events(**kw)
            for e in resp.get("events", []):
                events.append((int(e.get("timestamp", 0)), si, len(events), e["message"]))
            nxt = resp.get("nextForwardToken")
            if not resp.get("events") or not nxt or nxt == token:
                break
            token = nxt
    events.sort()
    return {"messages": [e[3] for e in events[:MAX_EVENTS]], "truncated": len(events) >= MAX_EVENTS}


def read_state(c: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The final state of all three services, and an error text per service that failed."""
    state: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, reader in (("s3", read_s3), ("sqs", read_sqs), ("logs", read_logs)):
        try:
            state[name] = reader(c[name])
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"[:500]
    return state, errors


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
