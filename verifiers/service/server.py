"""Run one server: the app on uvicorn, bound where ``ServiceConfig`` says."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tasksieve.verifiers.service.config import ServiceConfig, is_loopback

if TYPE_CHECKING:
    from tasksieve.verifiers.service.app import Extension

log = logging.getLogger(__name__)


def serve(
    cfg: ServiceConfig, log_level: str = "warning", extensions: Sequence[Extension] = ()
) -> None:
    """Serve until interrupted; SIGTERM drains (answers in-flight requests, then exits).
    ``extensions`` add routes (``app.Extension``)."""
    import uvicorn

    from tasksieve.verifiers.service.app import create_app

    if not is_loopback(cfg.host):
        log.warning("serving on %s: every client that can reach it needs the token", cfg.host)
    uvicorn.run(
        create_app(cfg, extensions=extensions),
        host=cfg.host,
        port=cfg.port,
        log_level=log_level,
        timeout_graceful_shutdown=60,
        access_log=False,
    )
