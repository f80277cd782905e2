"""One agent episode: one workspace session, steps until submit or a budget, then the verdict.

``Episode.start`` opens the session (``transforms.agent.session``); ``turn`` is what the
policy sees; ``apply`` runs the policy's reply as one action, records the step and checks the
budgets (``AgentConfig``); when the episode ends, ``apply`` judges it and closes the session
at once, so a session lives exactly as long as its episode.

Endings and verdicts:

- ``submitted``: the repo verifier judges the final workspace (``verify_workspace``: its diff
  applied to a fresh workspace, the test files restored, the selected tests run); the reward is
  that verdict, whatever the agent said.
- ``max_steps``, ``max_tokens``, ``wall``, ``protocol_errors``: a budget ran out before submit;
  the verdict is ``fail`` with the budget named (the workspace is not judged).
- ``session_lost``: the session is gone before submit (the agent killed its shell, or the
  session hit its idle or lifetime limit); a ``fail`` likewise.
- ``no_session`` (the workspace could not be opened) and ``policy_error`` (the sampler
  failed): ``infra_error``, which says nothing about the agent; the episode is left out.

Tokens: a reply's prompt and completion tokens as the sampler reports them; where it reports
none, the budget counts an estimate of one token per four bytes of the text sent or received
(the rows keep the reported numbers only).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from tasksieve.schemas import TaskRecord, Verdict
from tasksieve.transforms.agent.config import AgentConfig
from tasksieve.transforms.agent.policies import Message, Reply, Turn
from tasksieve.transforms.agent.protocol import (
    SYSTEM_PROMPT,
    TOOLS_SYSTEM_PROMPT,
    Action,
    observe,
    parse_reply,
    parse_tool_call,
    truncate,
)
from tasksieve.transforms.agent.session import Opener, SessionProblem, WorkspaceVerifier
from tasksieve.verifiers.sandbox.workspace import Workspace, WorkspaceError

BUDGET_ENDINGS = ("max_steps", "max_tokens", "wall", "protocol_errors", "session_lost")
ENDINGS = ("submitted", *BUDGET_ENDINGS, "no_session", "policy_error")


@dataclass(frozen=True)
class Step:
    """One step of an episode as recorded (one trajectory row)."""

    step: int
    reply: str
    action: Action
    observation: str
    truncated: bool
    exit_code: int | None
    ended: str | None
    duration_s: float
    tokens_in: int | None
    tokens_out: int | None
    cpu_s: float | None = None  # the command's (see CommandResult.cpu_s); None without one


@dataclass
class Episode:
    """One episode of one task (see the module docstring)."""

    task: TaskRecord
    index: int
    cfg: AgentConfig
    tools: bool = False
    steps: list[Step] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    ending: str | None = None
    verdict: Verdict | None = None
    diff: str = ""
    protocol_errors: int = 0
    tokens: int = 0
    started: float = 0.0
    finished: float = 0.0
    ws: Workspace | None = None

    def __post_init__(self) -> None:
        system = TOOLS_SYSTEM_PROMPT if self.tools else SYSTEM_PROMPT
        user = f"{self.task.prompt}\n\nThe repository is checked out at /workspace."
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]

    @property
    def done(self) -> bool:
        return self.ending is not None

    @property
    def wall_s(self) -> float:
        return (self.finished or time.monotonic()) - self.started if self.started else 0.0

    def start(self, opener: Opener) -> None:
        """Open the session; an episode that cannot get one ends as ``no_session``."""
        self.started = time.monotonic()
        try:
            self.ws = opener.open(self.task)
        except SessionProblem as exc:
            self._end("no_session", Verdict(status="infra_error", detail=str(exc)))

    def turn(self) -> Turn:
        return Turn(self.task, self.index, len(self.steps) + 1, tuple(self.messages))

    def apply(self, reply: Reply, verifier: WorkspaceVerifier) -> None:
        """Run ``reply`` as the next step, check the budgets, and judge the episode if it ended."""
        if self.done:
            return
        if reply.error is not None:
            self._end(
                "policy_error", Verdict(status="infra_error", detail=f"policy: {reply.error}")
            )
            return
        self.tokens += _tokens(reply.tokens_in, self.messages) + _tokens(reply.tokens_out, reply)
        if time.monotonic() - self.started >= self.cfg.wall_s:
            self._budget("wall", verifier)
            return
        action = self._action(reply)
        t0 = time.monotonic()
        text, cut, code, ended, cpu = self._execute(action)
        duration = time.monotonic() - t0
        self.steps.append(
            Step(len(self.steps) + 1, reply.text, action, text, cut, code, ended,
                 round(duration, 4), reply.tokens_in, reply.tokens_out, cpu)
        )  # fmt: skip
        self._remember(reply, action, text)
        if action.kind == "invalid":
            self.protocol_errors += 1
        if action.kind == "submit":
            self._judge(verifier)
        elif ended == "session" or (self.ws is not None and not self.ws.alive):
            self._budget("session_lost", verifier)
        elif self.protocol_errors >= self.cfg.max_protocol_errors:
            self._budget("protocol_errors", verifier)
        elif len(self.steps) >= self.cfg.max_steps:
            self._budget("max_steps", verifier)
        elif self.cfg.max_tokens is not None and self.tokens >= self.cfg.max_tokens:
            self._budget("max_tokens", verifier)
        elif time.monotonic() - self.started >= self.cfg.wall_s:
            self._budget("wall", verifier)

    # ------------------------------------------------------------------ actions
    def _action(self, reply: Reply) -> Action:
        if not self.tools:
            return parse_reply(reply.text)
        if len(reply.tool_calls) != 1:
            n = len(reply.tool_calls)
            return Action(
                "invalid", error=f"Protocol error: call exactly one tool per reply ({n})."
            )
        call = reply.tool_calls[0]
        return parse_tool_call(call.name, call.arguments, call.id)

    def _execute(self, action: Action) -> tuple[str, bool, int | None, str | None, float | None]:
        """(observation, truncated, exit code, why the command or session stopped, the
        command's CPU seconds)."""
        cap = self.cfg.observation_bytes
        if action.kind == "invalid":
            return action.error, False, None, None, None
        if action.kind == "submit":
            return "submitted", False, None, None, None
        assert self.ws is not None
        try:
            if action.kind == "run":
                left = self.cfg.wall_s - (time.monotonic() - self.started)
                res = self.ws.exec(
                    action.command, timeout_s=max(1.0, min(self.cfg.command_timeout_s, left))
                )
                text, cut = observe(res, cap)
                return text, cut, res.exit_code, res.ended, res.cpu_s
            if action.kind == "view":
                return (*self._view(action, cap), None, None, None)
            return (*self._replace(action), None, None, None)
        except (WorkspaceError, ValueError, OSError) as exc:
            alive = self.ws.alive
            return f"error: {exc}", False, None, None if alive else "session", None

    def _view(self, action: Action, cap: int) -> tuple[str, bool]:
        assert self.ws is not None
        data = self.ws.read_file(action.path, max_bytes=16_000_000)
        if data is None:
            return f"error: no file {action.path}", False
        lines = data.decode("utf-8", "replace").splitlines()
        first = action.start_line or 1
        last = min(action.end_line or len(lines), len(lines))
        shown = "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(first, last + 1))
        return truncate(shown.encode(), cap)

    def _replace(self, action: Action) -> tuple[str, bool]:
        assert self.ws is not None
        data = self.ws.read_file(action.path, max_bytes=16_000_000)
        if data is None:
            return f"error: no file {action.path}", False
        text = data.decode("utf-8", "surrogateescape")
        found = text.count(action.old)
        if found != 1:
            return f"error: `old` occurs {found} times in {action.path}; it must occur once", False
        new = text.replace(action.old, action.new, 1)
        self.ws.write_file(action.path, new.encode("utf-8", "surrogateescape"))
        return f"replaced 1 occurrence in {action.path}", False

    def _remember(self, reply: Reply, action: Action, observation: str) -> None:
        if not self.tools:
            self.messages.append({"role": "assistant", "content": reply.text})
            self.messages.append({"role": "user", "content": observation})
            return
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
        said: Message = {"role": "assistant", "content": reply.text or None}
        if calls:
            said["tool_calls"] = calls
        self.messages.append(said)
        if not calls:
            self.messages.append({"role": "user", "content": observation})
        for c in reply.tool_calls:  # every call gets its answer; only a lone call ran
            text = observation if len(calls) == 1 else action.error
            self.messages.append({"role": "tool", "tool_call_id": c.id, "content": text})

    # ------------------------------------------------------------------ endings
    def _judge(self, verifier: WorkspaceVerifier) -> None:
        assert self.ws is not None
        try:
            self.diff = self.ws.diff()
        except WorkspaceError as exc:
            self._end("submitted", Verdict(status="infra_error", detail=f"diff failed: {exc}"))
            return
        self._end("submitted", verifier.verify_workspace(self.task, self.ws))

    def _budget(self, ending: str, verifier: WorkspaceVerifier) -> None:
        if self.ws is not None and self.ws.alive:
            try:
                self.diff = self.ws.diff()
            except WorkspaceError:
                self.diff = ""
        detail = f"the episode ended on its {ending} budget before submit (not judged)"
        self._end(ending, Verdict(status="fail", detail=detail))

    def _end(self, ending: str, verdict: Verdict) -> None:
        self.ending, self.verdict = ending, verdict
        self.finished = time.monotonic()
        ws, self.ws = self.ws, None
        if ws is not None:
            ws.close()  # the session is released the moment its episode ends


def _tokens(reported: int | None, sent: object) -> int:
    """Reported tokens, else one per four bytes of what was sent or received."""
    if reported is not None:
        return reported
    if isinstance(sent, Reply):
        size = len(sent.text.encode()) + sum(len(c.arguments) for c in sent.tool_calls)
    else:
        size = len(json.dumps(sent, default=str).encode())
    return (size + 3) // 4
