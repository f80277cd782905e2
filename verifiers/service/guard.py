"""The service's front door: the bearer token and the body size, checked before any body is read.

``Guard`` is a raw ASGI middleware around the whole application. For every HTTP request
but the public probes (``/healthz``, ``/metrics``) it checks ``Authorization: Bearer`` from
the headers alone and answers 401 without reading a byte of the body. It then bounds the
body by the endpoint's limit (``ServiceConfig.body_limit``): a ``Content-Length`` over it is
answered 413 at once; a body without one (chunked) is counted as it streams in and answered
413 as soon as it passes the limit, and the application sees a disconnect. So neither an
unauthenticated caller nor an authenticated one can make the server buffer or parse more
than the limit.

What it does NOT guard against: slow clients that trickle a body under the limit (the
server's connection timeouts bound them), a flood of small requests (no rate limit: put a
proxy in front for that), or a token holder's large-but-allowed requests.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC = frozenset({"/healthz", "/metrics"})
_SESSION_FILE = re.compile(r"^/sessions/[^/]+/files/.+$")
_SESSION_EXEC = re.compile(r"^/sessions/[^/]+/exec$")
_ENV_STEP = re.compile(r"^/v1/envs/[^/]+/step$")


def endpoint(method: str, path: str) -> str:
    """The endpoint whose body limit applies: ``verify``, ``trivial_solutions``, ``run_code``,
    ``sessions``, ``session_exec``, ``session_file``, ``envs``, ``env_step`` or ``other``."""
    if method == "POST" and path in ("/verify", "/trivial_solutions", "/run_code", "/sessions"):
        return path[1:]
    if method == "POST" and _SESSION_EXEC.match(path):
        return "session_exec"
    if method == "PUT" and _SESSION_FILE.match(path):
        return "session_file"
    if method == "POST" and path == "/v1/envs":
        return "envs"
    if method == "POST" and _ENV_STEP.match(path):
        return "env_step"
    return "other"


async def answer(
    send: Send, status: int, code: str, detail: str, headers: dict[str, str] | None = None
) -> None:
    """Send a whole JSON error response (``{"error": code, "detail": detail}``)."""
    body = json.dumps({"error": code, "detail": detail}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    raw.append((b"connection", b"close"))  # the rest of the body is not read
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Bearer token and per-endpoint body limits, from the headers, before the application."""

    def __init__(self, app: App, token: str | None, limit: Callable[[str], int]) -> None:
        self.app = app
        self.token = token.encode() if token is not None else None
        self.limit = limit

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        if self.token is None:
            return True
        scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given, self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        if scope["path"] not in PUBLIC and not self._authorized(headers):
            why = "a valid bearer token is required"
            await answer(send, 401, "unauthorized", why, {"WWW-Authenticate": "Bearer"})
            return
        which = endpoint(scope["method"], scope["path"])
        limit = self.limit(which)
        declared = headers.get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                await answer(send, 400, "bad_request", "Content-Length is not a number")
                return
            if int(declared) > limit:
                await answer(send, 413, "too_large", _too_large(which, limit))
                return
        await self._bounded(scope, receive, send, which, limit)

    async def _bounded(
        self, scope: Scope, receive: Receive, send: Send, which: str, limit: int
    ) -> None:
        """Run the application, cutting its body off with a 413 once past ``limit``."""
        state = {"received": 0, "started": False, "cut": False}

        async def counted() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not state["cut"]:
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["cut"] = True
                    if not state["started"]:
                        await answer(send, 413, "too_large", _too_large(which, limit))
                    return {"type": "http.disconnect"}
            return message

        async def sending(message: Message) -> None:
            if state["cut"]:
                return  # the 413 went out; what the application says after it is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except Exception:
            if not state["cut"]:
                raise  # the application's own failure; a cut body's aftermath is expected


def _too_large(which: str, limit: int) -> str:
    return f"the body of {which} requests is limited to {limit} bytes"
