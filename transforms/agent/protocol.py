"""The agent's action protocol: replies parsed into actions, observations truncated by a rule.

Two protocols, one set of actions (``Action``):

- text (any chat model, as mini-SWE-agent does): a reply holds exactly one fenced block tagged
  ``bash``, ``sh`` or ``shell`` with one command; a block whose text is ``submit`` or
  ``echo TASKSIEVE_SUBMIT`` ends the episode. A reply with no such block or several is a
  protocol error: nothing runs, the error text is the observation, and the episode counts it.
- tools (endpoints with OpenAI tool calling): ``run_command``, ``view_file``,
  ``replace_in_file`` and ``submit`` (``TOOLS``, JSON schemas). A call to an unknown tool, or
  with arguments that are not a JSON object of the right fields, is a protocol error.

Truncation rule (``truncate``): an observation's body is cut to at most ``cap`` bytes of the
command's output: the first ``cap // 2`` bytes and the last ``cap - cap // 2`` bytes, with one
line between them saying how many bytes were elided (the marker itself is not counted); bytes
are decoded as UTF-8 with replacement characters where a cut splits a character.

What it does NOT do: understand shell syntax (a block is run as the shell sees it, several
commands joined by ``&&`` included) or stop a model from claiming success in prose; only the
verifier's verdict on the final workspace counts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from tasksieve.verifiers.sandbox.workspace import CommandResult

SUBMIT_MARK = "TASKSIEVE_SUBMIT"
SUBMIT_TEXTS = frozenset({"submit", f"echo {SUBMIT_MARK}", SUBMIT_MARK})
_FENCE = re.compile(r"```(bash|sh|shell)[ \t]*\r?\n(.*?)```", re.S)

ActionKind = Literal["run", "view", "replace", "submit", "invalid"]

SYSTEM_PROMPT = (
    "You are a software engineer working in a repository at /workspace, inside a sandbox "
    "with no network. Change the code so that the issue described by the user is fixed.\n"
    "Every reply: think briefly, then give exactly ONE shell command in ONE ```bash block. "
    "It runs in a persistent bash shell (the working directory and variables persist); you "
    "then see its exit code and output (long output is cut in the middle). Edit files with "
    "shell tools (sed, cat <<'EOF' > file, python). Run the tests you can see to check your "
    "work. When you are done, reply with a ```bash block holding only: submit\n"
    "Your change is judged by tests you cannot see; editing test files does not help."
)
TOOLS_SYSTEM_PROMPT = (
    "You are a software engineer working in a repository at /workspace, inside a sandbox "
    "with no network. Change the code so that the issue described by the user is fixed. "
    "Use the tools: run_command (a persistent bash shell), view_file, replace_in_file; call "
    "submit when you are done. Your change is judged by tests you cannot see."
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Run one command in the workspace's persistent bash shell.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "view_file",
            "description": "Show a file of the workspace with line numbers (optionally a range).",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative to /workspace"},
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "replace_in_file",
            "description": "Replace the one occurrence of `old` in a file with `new`.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative to /workspace"},
                    "old": {"type": "string"},
                    "new": {"type": "string"},
                },
                "required": ["path", "old", "new"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "End the episode; the workspace as it is now is judged.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
]
TOOL_NAMES = tuple(t["function"]["name"] for t in TOOLS)


@dataclass(frozen=True)
class Action:
    """One parsed action. ``invalid`` carries ``error``, the observation the agent gets."""

    kind: ActionKind
    command: str = ""
    path: str = ""
    old: str = ""
    new: str = ""
    start_line: int | None = None
    end_line: int | None = None
    error: str = ""
    call_id: str | None = None

    def describe(self) -> str:
        """The action as one text, for the trajectory's ``action`` column."""
        if self.kind == "run":
            return self.command
        if self.kind == "view":
            span = f" {self.start_line or 1}-{self.end_line or ''}" if self.start_line else ""
            return f"view_file {self.path}{span}"
        if self.kind == "replace":
            return json.dumps({"replace_in_file": self.path, "old": self.old, "new": self.new})
        if self.kind == "submit":
            return "submit"
        return f"<protocol error> {self.error}"


def protocol_error(found: int) -> str:
    """The observation for a text reply that does not hold exactly one command block."""
    return (
        f"Protocol error: your reply must hold exactly one ```bash block with one command "
        f"(found {found}). To finish, reply with a ```bash block holding only: submit"
    )


def parse_reply(text: str) -> Action:
    """The action of a text-protocol reply (see the module docstring)."""
    blocks = _FENCE.findall(text)
    if len(blocks) != 1:
        return Action("invalid", error=protocol_error(len(blocks)))
    command = blocks[0][1].strip()
    if not command:
        return Action("invalid", error="Protocol error: the ```bash block is empty.")
    if command in SUBMIT_TEXTS:
        return Action("submit")
    return Action("run", command=command)


def _int_arg(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def parse_tool_call(name: str, arguments: str, call_id: str | None = None) -> Action:
    """The action of one OpenAI tool call (``arguments``: its JSON text)."""
    if name not in TOOL_NAMES:
        error = f"Protocol error: no tool {name!r}; the tools are {', '.join(TOOL_NAMES)}."
        return Action("invalid", error=error, call_id=call_id)
    try:
        args = json.loads(arguments or "{}")
        if not isinstance(args, dict):
            raise ValueError("arguments must be a JSON object")
        for key in args:
            if not isinstance(key, str):
                raise ValueError("argument names must be strings")
        if name == "submit":
            return Action("submit", call_id=call_id)
        if name == "run_command":
            return Action("run", command=_str_arg(args, "command"), call_id=call_id)
        if name == "view_file":
            return Action(
                "view",
                path=_str_arg(args, "path"),
                start_line=_int_arg(args, "start_line"),
                end_line=_int_arg(args, "end_line"),
                call_id=call_id,
            )
        return Action(
            "replace",
            path=_str_arg(args, "path"),
            old=_str_arg(args, "old"),
            new=_str_arg(args, "new", allow_empty=True),
            call_id=call_id,
        )
    except ValueError as exc:
        error = f"Protocol error: bad arguments for {name}: {exc}"
        return Action("invalid", error=error, call_id=call_id)


def _str_arg(args: dict[str, Any], name: str, allow_empty: bool = False) -> str:
    value = args.get(name)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def truncate(data: bytes, cap: int) -> tuple[str, bool]:
    """``data`` as text cut by the truncation rule (module docstring); and whether it was cut."""
    if len(data) <= cap:
        return data.decode("utf-8", "replace"), False
    head, tail = cap // 2, cap - cap // 2
    elided = len(data) - head - tail
    cut = data[:head].decode("utf-8", "replace")
    end = data[len(data) - tail :].decode("utf-8", "replace") if tail else ""
    return f"{cut}\n[... {elided} bytes elided ...]\n{end}", True


_ENDED = {
    "wall": "the command ran past its time limit and was stopped; the shell was restarted "
    "(working directory, variables and background jobs are gone)",
    "output": "the output was over the session's cap and was cut",
    "session": "the session is gone (its shell died, or it hit its idle or lifetime limit)",
    "cpu": "the session ran out of CPU time",
    "memory": "the command ran out of memory",
    "processes": "the command hit the process limit",
    "disk": "the workspace's disk quota is full",
}


def observe(result: CommandResult, cap: int) -> tuple[str, bool]:
    """The observation of one command: exit code, a note on why it ended, its output cut."""
    body = result.stdout
    if result.stderr:
        body += (b"\n" if body and not body.endswith(b"\n") else b"") + result.stderr
    text, cut = truncate(body, cap)
    lines = [f"exit code: {result.exit_code if result.exit_code is not None else 'none'}"]
    if result.ended:
        lines.append(f"note: {_ENDED.get(result.ended, result.ended)}")
    return "\n".join([*lines, text]) if text else "\n".join(lines), cut or result.truncated
