"""``tasksieve serve``: run the sandbox service (verify, run_code, sessions) over HTTP.

The top level imports the standard library only (the CLI builds its parser from here); the
service and uvicorn come in when the command runs. The token is read from
``$TASKSIEVE_SERVICE_TOKEN`` or ``--token-file``, never from the command line.
"""

from __future__ import annotations

import argparse
import sys

from tasksieve.pipeline.flags.shared import positive_int

TOKEN_ENV = (
    "TASKSIEVE_SERVICE_TOKEN"  # the same name as tasksieve.verifiers.service.config.TOKEN_ENV
)

_EPILOG = f"""\
endpoints: POST /verify, POST /run_code (SandboxFusion-shaped), POST /trivial_solutions,
/sessions (create, exec, files, delete), /v1/envs (Gym-style agent environments: create,
step, delete), GET /healthz, GET /metrics (Prometheus).
auth: every endpoint but /healthz and /metrics needs "Authorization: Bearer TOKEN"; the
token comes from ${TOKEN_ENV} or --token-file. --insecure-no-auth serves without one, on a
loopback address only.
headers: X-Priority (training|interactive|curation|batch; default curation), X-Deadline-S
(finite seconds > 0), X-Client-Id, Idempotency-Key.
limits: bodies over --max-body get 413 before they are read; memory over --max-memory-mb
and reference runtimes over --max-reference-s get 422.
exit status: 0 stopped cleanly (SIGTERM: drained, then the signal's own status),
2 bad flags or no usable sandbox
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``serve`` sub-command."""
    p = sub.add_parser(
        "serve",
        help="run the sandbox service: verification, run_code and sessions over HTTP",
        description="Serve sandboxed verification to curate workers and trainers.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--sandbox", default="process", help="sandbox backend (default: process)")
    p.add_argument("--allow-weak-isolation", action="store_true")
    p.add_argument(
        "--workers", type=positive_int, default=2, help="sandbox jobs run at once (default 2)"
    )
    p.add_argument(
        "--max-queue", type=positive_int, default=256, help="jobs that may wait (then 429)"
    )
    p.add_argument("--infra-retries", type=int, default=2, help="reruns of an infra error")
    p.add_argument(
        "--default-deadline", type=float, default=None, help="seconds a job may wait to start"
    )
    p.add_argument("--token-file", help=f"file whose first line is the token (else ${TOKEN_ENV})")
    p.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve without a token (loopback addresses only)",
    )
    p.add_argument("--session-ttl", type=float, default=600.0, help="idle seconds (default 600)")
    p.add_argument("--max-session-ttl", type=float, default=3600.0)
    p.add_argument("--max-sessions", type=int, default=64)
    p.add_argument(
        "--session-max-bytes",
        type=positive_int,
        default=32_000_000,
        help="bytes of files one session may hold (default 32000000)",
    )
    p.add_argument(
        "--max-body",
        action="append",
        default=[],
        metavar="ENDPOINT=BYTES",
        help="largest request body of an endpoint (verify, trivial_solutions, run_code, "
        "sessions, session_exec, other); repeat for several",
    )
    p.add_argument(
        "--max-memory-mb",
        type=positive_int,
        default=16_384,
        help="the most memory any request may ask for (default 16384; more: 422)",
    )
    p.add_argument(
        "--max-reference-s",
        type=float,
        default=30.0,
        help="the largest reference runtime a verify request may bring (default 30; more: 422)",
    )
    p.add_argument(
        "--session-mode",
        choices=["auto", "live", "packed"],
        default="auto",
        help="live: sessions are workspaces with a persistent shell; packed: files packed in and "
        "out per exec; auto (default): live where the sandbox opens workspaces",
    )
    p.add_argument(
        "--max-session-lifetime",
        type=float,
        default=3600.0,
        help="hard lifetime of a live session or env, seconds (default 3600)",
    )
    p.add_argument(
        "--snapshot-store",
        default=None,
        help="repo snapshot store the Gym endpoints /v1/envs open tasks from "
        "(default $TASKSIEVE_SNAPSHOT_STORE)",
    )
    p.add_argument(
        "--max-envs-per-client",
        type=positive_int,
        default=8,
        help="Gym envs one client (X-Client-Id, else its address) may hold (default 8)",
    )
    p.add_argument("--journal", help="append one JSON line per finished keyed job (audits)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])


def _body_limit(value: str) -> tuple[str, int]:
    name, sep, size = value.partition("=")
    if not sep or not size.strip().isdigit():
        raise ValueError(f"--max-body wants ENDPOINT=BYTES, got {value!r}")
    return name.strip(), int(size)


def run(args: argparse.Namespace) -> int:
    """Build the config (errors: one line, exit 2) and serve until stopped."""
    import os

    from tasksieve.transforms.agent.gym_api import add_gym_routes
    from tasksieve.verifiers import SandboxUnavailable
    from tasksieve.verifiers.service.config import ServiceConfig, read_token
    from tasksieve.verifiers.service.server import serve

    try:
        token = None if args.insecure_no_auth else read_token(args.token_file)
        cfg = ServiceConfig(
            host=args.host,
            port=args.port,
            backend=args.sandbox,
            allow_weak_isolation=args.allow_weak_isolation,
            workers=args.workers,
            max_queue=args.max_queue,
            infra_retries=args.infra_retries,
            default_deadline_s=args.default_deadline,
            token=token,
            insecure_no_auth=args.insecure_no_auth,
            session_ttl_s=args.session_ttl,
            max_session_ttl_s=args.max_session_ttl,
            max_sessions=args.max_sessions,
            session_max_bytes=args.session_max_bytes,
            body_limits=tuple(_body_limit(v) for v in args.max_body),
            max_memory_mb=args.max_memory_mb,
            max_reference_s=args.max_reference_s,
            journal_path=args.journal,
            session_mode=args.session_mode,
            max_session_lifetime_s=args.max_session_lifetime,
            snapshot_store=args.snapshot_store or os.environ.get("TASKSIEVE_SNAPSHOT_STORE"),
            max_envs_per_client=args.max_envs_per_client,
        )
        serve(cfg, log_level=args.log_level, extensions=[add_gym_routes])
    except (ValueError, OSError, SandboxUnavailable) as exc:
        print(f"tasksieve serve: error: {exc}", file=sys.stderr)
        return 2
    return 0
