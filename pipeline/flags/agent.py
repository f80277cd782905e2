"""The ``curate`` flags of agent episodes (``--agent``) and their config.

Standard library only at the top (the parser is built before any command runs).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tasksieve.pipeline.flags.shared import positive_int

if TYPE_CHECKING:
    from tasksieve.transforms.agent.config import AgentConfig

HIDDEN = ("fail_to_pass_files", "none")
"""``tasksieve.transforms.agent.config.HIDDEN`` (a test checks that the two agree)."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def add_agent_flags(p: argparse.ArgumentParser) -> None:
    """``--agent`` and the budgets of its episodes."""
    g = p.add_argument_group("agent episodes (repo tasks: act in a live workspace, then judged)")
    g.add_argument(
        "--agent",
        action="store_true",
        help="each of a repo task's K samples is an episode: the model runs shell commands in "
        "its own workspace until it submits or a budget ends it; the hidden tests judge the "
        "final workspace (docs/agent.md)",
    )
    g.add_argument(
        "--agent-max-steps",
        type=positive_int,
        default=30,
        metavar="N",
        help="actions per episode (default 30)",
    )
    g.add_argument(
        "--agent-max-tokens",
        type=positive_int,
        default=200_000,
        metavar="N",
        help="prompt plus completion tokens per episode (default 200000)",
    )
    g.add_argument(
        "--agent-wall",
        type=_seconds,
        default=900.0,
        metavar="S",
        help="seconds per episode, model time included (default 900)",
    )
    g.add_argument(
        "--agent-command-timeout",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="seconds per command (default 60)",
    )
    g.add_argument(
        "--agent-protocol-errors",
        type=positive_int,
        default=3,
        metavar="N",
        help="replies that break the protocol before the episode ends (default 3)",
    )
    g.add_argument(
        "--agent-observation-bytes",
        type=positive_int,
        default=10_000,
        metavar="N",
        help="bytes of a command's output the agent sees (head and tail; default 10000)",
    )
    g.add_argument(
        "--agent-concurrency",
        type=positive_int,
        default=8,
        metavar="N",
        help="sandbox steps in flight per worker (default 8)",
    )
    g.add_argument(
        "--agent-hidden",
        choices=HIDDEN,
        default="fail_to_pass_files",
        help="test files the agent does not see (default: those of fail_to_pass)",
    )
    g.add_argument(
        "--agent-tools",
        action="store_true",
        help="OpenAI tool calling instead of fenced commands (--sampler openai)",
    )


def agent_config(args: argparse.Namespace) -> AgentConfig | None:
    """The ``AgentConfig`` from the parsed flags (None without ``--agent``)."""
    if not args.agent:
        return None
    from tasksieve.transforms.agent.config import AgentConfig

    return AgentConfig(
        max_steps=args.agent_max_steps,
        max_tokens=args.agent_max_tokens,
        wall_s=args.agent_wall,
        max_protocol_errors=args.agent_protocol_errors,
        observation_bytes=args.agent_observation_bytes,
        command_timeout_s=args.agent_command_timeout,
        concurrency=args.agent_concurrency,
        hidden=args.agent_hidden,
        tools=args.agent_tools,
    )
