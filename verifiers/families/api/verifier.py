"""The API-workflow verifier: a boto3 program against moto in the sandbox, judged by final state.

One sandbox run per verification: ``api_harness`` starts moto on the sandbox's own loopback
(the sandbox has no other network), seeds ``initial_state`` through the API, runs the
candidate with fake credentials and ``AWS_ENDPOINT_URL``, kills it, reads the final state back
through the API and prints it as one JSON line tagged with a nonce this process sent on stdin.
The expected state never enters the sandbox; this process compares and counts: one check per
expected object, absent object, queue and log group. S3 contents compare by sha256 of the
exact bytes; queues and log groups compare as multisets when ``order_insensitive`` (else in
receive order / timestamp order over all streams). A queue still holding in-flight or delayed
messages (received but not deleted) is not equal to any expected list.

Status: ``infra_error`` when the sandbox or harness fails before the candidate runs or a
service cannot be read back; ``timeout`` when the candidate outlives ``timeout_s`` (checks are
still reported); ``pass`` when every check passes (a non-zero exit after a correct final state
still passes: the state is the spec); otherwise ``error`` with the stderr tail if the
candidate exited non-zero, else ``fail``. No result line after the candidate started is
``error`` (the candidate can kill the harness, which runs under the same uid).

The candidate's API calls (service, operation, path, HTTP status) are returned by
``verify_detailed`` and summarised at the end of ``Verdict.detail``.

It does NOT guard against: moto diverging from real AWS semantics; candidates that hard-code
the expected result from the prompt; a sandbox backend's own isolation gaps (with
``isolation='none'`` the candidate has the host network and files). Reading back is capped
(objects, messages, events), so a candidate that floods a service may fail a check it would
otherwise pass.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sysconfig
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tasksieve.schemas import ApiSpec, CheckResult, TaskRecord, Verdict, VerdictStatus
from tasksieve.verifiers.families.api.guest import harness as api_harness
from tasksieve.verifiers.families.base import Verifier
from tasksieve.verifiers.sandbox.base import Limits, Sandbox
from tasksieve.verifiers.sandbox.cpu import charge, metering
from tasksieve.verifiers.sandbox.guest import bundle

HARNESS_SOURCE = bundle(api_harness.__file__)  # its gate and state read-back inlined
HARNESS_MEMORY_MB = 2048
STARTUP_GRACE_S = 30.0
MAX_OUTPUT_BYTES = 16_000_000
MISSING_HINT = (
    "moto/boto3 not importable in the sandbox (the sandbox must show site_paths() read-only); "
)


@dataclass
class ApiOutcome:
    """A verdict plus what the harness reported: the candidate's API calls and final state."""

    verdict: Verdict
    calls: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    candidate: dict[str, Any] = field(default_factory=dict)  # exit_code, timed_out, stderr_tail


def warm_source(site: list[str]) -> str:
    """The harness as registered with the family's own fork server: at that server's boot it
    imports and builds what every run needs (the harness's ``preload``); as ``__main__`` it is the
    plain harness (the call comes after the harness's own exit)."""
    return f'{HARNESS_SOURCE}\n\nif __name__ == "__warm__":\n    preload({site!r})\n'


def site_paths(sandbox: Sandbox) -> list[str]:
    """Where boto3/moto live inside ``sandbox`` (the host's site-packages as the backend
    declares them); when it declares none, the interpreter's own paths."""
    inside = list(sandbox.capabilities.site_packages)
    if inside:
        return inside
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


class ApiVerifier(Verifier):
    """Judges boto3 programs for ``api`` tasks by the final state of emulated S3/SQS/Logs."""

    family = "api"

    def __init__(
        self,
        sandbox: Sandbox,
        python: str | None = None,
        site: list[str] | None = None,
        warm: bool = True,
    ) -> None:
        super().__init__(sandbox)
        self.python = python or sandbox.python
        # where boto3/moto live inside the sandbox; ``site`` None: this venv's
        self.site_paths = site if site is not None else site_paths(sandbox)
        # Runs go to a fork server of the family's own with moto and boto3 loaded (``warm``
        # and the sandbox's interpreter; a backend without one gives back ``sandbox``).
        warm = warm and self.python == sandbox.python
        self.source = warm_source(self.site_paths) if warm else HARNESS_SOURCE
        self.runner = sandbox.dedicated(self.source) if warm else sandbox

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        """Run ``solution`` against ``task`` and return the verdict (never raises for it)."""
        return self.verify_detailed(task, solution).verdict

    def verify_detailed(self, task: TaskRecord, solution: str) -> ApiOutcome:
        """Like ``verify`` but also return the recorded API calls and the final state."""
        spec = task.verifier
        if not isinstance(spec, ApiSpec):
            return ApiOutcome(
                Verdict(status="infra_error", detail=f"not an api task: {spec.family}")
            )
        t0 = time.monotonic()
        with metering() as meter:
            try:
                out = self._run(spec, solution)
            except Exception as e:  # a bug or broken sandbox here is never the solution's fault
                why = f"verifier failed: {type(e).__name__}: {e}"
                out = ApiOutcome(Verdict(status="infra_error", detail=why))
        out.verdict.duration_s = time.monotonic() - t0
        out.verdict.cpu_s = meter.total()
        return out

    def trivial_solutions(self, task: TaskRecord) -> list[str]:
        """An empty program and ``pass``; both must fail a meaningful task."""
        return ["", "pass\n"]

    # ------------------------------------------------------------------ running
    def _run(self, spec: ApiSpec, solution: str) -> ApiOutcome:
        nonce = secrets.token_hex(16)
        cfg = {
            "initial": spec.initial_state.model_dump(),
            "timeout_s": spec.timeout_s,
            "site_paths": self.site_paths,
            "python": self.python,
            "candidate_memory_mb": spec.memory_mb,
            "kill_all": self.runner.capabilities.own_pid_namespace,
        }
        wall = spec.timeout_s + STARTUP_GRACE_S
        limits = Limits(
            wall_s=wall,
            cpu_s=wall,
            memory_mb=max(spec.memory_mb, HARNESS_MEMORY_MB),
            max_processes=256,
            max_output_bytes=MAX_OUTPUT_BYTES,
        )
        files: dict[str, bytes | str] = {
            "api_harness.py": self.source,
            "api_config.json": json.dumps(cfg),
            "solution.py": solution,
        }
        cmd = [self.python, "-I", "-S", "api_harness.py"]
        ex = self.runner.run(files, cmd, limits, stdin=(nonce + "\n").encode())
        charge(ex.cpu_s)
        events = _events(ex.stdout, nonce)
        tail = _text_tail(ex.stderr)
        total = spec.test_count()
        if ex.infra_error:
            return _infra(f"sandbox: {ex.infra_error}", total)
        if "infra_error" in events:
            why = str(events["infra_error"].get("detail", ""))
            hint = MISSING_HINT if "No module named" in why else ""
            return _infra(f"harness: {hint}{why[-700:]}", total)
        if "ready" not in events:
            why = ex.limit_hit or f"exit {ex.exit_code}"
            return _infra(f"harness did not start ({why}): {tail}", total)
        if "result" not in events:
            return ApiOutcome(
                Verdict(
                    status="error",
                    tests_total=total,
                    detail=f"harness gave no result after the candidate ran "
                    f"({ex.limit_hit or f'exit {ex.exit_code}'}; killed by the candidate?): {tail}",
                    limit_hit=ex.limit_hit,
                )
            )
        return judge(spec, events["result"])


def judge(spec: ApiSpec, result: dict[str, Any]) -> ApiOutcome:
    """Compare the harness's report with the expected state and build the verdict."""
    calls = list(result.get("calls", []))
    state = dict(result.get("state", {}))
    errors: dict[str, str] = dict(result.get("read_errors", {}))
    total = spec.test_count()
    needed = _needed_services(spec)
    broken = {s: e for s, e in errors.items() if s in needed}
    if broken:
        return _infra(f"could not read back {', '.join(sorted(broken))}: {broken}", total)
    checks = compare(spec, state)
    cand = dict(result.get("candidate", {}))
    status: VerdictStatus
    limit_hit: str | None = None
    failed = [c for c in checks if not c.passed]
    exit_code = cand.get("exit_code")
    if cand.get("timed_out"):
        status, limit_hit = "timeout", "wall"
        detail = f"candidate ran past {spec.timeout_s:g}s"
    elif not failed:
        status, detail = "pass", f"{len(checks)} checks passed"
        if exit_code not in (0, None):
            detail += f" (candidate exited {exit_code})"
    elif exit_code not in (0, None):
        status = "error"
        detail = f"candidate exited {exit_code}: {str(cand.get('stderr_tail', '')).strip()[-400:]}"
    else:
        status, detail = "fail", f"{failed[0].name}: {failed[0].detail}"
    detail = f"{detail[:700]} | {summarise_calls(calls, int(result.get('calls_dropped', 0)))}"
    verdict = Verdict(
        status=status,
        tests_passed=sum(c.passed for c in checks),
        tests_total=len(checks),
        detail=detail[:1000],
        checks=checks,
        limit_hit=limit_hit,
        trace=call_trace(calls),
    )
    return ApiOutcome(verdict, calls, state, cand)


def compare(spec: ApiSpec, state: dict[str, Any]) -> list[CheckResult]:
    """One CheckResult per expected object, absent object, queue and log group."""
    exp = spec.expected_state
    s3 = state.get("s3", {})
    buckets: dict[str, dict[str, Any]] = s3.get("buckets", {})
    s3_truncated = bool(s3.get("truncated"))
    checks: list[CheckResult] = []
    for bucket, objects in exp.objects.items():
        for key, content in objects.items():
            checks.append(_object_check(bucket, key, content, buckets, s3_truncated))
    for bucket, keys in exp.absent_objects.items():
        for key in keys:
            present = key in buckets.get(bucket, {})
            unsure = s3_truncated and not present
            why = "present" if present else ("listing truncated" if unsure else "")
            checks.append(CheckResult(name=f"absent {bucket}/{key}", passed=not why, detail=why))
    queues: dict[str, Any] = state.get("sqs", {}).get("queues", {})
    for q, expected in exp.queue_messages.items():
        checks.append(_queue_check(q, expected, queues.get(q), exp.order_insensitive))
    groups: dict[str, Any] = state.get("logs", {}).get("groups", {})
    for g, expected in exp.log_events.items():
        checks.append(_log_check(g, expected, groups.get(g), exp.order_insensitive))
    return checks


def _object_check(
    bucket: str, key: str, content: str, buckets: dict[str, dict[str, Any]], truncated: bool
) -> CheckResult:
    name = f"object {bucket}/{key}"
    if bucket not in buckets:
        return CheckResult(name=name, passed=False, detail="bucket missing")
    got = buckets[bucket].get(key)
    if got is None:
        why = "missing (listing truncated)" if truncated else "missing"
        return CheckResult(name=name, passed=False, detail=why)
    want = content.encode("utf-8")
    if got.get("sha256") == hashlib.sha256(want).hexdigest():
        return CheckResult(name=name, passed=True)
    detail = f"content differs: expected {content[:150]!r}, got {str(got.get('preview'))[:150]!r}"
    return CheckResult(name=name, passed=False, detail=detail)


def _same(expected: list[str], got: list[str], order_insensitive: bool) -> bool:
    return Counter(expected) == Counter(got) if order_insensitive else expected == got


def _queue_check(
    q: str, expected: list[str], got: dict[str, Any] | None, unordered: bool
) -> CheckResult:
    name = f"queue {q}"
    if got is None:
        return CheckResult(name=name, passed=False, detail="queue missing")
    hidden = int(got.get("hidden", 0))
    if hidden:
        why = f"{hidden} message(s) in flight or delayed (received but not deleted?)"
        return CheckResult(name=name, passed=False, detail=why)
    msgs = list(got.get("messages", []))
    if _same(expected, msgs, unordered):
        return CheckResult(name=name, passed=True)
    return CheckResult(name=name, passed=False, detail=_diff(expected, msgs))


def _log_check(
    g: str, expected: list[str], got: dict[str, Any] | None, unordered: bool
) -> CheckResult:
    name = f"log group {g}"
    if got is None:
        return CheckResult(name=name, passed=False, detail="log group missing")
    msgs = list(got.get("messages", []))
    if _same(expected, msgs, unordered):
        return CheckResult(name=name, passed=True)
    return CheckResult(name=name, passed=False, detail=_diff(expected, msgs))


def _diff(expected: list[str], got: list[str]) -> str:
    missing = list((Counter(expected) - Counter(got)).elements())[:3]
    extra = list((Counter(got) - Counter(expected)).elements())[:3]
    if not missing and not extra:
        return f"same messages, wrong order: got {got[:5]!r}"[:300]
    return f"{len(got)} found; missing {missing!r}; unexpected {extra!r}"[:300]


def call_trace(calls: list[dict[str, Any]], limit: int = 500) -> list[str]:
    """One line per API call, in order: ``service.Operation path status``."""
    lines = []
    for c in calls[:limit]:
        op = f"{c.get('service', '?')}.{c.get('op', '?')}"
        lines.append(f"{op} {c.get('path', '')} {c.get('status', '')}".strip()[:300])
    return lines


def summarise_calls(calls: list[dict[str, Any]], dropped: int = 0) -> str:
    """A compact call sequence, e.g. ``api calls (3): s3.GetObject, sqs.SendMessage x2``."""
    runs: list[list[Any]] = []
    for c in calls:
        op = f"{c.get('service', '?')}.{c.get('op', '?')}"
        if c.get("status", 200) >= 400:
            op += f"[{c.get('status')}]"
        if runs and runs[-1][0] == op:
            runs[-1][1] += 1
        else:
            runs.append([op, 1])
    text = ", ".join(op if n == 1 else f"{op} x{n}" for op, n in runs)
    n = len(calls) + dropped
    return f"api calls ({n}): {text[:240] or 'none'}"


def _needed_services(spec: ApiSpec) -> set[str]:
    exp = spec.expected_state
    needed: set[str] = set()
    if exp.objects or exp.absent_objects:
        needed.add("s3")
    if exp.queue_messages:
        needed.add("sqs")
    if exp.log_events:
        needed.add("logs")
    return needed


def _events(stdout: bytes, nonce: str) -> dict[str, dict[str, Any]]:
    """The harness's nonce-tagged JSON lines by event name (the first of each wins)."""
    found: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        if not line.startswith(b"{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("nonce") == nonce:
            found.setdefault(str(obj.get("event")), obj)
    return found


def _text_tail(b: bytes) -> str:
    return b.decode("utf-8", errors="replace").strip()[-500:]


def _infra(detail: str, total: int) -> ApiOutcome:
    return ApiOutcome(Verdict(status="infra_error", tests_total=total, detail=detail[:1000]))
