"""The action protocol: fenced replies, tool calls, submit, protocol errors, truncation."""

from __future__ import annotations

import json

import pytest

from tasksieve.transforms.agent.protocol import (
    TOOL_NAMES,
    TOOLS,
    observe,
    parse_reply,
    parse_tool_call,
    truncate,
)
from tasksieve.verifiers.sandbox.workspace import CommandResult


def test_one_bash_block_is_one_command() -> None:
    action = parse_reply("I will look.\n```bash\nls -la src\n```\nthen read.")
    assert (action.kind, action.command) == ("run", "ls -la src")


@pytest.mark.parametrize("text", ["```bash\nsubmit\n```", "```sh\necho TASKSIEVE_SUBMIT\n```"])
def test_submit_forms(text: str) -> None:
    assert parse_reply(text).kind == "submit"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("no block at all", 0),
        ("```python\nprint(1)\n```", 0),
        ("```bash\nls\n```\n```bash\npwd\n```", 2),
    ],
)
def test_zero_or_several_blocks_are_protocol_errors(text: str, found: int) -> None:
    action = parse_reply(text)
    assert action.kind == "invalid"
    assert f"found {found}" in action.error


def test_tools_have_json_schemas() -> None:
    assert TOOL_NAMES == ("run_command", "view_file", "replace_in_file", "submit")
    for tool in TOOLS:
        assert tool["function"]["parameters"]["type"] == "object"


def test_tool_calls_parse() -> None:
    run = parse_tool_call("run_command", json.dumps({"command": "pytest -q"}), "c1")
    assert (run.kind, run.command, run.call_id) == ("run", "pytest -q", "c1")
    view = parse_tool_call("view_file", '{"path": "a.py", "start_line": 3}')
    assert (view.kind, view.path, view.start_line) == ("view", "a.py", 3)
    rep = parse_tool_call("replace_in_file", '{"path": "a.py", "old": "x", "new": ""}')
    assert (rep.kind, rep.old, rep.new) == ("replace", "x", "")
    assert parse_tool_call("submit", "").kind == "submit"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("rm_rf", "{}"),
        ("run_command", "not json"),
        ("run_command", "[1]"),
        ("run_command", '{"command": 3}'),
        ("view_file", '{"path": "a", "start_line": 0}'),
    ],
)
def test_bad_tool_calls_are_protocol_errors(name: str, args: str) -> None:
    assert parse_tool_call(name, args).kind == "invalid"


def test_truncation_keeps_head_and_tail_and_says_how_much() -> None:
    data = b"A" * 600 + b"B" * 400
    text, cut = truncate(data, 100)
    assert cut
    assert text.startswith("A" * 50 + "\n[... 900 bytes elided ...]\n")
    assert text.endswith("B" * 50)
    assert truncate(b"short", 100) == ("short", False)


def test_truncation_survives_a_split_character() -> None:
    text, cut = truncate("é".encode() * 100, 11)
    assert cut and "\ufffd" in text


def test_observation_names_exit_code_and_why_it_ended() -> None:
    res = CommandResult(None, b"partial", b"err", 5.0, ended="wall")
    text, _ = observe(res, 1000)
    assert text.splitlines()[0] == "exit code: none"
    assert "time limit" in text and "partial" in text and "err" in text
