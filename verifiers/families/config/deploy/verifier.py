"""Configuration judged by trial deployment: the real nginx, HAProxy or promtool in the sandbox.

One sandbox run per verification. The guest harness (``deploy.guest.harness``) gets the
candidate's config as ``candidate.conf`` and the trial's settings on stdin, refuses configs
that name host paths, runs the server's own check (``nginx -t``, ``haproxy -c``, ``promtool
check rules``), then for nginx and HAProxy starts the task's stub upstreams and the server on
the sandbox's loopback and sends the probes; for Prometheus rules it runs ``promtool test
rules`` once per test group. It reports data only; ``deploy.judge`` compares and counts here.

nginx takes the contents of an ``http`` block (what a site file in ``conf.d`` holds); the
harness wraps it in a main file that keeps the pid file, error log and temp paths inside the
run directory and the master in the foreground, so main-context directives (``daemon``,
``user``, ``load_module``, ``pid``) are errors. HAProxy takes a whole ``haproxy.cfg`` and runs
with ``-db`` (foreground whatever ``daemon`` says).

Host files: a config token naming an existing path outside the run directory is refused
before the server starts (the class of directives that read files: ``include``,
``ssl_certificate``, ``root``, ``errorfile``, ``-f`` ACL files, ... not a list of them), and
the sandbox's filesystem view limits what exists (the ``process`` backend shows the system
directories read-only and nothing of the host's ``/etc`` but the loader cache; the ``docker``
backend shows only the image). Binding, spawning and forking away are read from ``/proc``
after the probes; the server's session is killed at the end and, where the backend gives
every run its own pid namespace, every process of the run.

Status: ``infra_error`` when the engine binary is missing (with the command that installs
it), the sandbox has no isolation (``weak``: the server would share the host's loopback and
files) or the sandbox/harness fails; ``timeout`` when the trial outlives ``deploy_timeout_s``;
``error`` when the server rejects the config or never becomes ready; ``fail`` for a refused
or misbehaving deployment or any failed probe / rule test; else ``pass``.

It does NOT guard against: differences between this engine version and production's; probes
that do not capture what the prompt asks; a config that behaves differently under real load,
real DNS or TLS (the trial has no network beyond loopback and no certificates); URI prefixes
that happen to name an existing top-level directory (``location /usr/`` is refused).
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from typing import Any

from tasksieve.schemas import ConfigSpec, TaskRecord, Verdict
from tasksieve.schemas.config_deploy import RuleTest
from tasksieve.verifiers.families.config.deploy.guest import harness as deploy_harness
from tasksieve.verifiers.families.config.deploy.judge import judge
from tasksieve.verifiers.families.probes import ProbeInfraError
from tasksieve.verifiers.sandbox.base import Limits, Sandbox
from tasksieve.verifiers.sandbox.cpu import charge, metering
from tasksieve.verifiers.sandbox.guest import bundle

HARNESS_SOURCE = bundle(deploy_harness.__file__)
BINARIES = {"nginx": "nginx", "haproxy": "haproxy", "prometheus_rules": "promtool"}
PACKAGES = {"nginx": "nginx", "haproxy": "haproxy", "promtool": "prometheus"}
MEMORY_MB = 2048  # promtool is a Go program: its address space is far above what it uses
GRACE_S = 10.0
STEP_TIMEOUT_S = 20.0


def install_hint(binary: str) -> str:
    """The command that installs ``binary`` (what ``make setup`` runs on Debian/Ubuntu)."""
    return f"apt-get install -y {PACKAGES.get(binary, binary)}"


def missing_on_host(sandbox: Sandbox, kind: str) -> str | None:
    """The engine binary a ``process`` sandbox would not find here, else None."""
    binary = BINARIES[kind]
    if sandbox.name != "process":
        return None  # another backend's filesystem: the harness says
    found = shutil.which(binary, path="/usr/sbin:/usr/bin:/sbin:/bin")
    return None if found else binary


def rule_test_file(test: RuleTest) -> dict[str, Any]:
    """A ``promtool test rules`` file for one group (JSON is YAML; rule_files set inside)."""
    group: dict[str, Any] = {
        "interval": test.interval,
        "input_series": [s.model_dump() for s in test.input_series],
    }
    if test.alert_rule_test:
        group["alert_rule_test"] = [a.model_dump() for a in test.alert_rule_test]
    if test.promql_expr_test:
        group["promql_expr_test"] = [e.model_dump() for e in test.promql_expr_test]
    return {"evaluation_interval": test.interval, "tests": [group]}


def trial_settings(spec: ConfigSpec, kill_all: bool) -> dict[str, Any]:
    """What the harness reads from stdin for ``spec`` (never written to a file)."""
    cfg: dict[str, Any] = {
        "engine": spec.schema_kind,
        "binary": BINARIES[spec.schema_kind],
        "step_timeout_s": min(STEP_TIMEOUT_S, spec.deploy_timeout_s),
        "kill_all": kill_all,
    }
    if spec.http is not None:
        http = spec.http
        cfg.update(
            listen_port=http.listen_port,
            upstreams=[u.model_dump() for u in http.upstreams],
            probes=[p.model_dump(exclude={"expect"}) for p in http.probes],
            ready_timeout_s=http.ready_timeout_s,
            probe_timeout_s=http.probe_timeout_s,
        )
    else:
        cfg["rule_tests"] = [{"name": t.name, "file": rule_test_file(t)} for t in spec.rule_tests]
    return cfg


class DeployVerifier:
    """Trial deployment of nginx / HAProxy / Prometheus-rule configs (module docstring)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def verify(self, task: TaskRecord, solution: str) -> Verdict:
        spec = task.verifier
        if not isinstance(spec, ConfigSpec) or spec.schema_kind not in BINARIES:
            return Verdict(status="infra_error", detail="not a trial-deployed config task")
        t0 = time.monotonic()
        with metering() as meter:
            try:
                verdict = self._trial(spec, solution)
            except Exception as e:  # a broken sandbox or harness is never the candidate's fault
                verdict = Verdict(status="infra_error", detail=f"deploy verifier: {e!r}"[:500])
        verdict.duration_s = time.monotonic() - t0
        verdict.cpu_s = meter.total()
        return verdict

    def report(self, spec: ConfigSpec, solution: str) -> dict[str, Any] | None:
        """The harness's raw report of one trial (None when the config was not deployed).

        Raises ``ProbeInfraError`` when the sandbox, harness or engine is broken."""
        out = self._run(spec, solution)
        if isinstance(out, Verdict):
            if out.status == "infra_error":
                raise ProbeInfraError(out.detail)
            return None
        return out

    def _trial(self, spec: ConfigSpec, solution: str) -> Verdict:
        out = self._run(spec, solution)
        return out if isinstance(out, Verdict) else judge(spec, out, solution)

    def _run(self, spec: ConfigSpec, solution: str) -> Verdict | dict[str, Any]:
        """The trial's report, or the verdict when there is none to judge."""
        total = spec.test_count()
        if self.sandbox.describe().get("weak") is True:
            why = (
                "trial deployment needs a sandbox with its own network namespace and files "
                "(this one runs without isolation: the server would bind the host's loopback)"
            )
            return Verdict(status="infra_error", tests_total=total, detail=why)
        missing = missing_on_host(self.sandbox, spec.schema_kind)
        if missing:
            return _missing(missing, total)
        if len(solution.encode("utf-8", "replace")) > spec.max_bytes:
            why = f"config larger than {spec.max_bytes} bytes"
            return Verdict(status="error", tests_total=total, detail=why)
        nonce = secrets.token_hex(16)
        cfg = trial_settings(spec, self.sandbox.capabilities.own_pid_namespace)
        wall = spec.deploy_timeout_s + GRACE_S
        limits = Limits(wall_s=wall, cpu_s=wall, memory_mb=MEMORY_MB, max_processes=64)
        files: dict[str, bytes | str] = {
            "deploy_harness.py": HARNESS_SOURCE,
            "candidate.conf": solution,
        }
        stdin = f"{nonce}\n{json.dumps(cfg)}\n".encode()
        cmd = [self.sandbox.python, "-I", "-S", "deploy_harness.py"]
        ex = self.sandbox.run(files, cmd, limits, stdin=stdin)
        charge(ex.cpu_s)
        if ex.infra_error:
            return Verdict(status="infra_error", tests_total=total, detail=ex.infra_error[:500])
        report = _result(ex.stdout, nonce)
        if report is None:
            if ex.limit_hit == "wall":
                why = f"the trial ran past {spec.deploy_timeout_s:g} s"
                return Verdict(status="timeout", tests_total=total, detail=why, limit_hit="wall")
            tail = ex.stderr.decode("utf-8", "replace")[-400:]
            why = f"no report from the trial ({ex.limit_hit or f'exit {ex.exit_code}'}): {tail}"
            return Verdict(status="infra_error", tests_total=total, detail=why)
        if report.get("missing"):
            return _missing(str(report["missing"]), total, where="in the sandbox")
        if report.get("infra_error"):
            why = str(report["infra_error"])[:500]
            return Verdict(status="infra_error", tests_total=total, detail=why)
        return report


def _missing(binary: str, total: int, where: str = "on this machine") -> Verdict:
    why = f"{binary} is not installed {where}: {install_hint(binary)} (make setup does it)"
    return Verdict(status="infra_error", tests_total=total, detail=why)


def _result(stdout: bytes, nonce: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith(b"{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("nonce") == nonce:
                return obj
    return None
