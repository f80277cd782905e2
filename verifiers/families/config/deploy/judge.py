"""Turn a trial deployment's report into a verdict (host side; see ``deploy.verifier``).

Checks, one ``CheckResult`` each: ``deploy`` (the config was accepted and the server ran as
a contained server should), then ``probe:<name>`` per HTTP probe or ``rule_test:<name>`` per
promtool test group. ``deploy`` fails, and takes every other check down with it, when the
config names host paths, the server's own check rejects it, the server never listens on
127.0.0.1:listen_port, it holds another listening address, it starts other programs, or it
exits during the probes (forks away). The verdict's detail is the reason, with the server's
own error lines; the probes' names and details appear only in their checks.

Server output is shown with quoted text that the candidate's config does not contain
replaced by ``"..."``: a config that makes the server print a file's content in an error
(``include`` of a file it may read) does not get that content back.
"""

from __future__ import annotations

import re
from typing import Any

from tasksieve.schemas import CheckResult, ConfigSpec, Verdict, VerdictStatus
from tasksieve.schemas.config_deploy import NO_UPSTREAM, HttpProbe

DETAIL = 900
_QUOTED = re.compile(r"\"([^\"\n]*)\"|'([^'\n]*)'")
_STAMP = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: ")
_CHATTER = re.compile(r"\[(notice|info|debug|NOTICE|INFO)\]")


def server_lines(output: str, candidate: str, run: str, limit: int = 12) -> str:
    """The server's error lines: run-directory prefixes dropped, foreign quoted text hidden."""

    def hide(m: re.Match[str]) -> str:
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        return m.group(0) if inner in candidate else '"..."'

    lines = []
    for line in output.splitlines():
        line = line.replace(run.rstrip("/") + "/", "").strip() if run else line.strip()
        line = _STAMP.sub(r"\1 ", line)
        if line and not _CHATTER.search(line):
            lines.append(_QUOTED.sub(hide, line))
    return " | ".join(lines[-limit:])


def judge(spec: ConfigSpec, report: dict[str, Any], candidate: str) -> Verdict:
    """The verdict for one trial's ``report`` (the harness's result line)."""
    names = _check_names(spec)
    problem, status = _deploy_problem(spec, report, candidate)
    if problem is not None:
        checks = [CheckResult(name="deploy", passed=False, detail=problem[:DETAIL])]
        checks += [CheckResult(name=n, passed=False, detail="not run") for n in names]
        return _verdict(status, checks, problem)
    if spec.http is not None:
        got = {p.get("name"): p for p in report.get("probes", [])}
        rest = [_probe_check(p, got.get(p.name)) for p in spec.http.probes]
    else:
        ran = {t.get("name"): t for t in report.get("rule_tests", [])}
        run = str(report.get("run", ""))
        rest = [_rule_check(t.name, ran.get(t.name), run) for t in spec.rule_tests]
    checks = [CheckResult(name="deploy", passed=True), *rest]
    failed = [c for c in rest if not c.passed]
    if not failed:
        return _verdict("pass", checks, f"{len(checks)} checks passed")
    return _verdict("fail", checks, f"{len(failed)} of {len(rest)} hidden checks failed")


def _verdict(status: VerdictStatus, checks: list[CheckResult], detail: str) -> Verdict:
    return Verdict(
        status=status,
        tests_passed=sum(c.passed for c in checks),
        tests_total=len(checks),
        detail=detail[:DETAIL],
        checks=checks,
        limit_hit="wall" if status == "timeout" else None,
    )


def _check_names(spec: ConfigSpec) -> list[str]:
    if spec.http is not None:
        return [f"probe:{p.name}" for p in spec.http.probes]
    return [f"rule_test:{t.name}" for t in spec.rule_tests]


def _deploy_problem(
    spec: ConfigSpec, report: dict[str, Any], candidate: str
) -> tuple[str | None, VerdictStatus]:
    """Why the deployment itself failed (and the verdict status), or (None, "pass")."""
    run = str(report.get("run", ""))
    refused = report.get("refused") or []
    if refused:
        return f"refused: names host paths outside the run directory: {', '.join(refused)}", "fail"
    syntax = report.get("syntax") or {}
    lines = server_lines(str(syntax.get("output", "")), candidate, run)
    if syntax.get("timeout"):
        return f"the server's config check ran out of time: {lines}", "timeout"
    if not syntax.get("ok"):
        return f"rejected by the server's config check: {lines}", "error"
    if spec.http is None:
        return None, "pass"
    log = server_lines(str(report.get("server_log", "")), candidate, run)
    ready = report.get("ready")
    where = f"127.0.0.1:{spec.http.listen_port}"
    binds = [b for b in report.get("binds", []) if b != where]
    if binds:
        return f"the server listens on {', '.join(binds)}; only {where} is allowed", "fail"
    spawned = report.get("spawned") or []
    if spawned:
        return f"the server started other programs: {', '.join(spawned)}", "fail"
    if ready == "exited":
        code = report.get("exit_code")
        return f"the server exited (code {code}) before listening on {where}: {log}", "error"
    if ready == "nowhere":
        return f"the server started but listens nowhere (expected {where}): {log}", "error"
    if ready != "ready":
        secs = f"{spec.http.ready_timeout_s:g}"
        return f"the server was not listening on {where} within {secs} s: {log}", "error"
    if not report.get("running"):
        code = report.get("exit_code")
        return f"the server stopped during the probes (code {code}; forked away?): {log}", "fail"
    return None, "pass"


def _headers(pairs: list[list[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in pairs:
        out.setdefault(k.lower(), []).append(v)
    return out


def _probe_check(probe: HttpProbe, got: dict[str, Any] | None) -> CheckResult:
    name = f"probe:{probe.name}"
    if got is None:
        return CheckResult(name=name, passed=False, detail="no result")
    if "error" in got:
        return CheckResult(name=name, passed=False, detail=f"no response: {got['error']}")
    why = _mismatch(probe, got)
    return CheckResult(name=name, passed=why is None, detail=(why or "")[:300])


def _mismatch(probe: HttpProbe, got: dict[str, Any]) -> str | None:
    exp = probe.expect
    if exp.status is not None and got.get("status") != exp.status:
        return f"status {got.get('status')}, expected {exp.status}"
    received = got.get("received", [])
    if exp.upstream == NO_UPSTREAM and received:
        return f"reached upstream {received[0]['upstream']}, expected none"
    if exp.upstream not in (None, NO_UPSTREAM):
        reached = [r["upstream"] for r in received]
        if reached != [exp.upstream]:
            return f"reached {reached or 'no upstream'}, expected [{exp.upstream!r}]"
    seen = received[0] if received else None
    needs_upstream = exp.upstream_path is not None or exp.upstream_headers
    if needs_upstream and seen is None:
        return "reached no upstream"
    if seen is not None:
        if exp.upstream_path is not None and seen["path"] != exp.upstream_path:
            return f"upstream saw path {seen['path']!r}, expected {exp.upstream_path!r}"
        sent = _headers(seen["headers"])
        for k, v in exp.upstream_headers.items():
            if sent.get(k.lower()) != [v]:
                return f"upstream saw {k}: {sent.get(k.lower())}, expected [{v!r}]"
        for k in exp.upstream_headers_absent:
            if k.lower() in sent:
                return f"upstream saw header {k}, expected it absent"
    back = _headers(got.get("headers", []))
    for k, v in exp.headers.items():
        if back.get(k.lower()) != [v]:
            return f"response header {k}: {back.get(k.lower())}, expected [{v!r}]"
    if exp.body_contains is not None and exp.body_contains not in got.get("body", ""):
        return f"response body does not contain {exp.body_contains!r}"
    return None


def _rule_check(name: str, got: dict[str, Any] | None, run: str) -> CheckResult:
    check = f"rule_test:{name}"
    if got is None:
        return CheckResult(name=check, passed=False, detail="not run")
    if got.get("timeout"):
        return CheckResult(name=check, passed=False, detail="promtool ran out of time")
    output = str(got.get("output", "")).replace(run.rstrip("/") + "/", "") if run else ""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    detail = "" if got.get("ok") else " | ".join(lines)
    return CheckResult(name=check, passed=bool(got.get("ok")), detail=detail[-300:])
