"""Turn a verdict into a reward with the task's reward spec: one function for curation and training.

``reward`` returns a ``Reward`` or, for an ``infra_error`` verdict, a ``NoReward``: a broken
sandbox says nothing about the solution, so the type makes the caller decide (retry, reject,
fail the training step) instead of scoring 0. What this does NOT do: retry anything, or
judge whether a verdict's timing is trustworthy (a loaded machine inflates ``duration_s``
and so the runtime penalty; the reference's runtime is measured on the same machine).
See ``tasksieve.schemas.reward`` for the spec and the meaning of each kind and penalty.

``lint`` is the one part that runs something: ruff on solutions inside a sandbox, for the
style penalty; ``reward`` itself only takes its measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from tasksieve.schemas import RewardComponents, RewardSpec, Verdict
from tasksieve.schemas.reward import StylePenalty, WeightedTests

if TYPE_CHECKING:
    from tasksieve.verifiers.sandbox.base import Sandbox


@dataclass(frozen=True)
class Reward:
    """A scored verdict: ``value == components.base - penalties``."""

    value: float
    components: RewardComponents


@dataclass(frozen=True)
class Style:
    """A lint measurement of one solution: violations found in how many lines of code."""

    violations: int
    lines: int


@dataclass(frozen=True)
class NoReward:
    """An ``infra_error`` verdict: it must be retried or reported, never scored."""

    detail: str


def check_weight(name: str, weights: list[WeightedTests]) -> float:
    """The weight of the check ``name``: the first tag whose pattern matches it, else 1."""
    for tagged in weights:
        if any(fnmatchcase(name, pattern) for pattern in tagged.checks):
            return tagged.weight
    return 1.0


def _weighted(verdict: Verdict, weights: list[WeightedTests]) -> float:
    """Weighted share of the checks passed, kept below 1 (the verdict is a fail)."""
    each = [(check_weight(c.name, weights), c.passed) for c in verdict.checks]
    total = sum(w for w, _ in each)
    passed = sum(w for w, ok in each if ok)
    if passed >= total:  # a fail whose checks all say passed: below a pass, as unweighted
        passed = total - min(w for w, _ in each)
    return passed / total


def base_score(verdict: Verdict, spec: RewardSpec) -> float:
    """The reward before penalties: 1 for a pass, partial credit for a ``fraction`` fail.

    With ``test_weights`` and a verdict that lists its checks, the credit is the weighted
    share of checks passed; otherwise ``tests_passed / tests_total``."""
    if verdict.status == "pass":
        return 1.0
    if spec.kind == "binary" or verdict.status != "fail" or verdict.tests_total <= 0:
        return 0.0
    if spec.test_weights and verdict.checks:
        return _weighted(verdict, spec.test_weights)
    total = verdict.tests_total
    # a fail whose counters say every check passed still scores below a pass
    passed = min(max(verdict.tests_passed, 0), total - 1)
    return passed / total


def style_penalty(style: Style, spec: StylePenalty) -> float:
    """``weight * min(1, violations per line / per_line_cap)``; 0 for an empty solution."""
    if style.lines <= 0 or style.violations <= 0:
        return 0.0
    return spec.weight * min(1.0, style.violations / style.lines / spec.per_line_cap)


def runtime_ratio(verdict: Verdict, reference_s: float | None) -> float | None:
    """The run's time over the reference's, or None where either is unknown or zero."""
    if reference_s is None or reference_s <= 0 or verdict.duration_s <= 0:
        return None
    return verdict.duration_s / reference_s


def reward(
    verdict: Verdict,
    spec: RewardSpec,
    reference_s: float | None = None,
    style: Style | None = None,
) -> Reward | NoReward:
    """Score ``verdict`` by ``spec``; ``reference_s`` is the reference's measured runtime.

    The runtime penalty applies to runs that finished (``pass`` or ``fail``), the limits
    penalty to any run whose ``limit_hit`` is one of the spec's limits, the style penalty
    when the spec has one and ``style`` (the solution's lint measurement) is given.
    """
    if verdict.status == "infra_error":
        return NoReward(verdict.detail or "infra_error")
    base = base_score(verdict, spec)
    ratio = runtime_ratio(verdict, reference_s)
    slow = 0.0
    rt = spec.runtime
    if rt is not None and ratio is not None and verdict.status in ("pass", "fail"):
        slow = min(rt.cap, max(0.0, rt.weight * (ratio - rt.over)))
    hit = 0.0
    lim = spec.limits
    if lim is not None and verdict.limit_hit in lim.limits:
        hit = lim.weight
    lint = 0.0
    checked = spec.style is not None and style is not None
    if spec.style is not None and style is not None:
        lint = style_penalty(style, spec.style)
    parts = RewardComponents(
        kind=spec.kind,
        base=base,
        runtime_penalty=slow,
        limit_penalty=hit,
        runtime_ratio=ratio,
        style_penalty=lint,
        style_violations=style.violations if checked and style is not None else None,
        style_checked=checked,
    )
    return Reward(base - slow - hit - lint, parts)


LINT_LOADER = "/lib64/ld-linux-x86-64.so.2"
LINT_RULES = "E4,E7,E9,F"
LINT_LIMITS = {"wall_s": 60.0, "cpu_s": 60.0, "memory_mb": 1024, "scratch_mb": 128}


def _code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def lint(sandbox: Sandbox, solutions: list[str]) -> list[Style] | None:
    """Run ruff on every solution in one sandboxed run; each solution's ``Style``.

    The rules are ruff's classic defaults, named (``E4``, ``E7``, ``E9``, ``F``), so a newer
    ruff does not change the measure; ``--isolated``: no project config is read.
    The host's ruff binary (the ``ruff`` package's) travels into the run's scratch as a file and
    is started through the ELF loader, since files given to a run are not executable; so this
    needs a glibc x86-64 host and a sandbox that shows ``/lib64`` (the process backend). None
    when ruff is not installed or the run failed (the style then goes unmeasured, never
    guessed). Lint only parses the code: nothing of the solution runs.
    """
    import json
    import os

    from tasksieve.verifiers.sandbox.base import Limits

    try:
        from ruff.__main__ import find_ruff_bin

        binary = find_ruff_bin()
    except (ImportError, FileNotFoundError):
        return None
    if not os.path.exists(LINT_LOADER):
        return None
    with open(binary, "rb") as fh:
        files: dict[str, bytes | str] = {"ruff": fh.read()}
    names = [f"s{i}.py" for i in range(len(solutions))]
    files.update(zip(names, solutions, strict=True))
    size = sum(len(v) for v in files.values())
    limits = Limits(**LINT_LIMITS, max_file_bytes=max(16_000_000, 2 * size))  # type: ignore[arg-type]
    argv = [LINT_LOADER, "./ruff", "check", "--isolated", "--no-cache", "--exit-zero"]
    argv += ["--select", LINT_RULES]
    ran = sandbox.run(files, [*argv, "--output-format=json", *names], limits)
    if ran.infra_error or ran.exit_code != 0:
        return None
    try:
        found = json.loads(ran.stdout)
    except ValueError:
        return None
    counts = dict.fromkeys(names, 0)
    for item in found:
        name = os.path.basename(str(item.get("filename", "")))
        if name in counts:
            counts[name] += 1
    return [Style(counts[n], _code_lines(s)) for n, s in zip(names, solutions, strict=True)]
