"""The ``repo`` family's verifier: a solution's diff applied to a snapshot, the tests restored,
the selected tests run, a verdict per test id.

One guest program (``guest/runner.py``) does the work inside the sandbox, on one of two paths:

- packed (every backend): ``Sandbox.run`` with the snapshot as input files under ``snap/``
  (bounded by ``packing.MAX_PACKED_BYTES``), copied by the guest into a writable ``work/``;
- workspace (``Capabilities.workspaces``): a fresh copy-on-write workspace over the snapshot,
  the guest run in ``/workspace`` with the environment at ``/env``; no session sees the
  snapshot itself, so the guest copies the test files aside before it applies the patch and
  restores them from there.

The verdict is computed here from the outcome lines the guest returns: ``pass`` iff every
``fail_to_pass`` and every ``pass_to_pass`` id passed. ``checks`` hold one entry per id
(``fail_to_pass:<id>`` / ``pass_to_pass:<id>``, detail = its outcome); ``tests_passed`` /
``tests_total`` count both lists, so a ``fraction`` reward is the share of asked tests that
pass, and the detail gives each list's share. A patch that does not apply is a ``fail``; a
missing snapshot or environment is an ``infra_error`` (the gates reject such tasks first, with
``task_problem``).

It does NOT guard against code under test that rewrites pytest or the outcome plugin inside
its own interpreter (it runs there): an id asked for that never reports counts as not passed,
and a report where every id passed but pytest exited non-zero is a ``fail``; a run that fakes
both is not caught.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path
from typing import Any

from tasksieve.schemas import CheckResult, TaskRecord, Verdict
from tasksieve.schemas.repo import RepoSpec
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.families.repo import guest as guest_pkg
from tasksieve.verifiers.families.repo.environments import (
    EnvironmentBuildError,
    ResolvedEnv,
    resolve,
)
from tasksieve.verifiers.families.repo.outcomes import Outcome, outcomes_for, parse_lines
from tasksieve.verifiers.families.repo.packing import MAX_PACKED_BYTES, PackCache, PackTooLarge
from tasksieve.verifiers.families.repo.prompt import LISTING_KEY, file_listing
from tasksieve.verifiers.families.repo.snapshots import SnapshotError, SnapshotStore
from tasksieve.verifiers.sandbox.base import Limits, Sandbox
from tasksieve.verifiers.sandbox.guest import bundle
from tasksieve.verifiers.sandbox.workspace import (
    ENV_MOUNT,
    WORKSPACE_ROOT,
    SessionLimits,
    Workspace,
    WorkspaceError,
    WorkspaceSpec,
)

_GUEST_DIR = Path(guest_pkg.__file__).parent
GUEST_SOURCE = bundle(str(_GUEST_DIR / "runner.py"))
PLUGIN_SOURCE = (_GUEST_DIR / "outcomes_plugin.py").read_text(encoding="utf-8")
SETUP_GRACE_S = 60.0
JOB_FILE = ".tasksieve-job.json"
_NOT_FOUND = re.compile(r"(?:ERROR: )?(?:file or directory )?not found: (\S+)")


class TaskProblem(Exception):
    """The task cannot be verified here: ``reason`` is a rejection code, the message what to fix."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class RepoVerifier(Verifier):
    """Judges unified diffs against ``repo`` tasks (see the module docstring)."""

    family = "repo"

    def __init__(
        self,
        sandbox: Sandbox,
        store: SnapshotStore | str | Path | None = None,
        max_packed_bytes: int = MAX_PACKED_BYTES,
    ) -> None:
        super().__init__(sandbox)
        self.store = SnapshotStore(store) if isinstance(store, str | Path) else store
        self.packs = PackCache(max_bytes=max_packed_bytes)
        self._envs: dict[str, ResolvedEnv] = {}
        self._env_errors: dict[str, str] = {}

    # ------------------------------------------------------------------ what a task needs
    def task_problem(self, task: TaskRecord) -> TaskProblem | None:
        """Why ``task`` cannot be verified (snapshot, environment, size), or None."""
        try:
            self._prepare(task)
        except TaskProblem as problem:
            return problem
        return None

    def _prepare(self, task: TaskRecord) -> tuple[RepoSpec, Path, ResolvedEnv]:
        spec = task.verifier
        if not isinstance(spec, RepoSpec):
            raise TaskProblem("verifier.unsupported", f"not a repo task: {spec.family}")
        if self.store is None:
            raise TaskProblem(
                "repo.snapshot",
                f"task {task.id}: no snapshot store given; pass --snapshot-store DIR or set "
                "TASKSIEVE_SNAPSHOT_STORE (no default location is assumed)",
            )
        try:
            tree = self.store.path(spec.snapshot)
        except SnapshotError as exc:
            raise TaskProblem("repo.snapshot", f"task {task.id}: {exc}") from exc
        key = spec.environment.model_dump_json()
        env = self._envs.get(key)
        if env is None:
            if key not in self._env_errors:  # a failed build is not retried for every task
                try:
                    env = resolve(
                        spec.environment, self.store.root, self.sandbox.capabilities.site_packages
                    )
                except EnvironmentBuildError as exc:
                    self._env_errors[key] = str(exc)
            if env is None:
                raise TaskProblem(
                    "repo.environment",
                    f"task {task.id}: environment {spec.environment.requirements} failed to "
                    f"build; fix its requirements or pre-build it into the store: "
                    f"{self._env_errors[key]}",
                )
            self._envs[key] = env
        if not self.sandbox.capabilities.workspaces:
            try:
                self.packs.get(tree, "snap")
                if env.tree is not None:
                    self.packs.get(env.tree, "env")
            except PackTooLarge as exc:
                raise TaskProblem("repo.too_large", f"task {task.id}: {exc}") from exc
        return spec, tree, env

    def with_listing(self, task: TaskRecord) -> TaskRecord:
        """``task`` with its snapshot's file listing in ``metadata`` (``prompt.render_prompt``)."""
        _spec, tree, _env = self._prepare(task)
        meta = {**task.metadata, LISTING_KEY: file_listing(tree)}
        return task.model_copy(update={"metadata": meta})

    # ------------------------------------------------------------------ verifying
    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        """Apply ``solution`` (a unified diff), restore the tests, run them; never raises."""
        t0 = time.monotonic()
        try:
            spec, tree, env = self._prepare(task)
        except TaskProblem as problem:
            return Verdict(status="infra_error", detail=f"{problem.reason}: {problem}")
        try:
            if self.sandbox.capabilities.workspaces:
                result = self._run_workspace(spec, tree, env, solution)
            else:
                result = self._run_packed(spec, tree, env, solution)
            verdict = judge(spec, result)
            verdict.cpu_s = _seconds(result.get("cpu_s"))
        except (WorkspaceError, OSError) as exc:
            verdict = Verdict(status="infra_error", detail=f"sandbox: {exc}")
        except Exception as exc:  # a bug here is never the solution's fault
            verdict = Verdict(
                status="infra_error", detail=f"verifier failed: {type(exc).__name__}: {exc}"
            )
        verdict.duration_s = time.monotonic() - t0
        return verdict

    def run_tests(
        self, task: TaskRecord, solution: str, ids: list[str]
    ) -> tuple[str, dict[str, Outcome]]:
        """Run ``ids`` (test ids or whole test files) after ``solution``; every reported
        outcome. The first item is ``ran``, or why not (``patch_failed``, ``timeout``,
        ``infra``); raises ``TaskProblem`` when the task cannot run here."""
        spec, tree, env = self._prepare(task)
        spec = spec.model_copy(update={"fail_to_pass": list(ids), "pass_to_pass": []})
        if self.sandbox.capabilities.workspaces:
            result = self._run_workspace(spec, tree, env, solution)
        else:
            result = self._run_packed(spec, tree, env, solution)
        status = str(result.get("status"))
        if status != "ran":
            return status, {}
        return status, parse_lines("\n".join(result.get("lines") or []))

    def verify_workspace(self, task: TaskRecord, ws: Workspace) -> Verdict:
        """Judge an agent's final workspace: its diff against the snapshot is the solution."""
        try:
            diff = ws.diff()
        except WorkspaceError as exc:
            return Verdict(status="infra_error", detail=f"workspace diff failed: {exc}")
        return self.verify(task, drop_caches(diff))

    def _job(self, spec: RepoSpec, solution: str, pythonpath: list[str]) -> dict[str, Any]:
        return {
            "patch": solution,
            "test_files": list(spec.test_files),
            "ids": [*spec.fail_to_pass, *spec.pass_to_pass],
            "test_args": list(spec.test_args),
            "pythonpath": pythonpath,
            "plugin": PLUGIN_SOURCE,
            "timeout_s": spec.timeout_s,
            "memory_mb": spec.memory_mb,
            "nonce": secrets.token_hex(16),
            "python": self.sandbox.python,
        }

    def _run_packed(
        self, spec: RepoSpec, tree: Path, env: ResolvedEnv, solution: str
    ) -> dict[str, Any]:
        snap = self.packs.get(tree, "snap")
        files: dict[str, bytes | str] = {"repo_guest.py": GUEST_SOURCE, **snap.files}
        size = snap.size
        pythonpath = list(env.paths)
        if env.tree is not None:
            packed_env = self.packs.get(env.tree, "env")
            files.update(packed_env.files)
            size += packed_env.size
            pythonpath = ["env"]
        job = {**self._job(spec, solution, pythonpath), "mode": "packed"}
        job.update(work="work", snap="snap", links=snap.links)
        wall = spec.timeout_s + SETUP_GRACE_S
        limits = Limits(
            wall_s=wall,
            cpu_s=wall,
            memory_mb=spec.memory_mb + 256,
            max_processes=256,
            max_output_bytes=16_000_000,
            scratch_mb=(2 * size) // 2**20 + spec.disk_mb + 16,
        )
        cmd = [self.sandbox.python, "-I", "-S", "repo_guest.py"]
        ex = self.sandbox.run(files, cmd, limits, stdin=json.dumps(job).encode())
        if ex.infra_error:
            return {"status": "infra", "detail": ex.infra_error}
        out = _result(ex.stdout, job["nonce"], ex.limit_hit, ex.exit_code, ex.stderr)
        return {**out, "cpu_s": ex.cpu_s}  # the sandbox's measure of the whole run

    def _run_workspace(
        self, spec: RepoSpec, tree: Path, env: ResolvedEnv, solution: str
    ) -> dict[str, Any]:
        wall = spec.timeout_s + SETUP_GRACE_S
        limits = SessionLimits(
            idle_s=wall,
            lifetime_s=wall + 30,
            command_wall_s=wall,
            cpu_s=wall,
            memory_mb=spec.memory_mb + 256,
            max_processes=256,
            disk_mb=spec.disk_mb,
            max_output_bytes=16_000_000,
        )
        ws_spec = WorkspaceSpec(
            snapshot=str(tree), env=str(env.tree) if env.tree else None, limits=limits
        )
        pythonpath = [ENV_MOUNT] if env.tree is not None else list(env.paths)
        job = {**self._job(spec, solution, pythonpath), "mode": "workspace"}
        job.update(work=WORKSPACE_ROOT, snap="", links={})  # "": the guest's own stash
        ws = self.sandbox.open_workspace(ws_spec)
        try:
            ws.write_file(JOB_FILE, json.dumps(job).encode())
            argv = [self.sandbox.python, "-I", "-S", "-c", GUEST_SOURCE]
            res = ws.run([*argv, f"{WORKSPACE_ROOT}/{JOB_FILE}"], timeout_s=wall)
        finally:
            ws.close()
        limit = "wall" if res.ended == "wall" else res.ended
        return _result(res.stdout, job["nonce"], limit, res.exit_code, res.stderr)


def _seconds(value: Any) -> float | None:
    """A reported CPU time in seconds, or None when absent or not a number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _result(
    stdout: bytes, nonce: str, limit_hit: str | None, code: int | None, stderr: bytes
) -> dict[str, Any]:
    """The guest's report (the last line that starts with the nonce), or why there is none."""
    mark = nonce.encode() + b" "
    for line in reversed(stdout.splitlines()):
        if line.startswith(mark):
            try:
                out: dict[str, Any] = json.loads(line[len(mark) :])
                return out
            except ValueError:
                break
    tail = stderr.decode("utf-8", "replace")[-600:]
    if limit_hit in ("wall", "cpu"):
        return {"status": "timeout", "detail": f"the run hit its {limit_hit} limit: {tail}"}
    return {"status": "infra", "detail": f"guest gave no report (exit {code}, {limit_hit}): {tail}"}


_CACHE_PART = re.compile(r"(?:^|/)(?:__pycache__|\.pytest_cache|\.mypy_cache)/|\.py[co]$")


def drop_caches(diff: str) -> str:
    """``diff`` without the sections of interpreter and tool caches (``__pycache__``, ``*.pyc``,
    ``.pytest_cache``) that an agent's commands leave in a workspace; sections start at
    ``diff --git`` lines (a diff without them is returned as it is)."""
    if "diff --git " not in diff:
        return diff
    sections = re.split(r"(?m)^(?=diff --git )", diff)
    kept = [
        s
        for s in sections
        if not (s.startswith("diff --git ") and _CACHE_PART.search(s.split("\n", 1)[0]))
    ]
    return "".join(kept)


def not_found_ids(tail: str) -> list[str]:
    """Test ids pytest said it could not find (``ERROR: not found: <id>``)."""
    return list(dict.fromkeys(m.group(1) for m in _NOT_FOUND.finditer(tail)))


def judge(spec: RepoSpec, result: dict[str, Any]) -> Verdict:
    """The verdict of one guest report (see the module docstring)."""
    total = spec.test_count()
    status = result.get("status")
    if status == "patch_failed":
        return Verdict(
            status="fail", tests_total=total, detail=f"patch does not apply: {result['detail']}"
        )
    if status == "timeout":
        return Verdict(status="timeout", tests_total=total, detail=str(result["detail"])[:800])
    if status != "ran":
        return Verdict(status="infra_error", tests_total=total, detail=str(result.get("detail")))
    reported = parse_lines("\n".join(result.get("lines") or []))
    f2p = outcomes_for(spec.fail_to_pass, reported)
    p2p = outcomes_for(spec.pass_to_pass, reported)
    checks = [
        CheckResult(name=f"fail_to_pass:{t}", passed=o == "passed", detail=o)
        for t, o in f2p.items()
    ]
    checks += [
        CheckResult(name=f"pass_to_pass:{t}", passed=o == "passed", detail=o)
        for t, o in p2p.items()
    ]
    passed = sum(c.passed for c in checks)
    detail = _summary(f2p, p2p)
    tail = str(result.get("tail") or "")
    missing = not_found_ids(tail)
    if missing:
        detail += f"; test ids not found: {', '.join(missing[:10])}"
    all_ok = passed == total
    if all_ok and result.get("exit") != 0:
        detail += f"; pytest exited {result.get('exit')} although every asked test reported passed"
        all_ok = False
    if result.get("timed_out"):
        verdict_status = "timeout"
        detail += f"; pytest timed out after {spec.timeout_s}s"
    else:
        verdict_status = "pass" if all_ok else "fail"
    if result.get("restored"):
        detail += f"; restored from the snapshot: {', '.join(result['restored'][:10])}"
    if verdict_status != "pass" and tail:
        detail += "\n" + tail[-1200:]
    return Verdict(
        status=verdict_status,
        tests_passed=passed,
        tests_total=total,
        detail=detail,
        checks=checks,
        limit_hit="wall" if result.get("timed_out") else None,
    )


def _summary(f2p: dict[str, Outcome], p2p: dict[str, Outcome]) -> str:
    def share(d: dict[str, Outcome]) -> str:
        return f"{sum(o == 'passed' for o in d.values())}/{len(d)}"

    bad = [f"{t} ({o})" for d in (f2p, p2p) for t, o in d.items() if o != "passed"]
    text = f"fail_to_pass {share(f2p)}, pass_to_pass {share(p2p)}"
    if bad:
        text += "; not passed: " + ", ".join(bad[:10]) + (" ..." if len(bad) > 10 else "")
    return text


def per_test(verdict: Verdict) -> dict[str, str]:
    """``{"fail_to_pass:<id>": outcome, ...}`` from a repo verdict's checks."""
    return {c.name: c.detail for c in verdict.checks}
