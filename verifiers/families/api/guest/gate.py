"""The API harness's gate: which requests reach moto, and the log of the candidate's calls.

Runs inside the sandbox (standard library only; inlined into the harness by
``tasksieve.verifiers.sandbox.guest.bundle``). ``Gate`` wraps moto's WSGI app: a request
passes only when it is SigV4-signed for s3, sqs or logs and is not for moto's own control
paths (``/moto-api``, ``/latest/``); anything else gets 403. During the candidate's phase it
records each call (time, service, a best-effort operation name, method, path, status), up to
``MAX_CALLS``.

It does NOT check signatures (the credentials are fake; a signed scope is only a label), nor
name every operation exactly (``_operation`` guesses S3 operations from method and query).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

ALLOWED_SERVICES = frozenset({"s3", "sqs", "logs"})
MAX_CALLS = 2000

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
