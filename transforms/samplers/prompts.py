"""Chat messages for a sampling request: a short family-aware instruction plus the prompt."""

from __future__ import annotations

import hashlib
import json

from tasksieve.transforms.samplers.config import SampleRequest

_SYSTEM: dict[str, str] = {
    "code": (
        "You are an expert Python programmer. Solve the task. Reply with the complete "
        "solution in one ```python code block."
    ),
    "api": (
        "You are an expert Python programmer who uses boto3 for AWS S3, SQS and CloudWatch "
        "Logs. Write a complete Python program for the task. Reply with it in one ```python "
        "code block."
    ),
    "sql": (
        "You are an expert in SQL (DuckDB dialect). Write one query that answers the "
        "question. Reply with it in one ```sql code block."
    ),
    "config": (
        "You are an expert in configuration files. Write the complete file the task asks "
        "for. Reply with it in one ```yaml code block, or one ```json code block if JSON is "
        "asked for."
    ),
    "repo": (
        "You are an expert software engineer. Fix the issue in the repository. Reply with a "
        "unified diff (--- a/path, +++ b/path, @@ hunks) in one ```diff code block; do not "
        "change the tests."
    ),
}
_FALLBACK = "Solve the task. Reply with the answer in one fenced code block."


def system_instruction(family: str, entry_point: str | None = None) -> str:
    """The system instruction for a family (a generic one for an unknown family)."""
    text = _SYSTEM.get(family, _FALLBACK)
    if family == "code" and entry_point:
        text += f" Define a function named `{entry_point}`."
    return text


def render_messages(req: SampleRequest) -> list[dict[str, str]]:
    """Chat messages: a system instruction asking for one fenced block, then the prompt,
    then (later turns of an episode) the conversation so far."""
    return [
        {
            "role": "system",
            "content": req.system or system_instruction(req.family, req.entry_point),
        },
        {"role": "user", "content": req.prompt},
        *({"role": role, "content": content} for role, content in req.history),
    ]


def prompt_hash(messages: list[dict[str, str]]) -> str:
    """sha256 of the chat messages as canonical JSON: equal hashes, equal prompts.

    It hashes the messages, not the model's templated text, so it is the same across models
    and servers; a template change on the server side does not change it.
    """
    blob = json.dumps(messages, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
