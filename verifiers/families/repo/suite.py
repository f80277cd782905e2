"""Run a repository's pytest suite in the sandbox and read back one outcome per test id.

``run_suite`` packs the tree as the run's files (the repository at the scratch root, the
outcome plugin beside it under ``.tasksieve/``), starts pytest through a short launcher and
collects the plugin's JSON lines. The launcher puts the repository root (and ``src/`` when it
exists) first on ``sys.path``, then the host's site-packages as the backend shows them
(``Capabilities.site_packages``) so pytest imports; it turns off bytecode writing, pytest's
cache and plugin auto-loading (only the outcome plugin and the project's own ``conftest.py``
files take part), and widens the terminal so failure summaries are not cut.

The outcomes are judged on the host (``outcomes.parse_lines``/``outcomes_for``): a run that
never reported an id leaves it ``missing``, whatever the process printed. ``SuiteRun.output``
is pytest's own text (failure sections and the short summary) for a caller that wants the
evidence of a failure; it is untrusted output of the code under test.

It does NOT guard against: tests that depend on the network, on files outside the tree, or on
packages the host's environment does not have (they fail or error like any other test), and a
tree over ``max_bytes`` is refused rather than trimmed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tasksieve.verifiers.families.repo.outcomes import (
    PLUGIN_MODULE,
    Outcome,
    outcomes_for,
    parse_lines,
)
from tasksieve.verifiers.families.repo.snapshots import SKIP_DIRS
from tasksieve.verifiers.sandbox.base import Limits, Sandbox

PLUGIN_SOURCE = (Path(__file__).parent / "guest" / "outcomes_plugin.py").read_text(encoding="utf-8")
HELPER_DIR = ".tasksieve"
OUTCOMES_FILE = ".tasksieve-outcomes.jsonl"  # at the scratch root: the only writable directory
MAX_TREE_BYTES = 64 * 1024 * 1024

# The launcher runs with -I (no PYTHONPATH, no user site, no cwd on sys.path): argv is
# outcomes file, site dirs joined by os.pathsep, then pytest's own arguments.
LAUNCHER = """\
import os, site, sys
sys.dont_write_bytecode = True
os.environ["TASKSIEVE_OUTCOMES"] = os.path.abspath(sys.argv[1])
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
os.environ["COLUMNS"] = "240"
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
root = os.getcwd()
front = [root] + ([os.path.join(root, "src")] if os.path.isdir("src") else [])
sys.path[:0] = front + [os.path.join(root, HELPER_DIR)]
for d in sys.argv[2].split(os.pathsep):
    if d:
        site.addsitedir(d)
import pytest
sys.exit(pytest.main(sys.argv[3:]))
""".replace("HELPER_DIR", repr(HELPER_DIR))


class SuiteError(Exception):
    """The tree cannot be run as a suite (not a directory, too large); says why."""


@dataclass(frozen=True)
class SuiteRun:
    """What one run of the suite gave: an outcome per test id and how the run ended.

    ``collected`` is False when some file or test failed to collect, or pytest stopped with a
    usage or internal error, or found no tests; ``problem`` says which in a few words.
    """

    outcomes: dict[str, Outcome]
    collected: bool
    exit_code: int | None
    duration_s: float
    output: str = ""
    problem: str = ""
    limit_hit: str | None = None
    infra_error: str | None = None
    collect_errors: list[str] = field(default_factory=list)

    def ids(self, outcome: Outcome) -> list[str]:
        """The test ids with ``outcome``, sorted."""
        return sorted(t for t, o in self.outcomes.items() if o == outcome)


def pack_tree(tree: str | Path, max_bytes: int = MAX_TREE_BYTES) -> dict[str, bytes | str]:
    """Every regular file of ``tree`` (caches and ``.git`` left out) as sandbox files."""
    root = Path(tree)
    if not root.is_dir():
        raise SuiteError(f"{root}: not a directory")
    files: dict[str, bytes | str] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink() or not p.is_file():
                continue
            data = p.read_bytes()
            total += len(data)
            if total > max_bytes:
                raise SuiteError(f"{root}: more than {max_bytes} bytes of files")
            files[p.relative_to(root).as_posix()] = data
    return files


def suite_limits(timeout_s: float = 120.0, memory_mb: int = 2048, tree_bytes: int = 0) -> Limits:
    """Limits for one suite run: the task's time and memory, scratch room for the tree."""
    scratch = 64 + 2 * tree_bytes // (1024 * 1024)
    return Limits(
        wall_s=timeout_s,
        cpu_s=timeout_s,
        memory_mb=memory_mb,
        max_processes=64,
        max_output_bytes=4_000_000,
        scratch_mb=scratch,
    )


def run_suite(
    sandbox: Sandbox,
    tree: str | Path | Mapping[str, bytes | str] | Mapping[str, bytes],
    ids: Sequence[str] | None = None,
    limits: Limits | None = None,
    test_args: Sequence[str] = (),
    python: str | None = None,
) -> SuiteRun:
    """Run pytest over ``tree`` (a directory or packed files) in ``sandbox``.

    ``ids`` selects tests (None: the whole suite, and the outcomes are every test reported);
    with ``ids`` the outcomes hold exactly those ids, ``missing`` where nothing was reported.
    """
    files: dict[str, bytes | str] = (
        dict(tree.items()) if isinstance(tree, Mapping) else pack_tree(tree)
    )
    files[f"{HELPER_DIR}/{PLUGIN_MODULE}.py"] = PLUGIN_SOURCE
    if limits is None:
        limits = suite_limits(tree_bytes=sum(len(v) for v in files.values()))
    site_dirs = os.pathsep.join(sandbox.capabilities.site_packages)
    argv = [
        *["-p", PLUGIN_MODULE, "-p", "no:cacheprovider", "-q", "--tb=short", "-rfE"],
        *["-o", "addopts=", "--color=no", *test_args, *(ids or ())],
    ]
    command = [python or sandbox.python, "-I", "-c", LAUNCHER, OUTCOMES_FILE, site_dirs, *argv]
    ex = sandbox.run(files, command, limits, collect=(OUTCOMES_FILE,))
    output = (ex.stdout + b"\n" + ex.stderr).decode("utf-8", "replace")
    reported = parse_lines(ex.files.get(OUTCOMES_FILE, b""))
    errors = sorted(t for t, o in reported.items() if o == "error")
    outcomes = outcomes_for(ids, reported) if ids is not None else reported
    problem = ""
    if ex.infra_error:
        problem = f"sandbox failed: {ex.infra_error}"
    elif ex.limit_hit:
        problem = f"stopped by the {ex.limit_hit} limit"
    elif errors:
        problem = f"{len(errors)} collection error(s): {', '.join(errors[:5])}"
    elif ex.exit_code in (2, 3, 4):
        problem = f"pytest exited with {ex.exit_code} (interrupted, internal or usage error)"
    elif ex.exit_code == 5 or not reported:
        problem = "no tests were collected"
    return SuiteRun(
        outcomes=outcomes,
        collected=not problem,
        exit_code=ex.exit_code,
        duration_s=ex.duration_s,
        output=output,
        problem=problem,
        limit_hit=ex.limit_hit,
        infra_error=ex.infra_error,
        collect_errors=errors,
    )
