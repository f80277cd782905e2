"""Trial-deployed config kinds: the schema, the judge, and real nginx / HAProxy / promtool runs
in the process sandbox (hostile configs included); the docker backend where an engine is up."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from tasksieve.schemas import ConfigSpec, TaskRecord, Verdict
from tasksieve.transforms.samplers.extract import extract_solution
from tasksieve.verifiers.families.config.deploy import differ
from tasksieve.verifiers.families.config.deploy.judge import judge, server_lines
from tasksieve.verifiers.families.config.deploy.verifier import install_hint
from tasksieve.verifiers.families.config.verifier import ConfigVerifier
from tasksieve.verifiers.feedback import feedback_message

ROOT = Path(__file__).resolve().parents[2]
TASKS = {
    t.id: t
    for t in (
        TaskRecord.model_validate_json(ln)
        for ln in (ROOT / "examples/tasks/config_deploy.jsonl").read_text().splitlines()
        if ln.strip()
    )
}
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"


def _needs(binary: str) -> None:
    if shutil.which(binary, path=SBIN) is None:
        pytest.skip(f"{binary} is not installed: {install_hint(binary)}")


def _task(kind: str, http: dict | None = None, **extra: object) -> TaskRecord:
    fmt = "yaml" if kind == "prometheus_rules" else "text"
    spec = {"family": "config", "schema_kind": kind, "format": fmt, **extra}
    if http is not None:
        spec["http"] = http
    return TaskRecord.model_validate(
        {"id": "t", "family": "config", "prompt": "p", "verifier": spec, "reference_solution": ""}
    )


ONE_PROBE = {
    "listen_port": 8080,
    "probes": [{"name": "home", "path": "/", "expect": {"status": 200}}],
}


# ------------------------------------------------------------------ schema (no engine)
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"schema_kind": "nginx", "format": "text"}, "needs http"),
        ({"schema_kind": "nginx", "format": "yaml", "http": ONE_PROBE}, "needs format 'text'"),
        ({"schema_kind": "prometheus_rules", "format": "yaml"}, "needs rule_tests"),
        ({"schema_kind": "jsonschema", "json_schema": {}, "http": ONE_PROBE}, "deploy kinds"),
        (
            {
                "schema_kind": "haproxy",
                "format": "text",
                "http": {**ONE_PROBE, "upstreams": [{"name": "a", "port": 8080}]},
            },
            "ports repeat",
        ),
        (
            {
                "schema_kind": "nginx",
                "format": "text",
                "http": {
                    "listen_port": 8080,
                    "probes": [{"name": "x", "path": "/", "expect": {"upstream": "ghost"}}],
                },
            },
            "unknown upstream",
        ),
        (
            {
                "schema_kind": "nginx",
                "format": "text",
                "http": {"listen_port": 8080, "probes": [{"name": "x", "path": "/", "expect": {}}]},
            },
            "checks nothing",
        ),
    ],
)
def test_spec_refuses_inconsistent_deploy_fields(spec: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ConfigSpec.model_validate({"family": "config", **spec})


def test_test_count_is_one_deploy_check_plus_probes_or_rule_tests() -> None:
    counts = {t.id: t.verifier.test_count() for t in TASKS.values()}
    assert counts["config_deploy.nginx_api_split"] == 6
    assert counts["config_deploy.prom_error_ratio"] == 5


# ------------------------------------------------------------------ judge and feedback
def test_server_lines_hide_quoted_text_the_config_does_not_contain() -> None:
    out = '2026/01/01 10:00:00 [emerg] 7#7: unknown directive "root:x:0:0" in /run/x/a.conf:1'
    line = server_lines(out, "include a.conf;", "/run/x")
    assert "root:x" not in line and '"..."' in line and "[emerg]" in line and "/run/x" not in line


def test_spawned_programs_and_stopped_server_fail_the_deployment() -> None:
    task = _task("nginx", ONE_PROBE)
    spec = task.verifier
    assert isinstance(spec, ConfigSpec)
    base = {"syntax": {"ok": True}, "ready": "ready", "binds": ["127.0.0.1:8080"], "running": True}
    probe = {"name": "home", "status": 200, "headers": [], "body": "", "received": []}
    assert judge(spec, {**base, "probes": [probe]}, "").status == "pass"
    spawned = judge(spec, {**base, "spawned": ["/usr/bin/sleep"], "probes": [probe]}, "")
    assert spawned.status == "fail" and "other programs" in spawned.detail
    assert spawned.tests_passed == 0
    gone = judge(spec, {**base, "running": False, "exit_code": 0, "probes": [probe]}, "")
    assert gone.status == "fail" and "forked away" in gone.detail


def test_failing_feedback_shows_server_lines_but_not_the_probes() -> None:
    verdict = Verdict.model_validate(
        {
            "status": "fail",
            "tests_passed": 1,
            "tests_total": 2,
            "detail": "1 of 1 hidden checks failed",
            "checks": [
                {"name": "deploy", "passed": True},
                {"name": "probe:secret-route", "passed": False, "detail": "GET /hidden/x 404"},
            ],
        }
    )
    text = feedback_message(verdict, "config", "failing")
    assert "secret-route" not in text and "/hidden" not in text and "1 hidden checks" in text


# ------------------------------------------------------------------ mutants and probes
def test_mutants_drop_or_change_one_directive() -> None:
    task = TASKS["config_deploy.nginx_api_split"]
    found = differ.mutants(task, 20, seed=1)
    assert 0 < len(found) <= differ.MAX_MUTANTS
    assert {m.operator for m in found} == {"config.drop_directive", "config.change_directive"}
    ref = task.reference_solution.splitlines()
    for m in found:
        assert abs(len(m.solution.splitlines()) - len(ref)) <= 1
    assert differ.changed_token("127.0.0.1:9001;") == "127.0.0.1:9002;"
    assert differ.changed_token('"5m"') == '"6m"'
    probes = differ.probes(task, 10, seed=1)
    assert probes and not {p.payload["path"] for p in probes} & {"/", "/api/users?page=2"} - {"/"}


# ------------------------------------------------------------------ real engines, process
@pytest.fixture(scope="module")
def config_verifier(sandbox):  # the session's process sandbox (conftest)
    v = ConfigVerifier(sandbox)
    yield v
    v.close()


def _replay() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ln in (ROOT / "examples/replay/completions.jsonl").read_text().splitlines():
        row = json.loads(ln)
        if row["task_id"] in TASKS:
            out.setdefault(row["task_id"], []).append(row["completion"])
    return out


def _readme_passes() -> dict[str, int]:
    rows = {}
    for ln in (ROOT / "examples/README.md").read_text().splitlines():
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if len(cells) == 7 and cells[0].strip("`") in TASKS:
            rows[cells[0].strip("`")] = int(cells[5])
    return rows


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_example_reference_passes_and_replay_matches_readme(config_verifier, task_id) -> None:
    task = TASKS[task_id]
    spec = task.verifier
    assert isinstance(spec, ConfigSpec)
    _needs({"prometheus_rules": "promtool"}.get(spec.schema_kind, spec.schema_kind))
    ref = config_verifier.verify(task, task.reference_solution)
    assert ref.status == "pass", ref.detail
    assert ref.tests_passed == ref.tests_total == spec.test_count()
    comps = _replay()[task_id]
    passed = sum(
        config_verifier.verify(task, extract_solution(c, "config")).status == "pass" for c in comps
    )
    assert passed == _readme_passes()[task_id]


def _engine_pids() -> set[int]:
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                exe = os.readlink(f"/proc/{name}/exe")
            except OSError:
                continue
            if os.path.basename(exe) in ("nginx", "haproxy"):
                found.add(int(name))
    return found


NGINX_OK = "server { listen 127.0.0.1:8080; location / { proxy_pass http://127.0.0.1:9001; } }\n"
HTTP = {
    "listen_port": 8080,
    "upstreams": [{"name": "app", "port": 9001}],
    "probes": [{"name": "home", "path": "/", "expect": {"status": 200, "upstream": "app"}}],
}
HAPROXY_OK = (
    "defaults\n  mode http\n  timeout connect 1s\n  timeout client 2s\n  timeout server 2s\n"
    "frontend f\n  bind 127.0.0.1:8080\n  default_backend b\n"
    "backend b\n  server s 127.0.0.1:9001\n"
)


HOSTILE = [
    ("nginx", "include /etc/passwd;\n" + NGINX_OK, "fail", "refused"),
    ("nginx", "include ../../../../etc/hostname;\n" + NGINX_OK, "fail", "refused"),
    ("nginx", NGINX_OK.replace("location / {", "location / { root /;"), "fail", "root /"),
    (
        "nginx",
        NGINX_OK.replace("location / {", "ssl_certificate /etc/ssl/certs/x.pem; location / {"),
        "fail",
        "refused",
    ),
    ("nginx", NGINX_OK.replace("127.0.0.1:8080", "8080"), "fail", "0.0.0.0:8080"),
    ("nginx", NGINX_OK + "server { listen 127.0.0.1:8090; }\n", "fail", "127.0.0.1:8090"),
    ("nginx", "daemon on;\n" + NGINX_OK, "error", "not allowed here"),
    ("nginx", "server { listen 127.0.0.1:8080", "error", "config check"),
    ("nginx", "", "error", "listens nowhere"),
    ("haproxy", HAPROXY_OK.replace("defaults", "global\n  daemon\ndefaults"), "pass", ""),
    (
        "haproxy",
        HAPROXY_OK.replace(
            "defaults", "global\n  insecure-fork-wanted\n  external-check\ndefaults"
        ).replace(
            "server s", "option external-check\n  external-check command /bin/sh\n  server s"
        ),
        "fail",
        "refused",
    ),
    (
        "haproxy",
        HAPROXY_OK.replace("errorfile", "x") + "  errorfile 503 /etc/haproxy/e.http\n",
        "fail",
        "refused",
    ),
    ("haproxy", HAPROXY_OK.replace("127.0.0.1:8080", "0.0.0.0:8080"), "fail", "0.0.0.0"),
]


@pytest.mark.parametrize(("kind", "config", "status", "detail"), HOSTILE)
def test_hostile_and_broken_configs_get_a_verdict_and_leave_nothing(
    config_verifier, kind: str, config: str, status: str, detail: str
) -> None:
    _needs(kind)
    before = _engine_pids()
    verdict = config_verifier.verify(_task(kind, HTTP), config)
    assert (verdict.status, detail in verdict.detail) == (status, True), verdict.detail
    assert "root:x:0:0" not in verdict.model_dump_json()
    assert _engine_pids() <= before  # nothing outlives the verification


def test_a_sandbox_without_isolation_is_refused_as_infra_error() -> None:
    from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox

    with pytest.warns(RuntimeWarning, match="WEAK ISOLATION"):
        weak = ProcessSandbox(allow_weak_isolation=True, isolation="none", warm=False)
    try:
        verdict = ConfigVerifier(weak).verify(_task("nginx", HTTP), NGINX_OK)
    finally:
        weak.close()
    assert verdict.status == "infra_error" and "network namespace" in verdict.detail


def test_a_probe_that_never_gets_an_answer_fails_on_its_timeout(config_verifier) -> None:
    _needs("nginx")
    http = {**HTTP, "probe_timeout_s": 0.5}
    slow = NGINX_OK.replace("location / {", "location / { limit_rate 1;")
    verdict = config_verifier.verify(_task("nginx", http), slow)
    assert verdict.status == "fail"
    assert "timed out" in verdict.checks[1].detail or "timeout" in verdict.checks[1].detail


@pytest.mark.slow
def test_a_trial_past_its_wall_clock_is_a_timeout_and_leaves_nothing(config_verifier) -> None:
    _needs("nginx")
    http = {**HTTP, "probe_timeout_s": 60.0}
    slow = NGINX_OK.replace("location / {", "location / { limit_rate 1;")
    before = _engine_pids()
    verdict = config_verifier.verify(_task("nginx", http, deploy_timeout_s=0.5), slow)
    assert verdict.status == "timeout" and verdict.limit_hit == "wall", verdict.detail
    assert _engine_pids() <= before


def test_rule_probes_tell_a_later_alert_from_the_reference(sandbox) -> None:
    _needs("promtool")
    task = TASKS["config_deploy.prom_instance_down"]
    near = ("240s", "300s", "360s")  # around the 5 m boundary, to keep the trial short
    probes = [p for p in differ.probes(task, 100, seed=0) if p.payload["eval_time"] in near]
    late = task.reference_solution.replace("for: 5m", "for: 6m")
    ref, mutant = differ.observe(task, [task.reference_solution, late], probes, sandbox)
    apart = [p.payload["eval_time"] for p, a, b in zip(probes, ref, mutant, strict=True) if a != b]
    assert set(apart) == {"300s"}


def test_rule_check_errors_are_shown_and_rule_tests_counted(config_verifier) -> None:
    _needs("promtool")
    task = TASKS["config_deploy.prom_instance_down"]
    broken = config_verifier.verify(
        task, "groups:\n- name: x\n  rules:\n  - alert: A\n    expr: up ==\n"
    )
    assert broken.status == "error" and "config check" in broken.detail
    wrong = task.reference_solution.replace("for: 5m", "for: 15m")
    verdict = config_verifier.verify(task, wrong)
    assert verdict.status == "fail" and 0 < verdict.tests_passed < verdict.tests_total


# ------------------------------------------------------------------ docker backend
@pytest.fixture(scope="module")
def docker_verifier():
    try:
        import docker  # noqa: F401
    except ImportError as e:
        pytest.skip(f"docker SDK not installed: {e}")
    from tasksieve.verifiers.sandbox.docker.sandbox import DockerSandbox

    try:
        sb = DockerSandbox(pool_size=1)
    except RuntimeError as e:  # no engine or no image: the message names the fix
        pytest.skip(str(e))
    v = ConfigVerifier(sb)
    yield v
    v.close()
    sb.close()


@pytest.mark.docker
@pytest.mark.parametrize(
    "task_id",
    [
        "config_deploy.nginx_api_split",
        "config_deploy.haproxy_api_split",
        "config_deploy.prom_instance_down",
    ],
)
def test_docker_backend_deploys_the_examples(docker_verifier, task_id: str) -> None:
    task = TASKS[task_id]
    verdict = docker_verifier.verify(task, task.reference_solution)
    if verdict.status == "infra_error" and "not installed in the sandbox" in verdict.detail:
        pytest.skip(verdict.detail)  # an image built before the engines were added
    assert verdict.status == "pass", verdict.detail


@pytest.mark.docker
@pytest.mark.parametrize(("kind", "config", "status", "detail"), HOSTILE)
def test_docker_backend_gives_hostile_configs_the_same_verdicts(
    docker_verifier, kind: str, config: str, status: str, detail: str
) -> None:
    verdict = docker_verifier.verify(_task(kind, HTTP), config)
    if verdict.status == "infra_error" and "not installed in the sandbox" in verdict.detail:
        pytest.skip(verdict.detail)  # an image built before the engines were added
    assert (verdict.status, detail in verdict.detail) == (status, True), verdict.detail
    assert "root:x:0:0" not in verdict.model_dump_json()
