"""Every hostile example answer is contained: not a pass, not an infra error, host untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasksieve.pipeline.cli import main

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "examples" / "solutions" / "hostile"
TASKS = ROOT / "examples" / "tasks"

CASES = [
    ("sql_read_host_file.sql", "sql.count_shipped"),
    ("sql_attach_and_copy.sql", "sql.count_shipped"),
    ("sql_unlock_config.sql", "sql.count_shipped"),
    ("config_billion_laughs.yaml", "config.k8s_deployment_limits"),
    ("config_python_tag.yaml", "config.k8s_deployment_limits"),
    ("config_nginx_read_host_file.conf", "config_deploy.nginx_api_split"),
    ("config_nginx_public_bind.conf", "config_deploy.nginx_api_split"),
    ("config_haproxy_spawn.cfg", "config_deploy.haproxy_api_split"),
    ("api_real_endpoint.py", "api.s3_put_hello"),
    ("api_forge_state.py", "api.s3_put_hello"),
    ("code_exit_before_tests.py", "code.add"),
    ("code_always_equal.py", "code.add"),
    ("code_patch_asserts.py", "code.add"),
]


def test_every_hostile_file_is_listed() -> None:
    kinds = (".sql", ".yaml", ".py", ".conf", ".cfg")
    files = {p.name for p in HOSTILE.iterdir() if p.suffix in kinds}
    assert files == {f for f, _ in CASES}


@pytest.mark.parametrize("name,task_id", CASES, ids=[c[0] for c in CASES])
def test_hostile_answer_is_contained(
    name: str, task_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    family = task_id.split(".")[0]
    engine = {"config_deploy.nginx": "nginx", "config_deploy.haproxy": "haproxy"}
    binary = engine.get(task_id.split("_api")[0])
    if binary and shutil.which(binary, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
        pytest.skip(f"{binary} is not installed: apt-get install -y {binary}")
    marker = Path("/tmp/pwned-by-yaml")
    marker.unlink(missing_ok=True)
    code = main(
        [
            "verify",
            "--task",
            str(TASKS / f"{family}.jsonl"),
            "--task-id",
            task_id,
            "--solution",
            str(HOSTILE / name),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out  # a verdict, and not a pass (3 would be a broken sandbox)
    assert '"status": "pass"' not in out
    assert "root:x:0:0" not in out  # /etc/passwd content never reaches the verdict
    assert not marker.exists()
    assert not Path("/tmp/leak.csv").exists() and not Path("/tmp/stolen.db").exists()
