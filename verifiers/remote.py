"""The client of the sandbox service: a ``remote`` sandbox backend and its verifier.

``RemoteSandbox`` is what ``make_sandbox("remote", urls=...)`` returns. It declares the
``whole_verifications`` capability, so ``get_verifier`` hands every family to
``RemoteVerifier``, which sends whole (task, solution) pairs to ``POST /verify``; the
verdict is the one the service's own verifier gives. ``RemoteSandbox.run`` goes through
``/run_code`` (bash) for code that needs a plain run.

``ServiceClient`` spreads requests over the URLs (round robin from a random start). One
request's attempts walk one failover order, every server once before any twice (servers
that refused a connection or answered 502/503 in the last 2 s go last). Connection failures,
429 and 500/502/503/504 are retried under ``SERVICE_RETRY`` (``tasksieve.verifiers.http_retry``:
exponential backoff with full jitter; a ``Retry-After`` in seconds or as an HTTP date is
honoured up to 60 s), and one ``Idempotency-Key`` travels with every attempt of a logical
request, so a retry that reaches a server which already ran the request gets the first answer.
The token comes from the environment variable named by ``token_env`` (default
``TASKSIEVE_SERVICE_TOKEN``).

Not guarded against: a request that a server ran and then died before answering is run
again on the next server (the servers do not share their idempotency stores).
"""

from __future__ import annotations

import base64
import json
import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.http_retry import (
    Failure,
    HttpRetryPolicy,
    RetriesExhausted,
    call_with_retries,
    status_failure,
)
from tasksieve.verifiers.sandbox.base import (
    Capabilities,
    Execution,
    Limits,
    Sandbox,
    SandboxUnavailable,
)

TOKEN_ENV = "TASKSIEVE_SERVICE_TOKEN"
RETRYABLE = frozenset({429, 500, 502, 503, 504})  # not 409: an idempotency-key conflict
SERVICE_RETRY = HttpRetryPolicy(
    max_attempts=8, base_s=0.1, cap_s=5.0, max_retry_after_s=60.0, retry_status=RETRYABLE
)
"""The client's retries: 8 attempts, backoff from 0.1 s up to 5 s, Retry-After up to 60 s."""


class RemoteError(RuntimeError):
    """The service refused the request (4xx other than 429), or every attempt failed."""


class ServiceClient:
    """Thread-safe JSON client over several service URLs with retries and failover."""

    def __init__(
        self,
        urls: tuple[str, ...],
        token: str | None = None,
        priority: str = "curation",
        timeout_s: float = 600.0,
        policy: HttpRetryPolicy = SERVICE_RETRY,
        client_id: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not urls:
            raise ValueError("the remote sandbox needs at least one service URL")
        import urllib3

        self.urls = tuple(u.rstrip("/") for u in urls)
        self.priority = priority
        self.policy = policy
        self.sleep = sleep
        self.client_id = client_id or f"{os.uname().nodename}:{os.getpid()}"
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        # urllib3 rather than a richer client: the per-request CPU is a cost the fleet pays
        # on every verification (see benchmarks/service_load.py).
        self._http = urllib3.PoolManager(
            maxsize=64, timeout=urllib3.Timeout(connect=5.0, read=timeout_s), retries=False
        )
        self._errors = (urllib3.exceptions.HTTPError, OSError)
        self._next = random.randrange(len(self.urls))
        self._down_until: dict[str, float] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._http.clear()

    def order(self) -> list[str]:
        """The URLs one request tries, in turn: every server once, starting at the next in
        the round robin, ones marked down last; attempt ``i`` goes to ``order[i % len]``."""
        with self._lock:
            start = self._next
            self._next = (self._next + 1) % len(self.urls)
        order = list(self.urls[start:] + self.urls[:start])
        now = time.monotonic()
        return sorted(order, key=lambda u: self._down_until.get(u, 0.0) > now)

    def post(self, path: str, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """POST ``body`` as JSON and return the JSON answer, retrying as the module says."""
        headers = {
            **self._headers,
            "Idempotency-Key": key or uuid.uuid4().hex,
            "X-Priority": self.priority,
            "X-Client-Id": self.client_id,
        }
        payload = json.dumps(body).encode()
        order = self.order()  # once per request, so its retries visit every server
        tried = [0]

        def attempt() -> dict[str, Any]:
            url = order[tried[0] % len(order)]
            tried[0] += 1
            try:
                resp = self._http.request("POST", url + path, body=payload, headers=headers)
            except self._errors as exc:
                self._down_until[url] = time.monotonic() + 2.0
                raise Failure(f"{url}: {type(exc).__name__}: {exc}", True) from exc
            if resp.status < 400:
                answer: dict[str, Any] = json.loads(resp.data)
                return answer
            text = f"{url}: HTTP {resp.status}: {resp.data[:300].decode('utf-8', 'replace')}"
            if resp.status in (502, 503):
                self._down_until[url] = time.monotonic() + 2.0
            raise status_failure(self.policy, resp.status, text, resp.headers.get("Retry-After"))

        try:
            answer, _ = call_with_retries(attempt, self.policy, sleep=self.sleep)
        except RetriesExhausted as exc:
            if not exc.last.retryable:
                raise RemoteError(exc.last.message) from exc
            raise RemoteError(
                f"gave up after {exc.attempts.attempts} attempts; last: {exc.last.message}"
            ) from exc
        return answer


def server_identity(urls: tuple[str, ...], timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """What each server says it runs (``/healthz``: tasksieve version and sandbox backend),
    sorted, for keys of cached verdicts; ``{"unreachable": True}`` for one that does not
    answer (so a verdict is never keyed as if it came from a known server)."""
    import urllib.request

    out: list[dict[str, Any]] = []
    for url in urls:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/healthz", timeout=timeout_s) as resp:
                facts = json.loads(resp.read(65536))
            out.append({"version": str(facts.get("version")), "backend": str(facts.get("backend"))})
        except (OSError, ValueError, AttributeError):
            out.append({"unreachable": True})
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True))


class RemoteSandbox(Sandbox):
    """The ``remote`` backend: the sandbox service reached over HTTP."""

    name = "remote"
    capabilities = Capabilities(whole_verifications=True)
    python = "python3"

    def __init__(
        self, urls: tuple[str, ...], token_env: str = TOKEN_ENV, priority: str = "curation"
    ) -> None:
        token = os.environ.get(token_env, "").strip() or None
        try:
            self.client = ServiceClient(urls, token=token, priority=priority)
        except ImportError as exc:
            raise SandboxUnavailable(
                "the remote sandbox needs urllib3: pip install 'tasksieve[serve]'"
            ) from exc
        self.urls = urls

    def describe(self) -> dict[str, str | bool]:
        return {"backend": self.name, "urls": ",".join(self.urls)}

    def run(
        self,
        files: dict[str, bytes | str],
        command: list[str],
        limits: Limits,
        stdin: bytes = b"",
        collect: tuple[str, ...] = (),
    ) -> Execution:
        """Run ``command`` through ``/run_code`` as a bash script (``python3`` is the
        service's interpreter). Only the wall and memory limits travel (run_code's fields);
        the others are the server's defaults, and ``limit_hit`` is ``wall`` or None."""
        import shlex

        encoded = {
            n: base64.b64encode(c.encode() if isinstance(c, str) else c).decode("ascii")
            for n, c in files.items()
        }
        body = {
            "language": "bash",
            "code": "exec " + shlex.join(command) + "\n",
            "stdin": stdin.decode("utf-8", "replace"),
            "files": encoded,
            "fetch_files": list(collect),
            "run_timeout": limits.wall_s,
            "memory_limit_MB": limits.memory_mb,
        }
        try:
            answer = self.client.post("/run_code", body)
        except RemoteError as exc:
            return Execution(None, b"", b"", 0.0, infra_error=str(exc))
        result = answer.get("run_result") or {}
        if answer.get("status") == "SandboxError":
            return Execution(None, b"", b"", 0.0, infra_error=answer.get("message") or "sandbox")
        timed_out = result.get("status") == "TimeLimitExceeded"
        return Execution(
            exit_code=result.get("return_code"),
            stdout=(result.get("stdout") or "").encode(),
            stderr=(result.get("stderr") or "").encode(),
            duration_s=float(result.get("execution_time") or 0.0),
            limit_hit="wall" if timed_out else None,
            files={n: base64.b64decode(d) for n, d in (answer.get("files") or {}).items()},
        )

    def close(self) -> None:
        self.client.close()


class RemoteVerifier(Verifier):
    """Judges (task, solution) pairs on the service; never raises for a bad solution."""

    def __init__(self, sandbox: Sandbox, family: str) -> None:
        if not isinstance(sandbox, RemoteSandbox):
            raise TypeError("RemoteVerifier needs a RemoteSandbox")
        super().__init__(sandbox)
        self.remote = sandbox
        self.family = family
        self._reference_s: dict[tuple[str, int], float] = {}
        self._trivial: dict[tuple[str, int], list[str]] = {}

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        body: dict[str, Any] = {"task": task.model_dump(mode="json"), "solution": solution}
        ref = self._reference_s.get((task.id, hash(task.reference_solution)))
        if ref:
            body["reference_s"] = ref
        try:
            answer = self.remote.client.post("/verify", body)
        except RemoteError as exc:
            return Verdict(status="infra_error", detail=f"sandbox service: {exc}")
        answer.pop("task_id", None)
        return Verdict.model_validate(answer)

    def calibrate(self, task: TaskRecord, reference_s: float) -> None:
        """Remember the reference runtime; every later verify of the task sends it along."""
        key = (task.id, hash(task.reference_solution))
        self._reference_s[key] = max(self._reference_s.get(key, 0.0), reference_s)

    def trivial_solutions(self, task: TaskRecord) -> list[str]:
        """The service's verifier's trivial solutions (asked once per task)."""
        key = (task.id, hash(task.reference_solution))
        if key not in self._trivial:
            try:
                answer = self.remote.client.post(
                    "/trivial_solutions", {"task": task.model_dump(mode="json")}
                )
            except RemoteError:
                return [""]
            self._trivial[key] = list(answer["solutions"])
        return self._trivial[key]
