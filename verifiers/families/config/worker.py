"""The config verifier's worker process: ``python -m tasksieve.verifiers.families.config.worker``.

Speaks the ``config.workers`` protocol on stdin/stdout, one JSON object per line:

- ``{"op": "judge", "spec": "<ConfigSpec JSON>", "solution": "..."}`` ->
  ``{"ok": true, "verdict": {...}}`` (a ``Verdict`` as JSON);
- ``{"op": "bare", "spec": "<ConfigSpec JSON>", "reference": "..."}`` ->
  ``{"ok": true, "texts": [...]}`` (``judge.bare_documents``);
- anything that goes wrong outside the judgement -> ``{"ok": false, "error": "..."}``.

Specs arrive as JSON text and are parsed once per distinct text; validators are kept by the
modules that build them, so a warm worker pays for a task's schema only on first use.
Everything a library prints goes to stderr: stdout carries the protocol only.

It does NOT guard against: its own time or memory (the host kills it when a request overruns).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import IO, Any

from tasksieve.schemas import ConfigSpec
from tasksieve.verifiers.families.config.judge import bare_documents, judge


@functools.lru_cache(maxsize=128)
def _spec(text: str) -> ConfigSpec:
    return ConfigSpec.model_validate_json(text)


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The answer to one request (never raises)."""
    try:
        spec = _spec(request["spec"])
        if request.get("op") == "judge":
            verdict = judge(spec, request["solution"])
            return {"ok": True, "verdict": verdict.model_dump(mode="json")}
        if request.get("op") == "bare":
            return {"ok": True, "texts": bare_documents(spec, request["reference"])}
        return {"ok": False, "error": f"unknown op {request.get('op')!r}"}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """Answer request lines until EOF."""
    answers.write(b'{"ready": true}\n')
    answers.flush()
    for line in requests:
        try:
            request = json.loads(line)
        except ValueError as e:
            reply: dict[str, Any] = {"ok": False, "error": f"unreadable request: {e}"}
        else:
            reply = answer(request) if isinstance(request, dict) else {"ok": False, "error": "?"}
        answers.write(json.dumps(reply).encode("utf-8") + b"\n")
        answers.flush()


def main() -> None:
    """Keep the real stdout for the protocol and send stray prints to stderr."""
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, protocol)


if __name__ == "__main__":
    main()
