"""The service's settings, checked at construction, and where its bearer token comes from."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

TOKEN_ENV = "TASKSIEVE_SERVICE_TOKEN"
SESSION_MODES = ("auto", "live", "packed")
LOOPBACK_NAMES = ("localhost",)
BODY_LIMITS: dict[str, int] = {  # endpoint -> the largest request body it reads, bytes
    "verify": 8_000_000,
    "trivial_solutions": 8_000_000,
    "run_code": 16_000_000,
    "sessions": 16_384,
    "session_exec": 8_000_000,
    "envs": 8_000_000,
    "env_step": 1_000_000,
    "other": 16_384,
}
"""Default body limits; a session file upload (``session_file``) is bounded by the session
size limit instead (``session_max_bytes``)."""


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServiceConfig:
    """How one server runs: its sandbox, its queue and workers, sessions, auth.

    ``token`` is the bearer token clients must send; None only with ``insecure_no_auth``,
    which is refused unless ``host`` is a loopback address. ``body_limits`` overrides entries
    of ``BODY_LIMITS`` (pairs of endpoint, bytes). ``max_memory_mb`` bounds the memory any
    request may ask for (run_code, sessions, a task's verifier spec); ``max_reference_s``
    bounds the reference runtime a verify request may bring (its time limits scale with it).
    """

    host: str = "127.0.0.1"
    port: int = 8080
    backend: str = "process"
    allow_weak_isolation: bool = False
    workers: int = 2
    max_queue: int = 256
    infra_retries: int = 2
    default_deadline_s: float | None = None
    token: str | None = None
    insecure_no_auth: bool = False
    session_ttl_s: float = 600.0
    max_session_ttl_s: float = 3600.0
    max_sessions: int = 64
    session_max_bytes: int = 32_000_000
    reap_interval_s: float = 1.0
    idempotency_ttl_s: float = 600.0
    idempotency_max: int = 100_000
    journal_path: str | None = None  # one JSON line per finished job (key, kind), for audits
    body_limits: tuple[tuple[str, int], ...] = ()
    max_memory_mb: int = 16_384
    max_reference_s: float = 30.0
    session_mode: str = "auto"
    """``live`` (workspaces), ``packed`` (files packed per exec) or ``auto`` (live where the
    sandbox opens workspaces)."""
    max_session_lifetime_s: float = 3600.0
    snapshot_store: str | None = None
    """The repo snapshot store the Gym endpoints (``/v1/envs``) open tasks from."""
    max_envs_per_client: int = 8

    def __post_init__(self) -> None:
        if self.backend == "remote":
            raise ValueError("a server cannot use the remote backend; choose process or docker")
        if self.workers < 1 or self.max_queue < 1:
            raise ValueError(f"need --workers >= 1 and --max-queue >= 1, got {self}")
        if self.infra_retries < 0 or self.infra_retries > 10:
            raise ValueError(f"need 0 <= --infra-retries <= 10, got {self.infra_retries}")
        if self.session_ttl_s <= 0 or self.max_session_ttl_s < self.session_ttl_s:
            raise ValueError("need 0 < --session-ttl <= --max-session-ttl")
        if self.session_mode not in SESSION_MODES:
            raise ValueError(
                f"--session-mode must be one of {', '.join(SESSION_MODES)}, got "
                f"{self.session_mode!r}"
            )
        if not self.max_session_lifetime_s > 0 or self.max_envs_per_client < 1:
            raise ValueError("need --max-session-lifetime > 0 and --max-envs-per-client >= 1")
        if self.max_sessions < 0 or self.session_max_bytes < 1:
            raise ValueError("need --max-sessions >= 0 and a positive session size limit")
        for name, size in self.body_limits:
            if name not in BODY_LIMITS or size < 1:
                raise ValueError(
                    f"--max-body {name}={size}: need ENDPOINT=BYTES with BYTES >= 1 and ENDPOINT"
                    f" one of {', '.join(BODY_LIMITS)}"
                )
        if not 16 <= self.max_memory_mb <= 1_048_576:
            raise ValueError(f"need 16 <= --max-memory-mb <= 1048576, got {self.max_memory_mb}")
        if not 0 < self.max_reference_s <= 3600:
            raise ValueError(f"need 0 < --max-reference-s <= 3600, got {self.max_reference_s}")
        if self.default_deadline_s is not None and self.default_deadline_s <= 0:
            raise ValueError(f"need --default-deadline > 0, got {self.default_deadline_s}")
        if self.insecure_no_auth:
            if not is_loopback(self.host):
                raise ValueError(
                    f"--insecure-no-auth is only allowed on a loopback address, not {self.host!r};"
                    f" set {TOKEN_ENV} (or --token-file) to serve on other interfaces"
                )
            if self.token:
                raise ValueError("give a token or --insecure-no-auth, not both")
        elif not self.token:
            raise ValueError(
                f"no bearer token: set {TOKEN_ENV} or pass --token-file FILE "
                "(or --insecure-no-auth on a loopback address for local use)"
            )

    def body_limit(self, endpoint: str) -> int:
        """The largest body ``endpoint`` reads (see ``tasksieve.verifiers.service.guard``)."""
        if endpoint == "session_file":
            return self.session_max_bytes
        return dict(self.body_limits).get(endpoint, BODY_LIMITS.get(endpoint, BODY_LIMITS["other"]))


def read_token(token_file: str | None, env: str = TOKEN_ENV) -> str | None:
    """The token from ``token_file`` (first line) or the environment variable ``env``."""
    if token_file:
        with open(token_file, encoding="utf-8") as fh:
            token = fh.readline().strip()
        if not token:
            raise ValueError(f"token file {token_file} is empty")
        return token
    value = os.environ.get(env, "").strip()
    return value or None
