"""deploy/: the Kubernetes manifests validate offline, agree with each other and with the app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client import generate_latest

from tasksieve.pipeline.cli import build_parser
from tasksieve.verifiers.service.metrics import make_metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MANIFESTS = sorted((DEPLOY / "k8s").glob("*.yaml"))
K8S_VERSION = "1.37.0"


def docs() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            found[doc["kind"]] = doc
    return found


def container() -> dict[str, Any]:
    return docs()["Deployment"]["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_validates_strictly(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_there_is_a_deployment_a_service_and_an_autoscaler() -> None:
    assert {"Deployment", "Service", "HorizontalPodAutoscaler"} <= set(docs())


@pytest.mark.parametrize("probe", ["readinessProbe", "livenessProbe"])
def test_probes_hit_healthz_on_the_served_port(probe: str) -> None:
    c = container()
    get = c[probe]["httpGet"]
    assert get["path"] == "/healthz"
    assert get["port"] in [p["name"] for p in c["ports"]]


def test_container_args_parse_and_bind_where_the_port_says() -> None:
    c = container()
    args = build_parser().parse_args(["serve", *c["args"]])
    assert args.port == c["ports"][0]["containerPort"] and args.host == "0.0.0.0"
    assert not args.insecure_no_auth


def test_token_comes_from_a_secret_never_a_literal() -> None:
    env = {e["name"]: e for e in container()["env"]}
    token = env["TASKSIEVE_SERVICE_TOKEN"]
    assert "value" not in token and token["valueFrom"]["secretKeyRef"]["name"]


def test_service_and_autoscaler_point_at_the_deployment() -> None:
    d = docs()
    labels = d["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert d["Service"]["spec"]["selector"].items() <= labels.items()
    assert (
        d["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["name"]
        == (d["Deployment"]["metadata"]["name"])
    )


def test_autoscaler_scales_on_a_metric_the_app_exports() -> None:
    names = [
        m["pods"]["metric"]["name"]
        for m in docs()["HorizontalPodAutoscaler"]["spec"]["metrics"]
        if m["type"] == "Pods"
    ]
    exported = generate_latest(make_metrics(lambda: 0, lambda: 0, lambda: 0).registry).decode()
    assert names == ["tasksieve_queue_depth"] and f"\n{names[0]} " in exported


def test_image_runs_unprivileged_with_bubblewrap_and_the_serve_extra() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert "bubblewrap" in text and "'.[serve]'" in text
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users and not users[-1].startswith(("0", "root"))
    assert docs()["Deployment"]["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"]
