"""The Python code verifier: candidate and tests in two sandboxes, the verdict in this process.

For ``check``/``asserts``/``pytest`` tasks the candidate runs in one sandboxed process that
only answers calls (function name and JSON arguments in, JSON value or exception out); the
tests run in a second sandboxed process holding a proxy in place of the candidate, so
expected values and assertions never live where the candidate runs, and no candidate object
(e.g. one whose ``__eq__`` is always True) reaches the tests. Only the entry point (and the
spec's opt-in ``candidate_names``) comes from the candidate: every other name the tests use
is defined in the tests process from trusted code (prompt, reference solution, setup code),
so a candidate that redefines a prompt helper changes only its own answers. On the fork
server the two are one pair run talking over their own pipe (``pair``); elsewhere this
process relays between them. Either way it counts passed/total itself against a test list it
derives from the spec; exit codes and anything the candidate prints are ignored, and a test
with no result is a fail.
``io`` tasks run the program once per case; stdout is compared here after normalisation:
``\\r\\n`` -> ``\\n``, trailing whitespace stripped from every line, trailing blank lines
dropped.

It does NOT guard against: candidates that hard-code the visible test inputs or read the
reference solution from the prompt; tests that need candidate objects rather than plain values
(see ``python_harness``); or a sandbox backend's own isolation gaps (the tests sandbox holds
the test code and the reference solution).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from typing import Any

from tasksieve.schemas import CheckResult, CodeSpec, TaskRecord, Verdict, VerdictStatus
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.families.python.guest import harness as python_harness
from tasksieve.verifiers.families.python.guest.planning import plan as plan_tests
from tasksieve.verifiers.families.python.multi import runs_samples, verify_grouped
from tasksieve.verifiers.families.python.pair import end_runs, judge_and_end
from tasksieve.verifiers.families.python.pair import fails as _fails
from tasksieve.verifiers.families.python.pair import verdict as _verdict
from tasksieve.verifiers.sandbox.base import Execution, Limits, Sandbox, SpawnedRun, sum_cpu
from tasksieve.verifiers.sandbox.guest import bundle
from tasksieve.verifiers.sandbox.pipes import Pump, Reader
from tasksieve.verifiers.sandbox.warm import register_warm_script

HARNESS_SOURCE = bundle(python_harness.__file__)  # its codec, planning and wire inlined
register_warm_script(HARNESS_SOURCE)

# CPython 3.11 before 3.11.9 can fail ast.parse with "AST constructor recursion depth
# mismatch" when threads parse at the same time (gh-106905); verifiers run in thread pools.
AST_LOCK = threading.Lock()
_MAX_LINE = 4_000_000
_STARTUP_GRACE_S = 2.0


def normalise_output(text: str) -> str:
    """Normalise program output for io comparison (see the module docstring)."""
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


class PythonVerifier(Verifier):
    """Judges Python solutions for ``code`` tasks in all four test styles."""

    family = "code"

    def __init__(
        self,
        sandbox: Sandbox,
        python: str | None = None,
        timeout_factor: float = 5.0,
        timeout_floor_s: float = 1.0,
        reference_slack: float = 3.0,
    ) -> None:
        super().__init__(sandbox)
        if timeout_factor < 1 or timeout_floor_s <= 0 or reference_slack < 1:
            raise ValueError(
                "need timeout_factor >= 1, timeout_floor_s > 0 and reference_slack >= 1, got "
                f"{timeout_factor}, {timeout_floor_s}, {reference_slack}"
            )
        self.python = python or sandbox.python
        self.timeout_factor = timeout_factor
        self.timeout_floor_s = timeout_floor_s
        self.reference_slack = reference_slack
        self._reference_s: dict[tuple[str, int], float] = {}
        self._call = threading.local()  # .reference_s: this call's own (verify_with_reference)

    def timeout_for(self, task: TaskRecord, solution: str) -> float:
        """The time limit for ``solution``: scaled from the reference's measured runtime.

        The reference itself gets ``timeout_s * reference_slack`` (a slow machine must not fail
        it); once it has passed here (or when the call brings its own), other solutions get
        ``max(timeout_floor_s, timeout_factor * reference runtime)``; before that, ``timeout_s``.
        """
        spec = task.verifier
        assert isinstance(spec, CodeSpec)
        if solution == task.reference_solution:
            return spec.timeout_s * self.reference_slack
        ref = getattr(self._call, "reference_s", None)
        if ref is None:
            ref = self._reference_s.get((task.id, hash(task.reference_solution)))
        if ref is None:
            return spec.timeout_s
        return max(self.timeout_floor_s, self.timeout_factor * ref)

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        """Run ``solution`` against ``task`` and return the verdict (never raises for it)."""
        spec = task.verifier
        if not isinstance(spec, CodeSpec):
            return Verdict(status="infra_error", detail=f"not a code task: {spec.family}")
        t0 = time.monotonic()
        timeout = self.timeout_for(task, solution)
        try:
            if spec.style == "io":
                v = self._io(spec, solution, timeout)
            else:
                v = self._relay(task, spec, solution, timeout)
        except Exception as e:  # a bug or broken sandbox here is never the solution's fault
            v = Verdict(status="infra_error", detail=f"verifier failed: {type(e).__name__}: {e}")
        v.duration_s = time.monotonic() - t0
        self._learn(task, solution, v)
        return v

    def _learn(self, task: TaskRecord, solution: str, v: Verdict) -> None:
        if v.status == "pass" and solution == task.reference_solution:
            key = (task.id, hash(task.reference_solution))
            self._reference_s[key] = max(self._reference_s.get(key, 0.0), v.duration_s)

    def verify_many(self, task: TaskRecord, solutions: list[str]) -> list[Verdict]:
        """``verify`` of each solution, in one sandbox entry per time limit where the sandbox
        runs several samples of a task at once (``multi``); a sample that entry could not
        judge, and every sample elsewhere, is verified alone."""
        spec = task.verifier
        got: list[Verdict | None] = [None] * len(solutions)
        if isinstance(spec, CodeSpec) and spec.style != "io" and runs_samples(self.sandbox):
            cfg, names = self._plan(task, spec)
            timeouts = [self.timeout_for(task, s) for s in solutions]
            cmd = [self.python, "-I", "-S"]
            limits = [
                Limits(wall_s=t + _STARTUP_GRACE_S, cpu_s=t, memory_mb=spec.memory_mb)
                for t in timeouts
            ]
            got = verify_grouped(self.sandbox, HARNESS_SOURCE, cmd, cfg, names, solutions, limits)  # type: ignore[arg-type]
        out: list[Verdict] = []
        for v, sol in zip(got, solutions, strict=True):
            if v is None:
                v = self.verify(task, sol)
            else:
                self._learn(task, sol, v)
            out.append(v)
        return out

    def verify_with_reference(
        self, task: TaskRecord, solution: str, reference_s: float | None
    ) -> Verdict:
        """``verify`` with ``reference_s`` in place of a learned runtime, for this call only."""
        self._call.reference_s = reference_s
        try:
            return self.verify(task, solution)
        finally:
            self._call.reference_s = None

    def calibrate(self, task: TaskRecord, reference_s: float) -> None:
        """Use a reference runtime measured by another verifier instance (the gates' one)."""
        key = (task.id, hash(task.reference_solution))
        self._reference_s[key] = max(self._reference_s.get(key, 0.0), reference_s)

    def trivial_solutions(self, task: TaskRecord) -> list[str]:
        """An empty solution and a do-nothing stub; both must fail a meaningful task."""
        spec = task.verifier
        if isinstance(spec, CodeSpec) and spec.entry_point:
            return ["", f"def {spec.entry_point}(*args, **kwargs):\n    return None\n"]
        return ["", "pass\n"]

    # ------------------------------------------------------------------ io style
    def _io(self, spec: CodeSpec, solution: str, timeout: float) -> Verdict:
        limits = Limits(wall_s=timeout, cpu_s=timeout, memory_mb=spec.memory_mb)
        checks: list[CheckResult] = []
        status: VerdictStatus = "pass"
        limit_hit: str | None = None
        detail = ""
        cpu: list[float | None] = []
        for i, case in enumerate(spec.io_cases):
            name = f"io_{i}"
            if status in ("timeout", "error", "infra_error"):
                checks.append(CheckResult(name=name, passed=False, detail="not run"))
                continue
            ex = self.sandbox.run(
                {"solution.py": solution},
                [self.python, "-I", "-S", "solution.py"],
                limits,
                stdin=case.stdin.encode(),
            )
            cpu.append(ex.cpu_s)
            ok, why = _judge_io(ex, case.stdout)
            checks.append(CheckResult(name=name, passed=ok, detail=why))
            if ex.infra_error:
                status, detail = "infra_error", ex.infra_error
            elif ex.limit_hit in ("wall", "cpu"):
                status, limit_hit, detail = "timeout", ex.limit_hit, f"{name}: time limit"
            elif i == 0 and ex.exit_code not in (0, None) and b"SyntaxError" in ex.stderr:
                status, detail = "error", "solution does not compile: " + _tail(ex.stderr)
            elif not ok and status == "pass":
                status, detail = "fail", f"{name}: {why}"
            limit_hit = limit_hit or ex.limit_hit
        verdict = _verdict(status, checks, detail, limit_hit)
        return verdict.model_copy(update={"cpu_s": sum_cpu(cpu)})

    # ------------------------------------------------------------------ function styles
    def _plan(self, task: TaskRecord, spec: CodeSpec) -> tuple[dict[str, Any], list[str]]:
        """The tests process's config and the planned test names, counted here."""
        cfg: dict[str, Any] = {
            "style": spec.style,
            "entry_point": spec.entry_point,
            "candidate_names": spec.candidate_functions(),
            "trusted": [task.prompt, task.reference_solution],
            "test_code": spec.test_code,
            "asserts": spec.asserts,
            "setup_code": spec.setup_code,
            "prefetch": True,  # a check's leading certain calls go in one message (prefetch)
        }
        with AST_LOCK:
            names = plan_tests(cfg)
        declared = spec.test_count() if spec.style == "pytest" else 0
        names += [f"declared_test_{i}" for i in range(len(names), declared)]
        return cfg, names

    def _relay(self, task: TaskRecord, spec: CodeSpec, solution: str, timeout: float) -> Verdict:
        cfg, names = self._plan(task, spec)
        caps = self.sandbox.capabilities
        if not caps.spawn:
            return Verdict(
                status="infra_error",
                tests_total=len(names),
                detail=f"sandbox {self.sandbox.name!r} cannot start interactive "
                "sessions (needs spawn())",
            )
        wall = timeout + _STARTUP_GRACE_S
        limits = Limits(wall_s=wall, cpu_s=timeout, memory_mb=spec.memory_mb)
        cmd = [self.python, "-I", "-S", "harness.py"]
        if caps.paired_runs:
            pair = self.sandbox.spawn_pair(
                ({"harness.py": HARNESS_SOURCE, "solution.py": solution}, [*cmd, "candidate"]),
                ({"tests.json": json.dumps(cfg)}, [*cmd[:3], "/tmp/harness.py", "pair-tests"]),
                limits,
            )
            return judge_and_end(pair, names, time.monotonic() + wall)
        cand = self.sandbox.spawn(
            {"harness.py": HARNESS_SOURCE, "solution.py": solution}, [*cmd, "candidate"], limits
        )
        try:
            tests = self.sandbox.spawn(
                {"harness.py": HARNESS_SOURCE, "tests.json": json.dumps(cfg)},
                [*cmd, "tests"],
                limits,
            )
        except BaseException:
            cand.close()
            raise
        try:
            v = _Session(cand, tests, time.monotonic() + wall).run(names)
        finally:
            cpu = end_runs([cand, tests])
        return v.model_copy(update={"cpu_s": cpu})


class _Session:
    """Relays calls between the tests and the candidate process and collects results."""

    def __init__(self, cand: SpawnedRun, tests: SpawnedRun, deadline: float) -> None:
        self.cand, self.tests, self.deadline = cand, tests, deadline
        self.pump = Pump()
        assert cand.popen.stdout and cand.popen.stderr and tests.popen.stdout
        assert tests.popen.stderr
        self.c_out = self.pump.add_reader(cand.popen.stdout.fileno(), _MAX_LINE)
        self.c_err = self.pump.add_reader(cand.popen.stderr.fileno(), 8192)
        self.t_out = self.pump.add_reader(tests.popen.stdout.fileno(), _MAX_LINE)
        self.t_err = self.pump.add_reader(tests.popen.stderr.fileno(), 8192)
        self.timed_out = False

    def line(self, r: Reader) -> dict[str, Any] | None:
        """The next JSON object from ``r``; None on EOF, overflow, garbage or the deadline."""
        while True:
            raw = r.take_line()
            if raw is not None:
                try:
                    obj = json.loads(raw)
                except ValueError:
                    return None
                return obj if isinstance(obj, dict) else None
            if r.eof or r.overflow:
                return None
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                return None
            self.pump.poll(min(left, 0.25))

    def send(self, proc: SpawnedRun, obj: dict[str, Any]) -> None:
        assert proc.popen.stdin
        self.pump.write(proc.popen.stdin.fileno(), (json.dumps(obj) + "\n").encode())

    def run(self, names: list[str]) -> Verdict:
        loaded = self.line(self.c_out)
        if loaded is None or loaded.get("op") != "loaded":
            if self.timed_out or _cpu_killed(self.cand, self.c_out):
                return _verdict(
                    "timeout",
                    _fails(names, "timed out while loading"),
                    "time limit while loading the solution",
                    "wall",
                )
            why = "solution exited or broke the protocol while loading"
            return _verdict("error", _fails(names, why), why + _err_tail(self.c_err))
        if loaded.get("error") is not None:
            why = f"solution did not load: {str(loaded['error'])[:300]}"
            return _verdict("error", _fails(names, "solution did not load"), why)
        results: dict[str, CheckResult] = {}
        cand_alive, done = True, False
        while not done:
            msg = self.line(self.t_out)
            if msg is None:
                break
            op = msg.get("op")
            if op == "call":
                reply: dict[str, Any] | None = None
                if cand_alive:
                    self.send(self.cand, {k: msg.get(k) for k in ("fn", "args", "kwargs")})
                    reply = self.line(self.c_out)
                    if self.timed_out:
                        break
                if reply is None or not ({"ok", "exc"} & reply.keys()):
                    cand_alive = False
                    reply = {"crash": "candidate process gone or broke the protocol"}
                self.send(self.tests, reply)
            elif op == "result" and msg.get("name") in names and msg["name"] not in results:
                name = str(msg["name"])
                results[name] = CheckResult(
                    name=name,
                    passed=msg.get("passed") is True,
                    detail=str(msg.get("detail", ""))[:500],
                )
            elif op == "done":
                done = True
        checks = [
            results.get(n) or CheckResult(name=n, passed=False, detail="no result") for n in names
        ]
        if self.timed_out or _cpu_killed(self.cand, self.c_out):
            return _verdict("timeout", checks, "time limit", "wall" if self.timed_out else "cpu")
        if not done:
            return _verdict(
                "infra_error",
                checks,
                "test harness ended without finishing" + _err_tail(self.t_err),
            )
        ok = all(c.passed for c in checks)
        first = next((c for c in checks if not c.passed), None)
        return _verdict(
            "pass" if ok else "fail",
            checks,
            "" if first is None else f"{first.name}: {first.detail}"[:500],
        )


# ---------------------------------------------------------------------- helpers
def _cpu_killed(proc: SpawnedRun, out: Reader) -> bool:
    """Whether the process died of its CPU limit (waits briefly for it once its pipe closed)."""
    if out.eof:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=1.0)
    code = proc.popen.poll()
    return code is not None and code in (128 + 24, -24)  # SIGXCPU


def _judge_io(ex: Execution, expected: str) -> tuple[bool, str]:
    if ex.limit_hit:
        return False, f"limit hit: {ex.limit_hit}"
    if ex.exit_code != 0:
        return False, f"exit code {ex.exit_code}: {_tail(ex.stderr)}"
    got = normalise_output(ex.stdout.decode("utf-8", errors="replace"))
    if got == normalise_output(expected):
        return True, ""
    return False, f"expected {normalise_output(expected)[:80]!r}, got {got[:80]!r}"


def _tail(b: bytes) -> str:
    return b.decode("utf-8", errors="replace").strip()[-300:]


def _err_tail(r: Reader) -> str:
    t = _tail(bytes(r.buf))
    return f" ({t})" if t else ""
