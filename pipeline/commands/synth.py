"""``tasksieve synth repo``: make repo tasks from a local Python project by injecting bugs.

The top level imports the standard library only (the CLI builds its parser from here); the
synthesis library and the sandbox come in when the command runs.

Exit status: 0 tasks written, 1 the project gave no task (every mutant skipped), 2 bad input
(not a directory, not Python, no tests, a suite that does not pass, a bad flag).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tasksieve.pipeline.flags.shared import positive_int

if TYPE_CHECKING:
    from tasksieve.transforms.samplers.config import SamplerConfig

PROG = "tasksieve synth repo"
_EPILOG = """\
The suite runs in the sandbox with the host's Python packages visible (the project's test
dependencies must be installed here). Every collected test must pass before any change.

example:
  tasksieve synth repo --project inflection-0.5.1 --output repo.jsonl \\
      --snapshot-store snapshots --max-tasks 10 --seed 0 --exclude 'docs/**'

exit status: 0 tasks written, 1 no mutant made a task, 2 bad input (not a Python project,
no tests, a failing suite, bad flags)
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``synth`` and its ``repo`` sub-command."""
    p = sub.add_parser(
        "synth",
        help="synthesize tasks from local projects (repo: injected bugs)",
        description="Synthesize tasks offline from local material.",
    )
    kinds = p.add_subparsers(dest="synth_kind", required=True, metavar="KIND")
    r = kinds.add_parser(
        "repo",
        help="repo tasks from a Python project's test suite and injected bugs",
        description="Inject single-site bugs into a Python project's source, keep those its "
        "tests catch, and write one repo task per kept bug (snapshot, failing and passing "
        "tests, the fix as reference patch, a statement from the failing tests).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--project", required=True, metavar="DIR", help="the project's root")
    r.add_argument("--output", required=True, metavar="FILE.jsonl", help="tasks written here")
    r.add_argument("--snapshot-store", required=True, metavar="DIR", help="snapshots go here")
    r.add_argument("--max-tasks", type=positive_int, default=10, metavar="N")
    r.add_argument(
        "--max-tries", type=positive_int, default=None, metavar="N", help="default 6 x max-tasks"
    )
    r.add_argument("--seed", type=int, default=0, metavar="S")
    r.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="leave out of snapshots"
    )
    r.add_argument(
        "--test-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra pytest argument, kept in the tasks (e.g. --test-arg=--deselect=ID)",
    )
    r.add_argument(
        "--requirement",
        action="append",
        default=[],
        metavar="SPEC",
        help="a test dependency recorded in the tasks' environment",
    )
    r.add_argument("--id-prefix", default="repo", help="task ids are PREFIX.<package>.<hash>")
    r.add_argument("--timeout", type=float, default=120.0, metavar="S", help="per suite run")
    r.add_argument("--sandbox", default="process", choices=("process", "docker"))
    g = r.add_argument_group(
        "statement rewrite (optional): a sampler turns each statement into an issue"
    )
    g.add_argument("--sampler", choices=("transformers", "openai", "replay"), default=None)
    g.add_argument("--model", default=None, help="model of --sampler transformers/openai")
    g.add_argument("--endpoint", default=None, help="--sampler openai: the server's base URL")
    g.add_argument("--api-key-env", default=None, help="--sampler openai: env var with the key")
    g.add_argument("--replay", default=None, metavar="FILE", help="--sampler replay: its file")
    g.add_argument("--max-new-tokens", type=positive_int, default=400)
    r.add_argument("--append", action="store_true", help="append to --output instead of replacing")
    r.add_argument("--quiet", action="store_true")
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``synth repo``; return the exit status."""
    from tasksieve.transforms.synth.project import ProjectError, load_project
    from tasksieve.transforms.synth.repo import SynthConfig, SynthError, synthesize
    from tasksieve.verifiers.families.repo.snapshots import SnapshotError, SnapshotStore
    from tasksieve.verifiers.registry import make_sandbox
    from tasksieve.verifiers.sandbox.base import SandboxUnavailable

    err = sys.stderr
    say = (lambda _m: None) if args.quiet else (lambda m: print(f"{PROG}: {m}", file=err))
    try:
        cfg = SynthConfig(
            max_tasks=args.max_tasks,
            max_tries=args.max_tries,
            seed=args.seed,
            test_args=tuple(args.test_arg),
            requirements=tuple(args.requirement),
            timeout_s=args.timeout,
            id_prefix=args.id_prefix,
        )
        sampler = _sampler_config(args)
        project = load_project(args.project, exclude=args.exclude)
        sandbox = make_sandbox(args.sandbox)
    except (ProjectError, ValueError, SandboxUnavailable) as e:
        print(f"{PROG}: error: {e}", file=err)
        return 2
    try:
        store = SnapshotStore(args.snapshot_store)
        result = synthesize(project, sandbox, store, cfg, progress=say)
    except (SynthError, SnapshotError) as e:
        print(f"{PROG}: error: {e}", file=err)
        return 2
    finally:
        sandbox.close()
    tasks = result.tasks
    if sampler is not None and tasks:
        from tasksieve.transforms.synth.rewrite import rewrite_statements

        tasks, done = rewrite_statements(tasks, sampler)
        say(f"{done} of {len(tasks)} statements rewritten by the {sampler.backend} sampler")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(t.model_dump_json() + "\n" for t in tasks)
    with open(out, "a" if args.append else "w", encoding="utf-8") as f:
        f.write(lines)
    skipped = ", ".join(f"{k}: {v}" for k, v in sorted(result.skipped.items())) or "none"
    summary = {
        "project": str(args.project),
        "package": project.info.name,
        "tasks": len(result.tasks),
        "tried": result.tried,
        "baseline_tests": result.baseline_tests,
        "skipped": result.skipped,
    }
    say(f"{len(result.tasks)} tasks from {result.tried} mutants tried (skipped: {skipped})")
    if not args.quiet:
        print(json.dumps(summary))
    return 0 if result.tasks else 1


def _sampler_config(args: argparse.Namespace) -> SamplerConfig | None:
    """The rewrite sampler's config, or None when no ``--sampler`` was given."""
    if args.sampler is None:
        return None
    from tasksieve.transforms.samplers.config import SamplerConfig

    return SamplerConfig(
        backend=args.sampler,
        model=args.model,
        samples=1,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        replay_path=args.replay,
        endpoint=args.endpoint,
        api_key_env=args.api_key_env,
        stop_after_code=False,
    )
