"""Scripted agents: fixed replies per step, for tests, demos and sandbox measurements.

``ScriptedPolicy`` answers each turn with ``script(turn)`` (a text reply in the fenced-block
protocol). The scripts here:

- ``solver``: writes the task's reference patch into the workspace with a Python applier sent
  as a shell heredoc (no git or ``patch`` program needed), runs the visible tests, submits;
- ``idler``: looks around and submits without changing anything (fails every task with a
  fail_to_pass test);
- ``steps(*commands)``: the given commands in order, then submit (hostile agents in tests);
- ``never_submits(command)``: the same command forever (ends on a budget).

No model is involved: tokens are not reported (the budget estimates them).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tasksieve.transforms.agent.policies import Reply, Turn
from tasksieve.verifiers.families.repo.guest import patchapply

Script = Callable[[Turn], str]


def fenced(command: str) -> str:
    """A reply holding ``command`` in one bash block, with a line of prose before it."""
    return f"Next step.\n```bash\n{command}\n```\n"


SUBMIT = fenced("submit")


def _heredoc_tag(text: str) -> str:
    tag = "TASKSIEVE_EOF"
    while tag in text:
        tag += "_"
    return tag


def apply_command(patch: str, python: str = "python3") -> str:
    """One shell command that applies the unified diff ``patch`` in the current directory."""
    source = inspect.getsource(patchapply)
    program = f"{source}\n\nprint('\\n'.join(apply_patch('.', {patch!r})))\n"
    tag = _heredoc_tag(program)
    return f"{python} - <<'{tag}'\n{program}{tag}"


def solver(python: str = "python3", test_command: str | None = None) -> Script:
    """Apply the reference patch, run the visible tests, submit."""
    tests = test_command or f"{python} -m pytest -q -p no:cacheprovider 2>&1 | tail -n 15"

    def script(turn: Turn) -> str:
        patch = turn.task.reference_solution or ""
        plan = ["ls", apply_command(patch, python), tests]
        return fenced(plan[turn.step - 1]) if turn.step <= len(plan) else SUBMIT

    return script


def idler() -> Script:
    """Look around, change nothing, submit."""
    return steps("ls -la", "cat README* 2>/dev/null | head -n 20")


def steps(*commands: str) -> Script:
    """Each command in its own step, then submit. A command may be a raw reply (prefix
    ``RAW:``) to send text that is not one fenced block."""

    def script(turn: Turn) -> str:
        if turn.step > len(commands):
            return SUBMIT
        command = commands[turn.step - 1]
        return command[4:] if command.startswith("RAW:") else fenced(command)

    return script


def never_submits(command: str = "sleep 0.05; echo still working") -> Script:
    """The same command forever: only a budget ends the episode."""
    return lambda turn: fenced(command)


@dataclass
class ScriptedPolicy:
    """A policy whose replies come from a script per task id (or one for every task)."""

    scripts: dict[str, Script] | Script
    tools: bool = False
    name: str = "scripted"
    model_id: str = "scripted"

    def _script(self, task_id: str) -> Script:
        if callable(self.scripts):
            return self.scripts
        return self.scripts[task_id]

    def act(self, turns: Sequence[Turn]) -> list[Reply]:
        out = []
        for t in turns:
            try:
                out.append(Reply(text=self._script(t.task.id)(t)))
            except KeyError:
                out.append(Reply(error=f"no script for task {t.task.id}"))
        return out

    def close(self) -> None:
        return None
