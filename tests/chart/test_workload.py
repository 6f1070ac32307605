"""The webhook's own Deployment, Service, PDB, RBAC, policies ConfigMap and PriorityClasses."""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.commands import serve
from webhook.policy import loader

POLICY = {
    "apiVersion": "placement.novasphere.dev/v1alpha1",
    "kind": "PlacementPolicy",
    "metadata": {"name": "spread-web"},
    "spec": {
        "match": {"kinds": ["Deployment"], "selector": {"matchLabels": {"tier": "web"}}},
        "placement": {"podAntiAffinity": {"spread": "preferred"}},
    },
}


def flags(container: dict[str, Any]) -> dict[str, str]:
    """``--name=value`` arguments of the container as a mapping."""
    return dict(a[2:].split("=", 1) for a in container["args"] if a.startswith("--") and "=" in a)


def test_two_replicas_that_prefer_distinct_nodes(default: Any) -> None:
    deployment = default.one("Deployment")
    assert deployment["spec"]["replicas"] == 2
    (term,) = default.pod_spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_rollouts_never_reduce_the_number_of_serving_replicas(default: Any) -> None:
    strategy = default.one("Deployment")["spec"]["strategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}


def test_a_pod_disruption_budget_selects_the_webhook_pods(default: Any) -> None:
    pdb = default.one("PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == default.one("Deployment")["spec"]["selector"]["matchLabels"]


def test_the_service_selects_the_pods_and_forwards_to_the_named_container_ports(default: Any) -> None:
    service = default.one("Service")
    pod_labels = default.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    container_ports = {p["name"]: p["containerPort"] for p in default.container["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(container_ports)


def test_container_ports_are_the_ports_the_server_is_told_to_listen_on(render: Callable[..., Any]) -> None:
    rendered = render({"server": {"port": 9443, "metricsPort": 9090}})
    ports = {p["name"]: p["containerPort"] for p in rendered.container["ports"]}
    args = flags(rendered.container)
    assert (ports["https"], ports["metrics"]) == (9443, 9090)
    assert (args["port"], args["metrics-port"], args["host"]) == ("9443", "9090", "0.0.0.0")


@pytest.mark.parametrize(("probe", "path"), [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")])
def test_probes_use_https_on_the_tls_port(default: Any, probe: str, path: str) -> None:
    get = default.container[probe]["httpGet"]
    assert (get["path"], get["port"], get["scheme"]) == (path, "https", "HTTPS")


def test_termination_grace_outlasts_the_pre_stop_delay_plus_the_server_shutdown_grace(default: Any) -> None:
    args = flags(default.container)
    pre_stop = int(default.container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert default.pod_spec["terminationGracePeriodSeconds"] > pre_stop + int(args["shutdown-grace"])


def test_certificates_and_policies_come_from_mounted_volumes_the_server_reads(default: Any) -> None:
    args = flags(default.container)
    mounts = {m["name"]: m["mountPath"] for m in default.container["volumeMounts"]}
    assert args["tls-cert"] == f"{mounts['tls']}/tls.crt" and args["tls-key"] == f"{mounts['tls']}/tls.key"
    assert args["policies"] == mounts["policies"]
    volumes = {v["name"]: v for v in default.pod_spec["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "pw-placement-webhook-tls"
    assert volumes["policies"]["configMap"]["name"] == "pw-placement-webhook-policies"
    assert all("subPath" not in m for m in default.container["volumeMounts"]), "subPath mounts never update"


def test_the_image_entrypoint_plus_the_chart_args_is_a_valid_serve_command(render: Callable[..., Any], root: Path) -> None:
    entrypoint = next(
        json.loads(line.split(None, 1)[1])
        for line in (root / "Dockerfile").read_text().splitlines()
        if line.startswith("ENTRYPOINT ")
    )
    assert entrypoint == ["placement-webhook", "serve"]
    parser = argparse.ArgumentParser(prog="placement-webhook serve")
    serve.configure(parser)
    extra = [{"version": "v1", "kind": "W", "resource": "ws", "podSpecPath": "/spec", "podLabelsPath": "/metadata/labels"}]
    args = render({"extraKinds": extra, "server": {"extraArgs": ["--reload-interval=2"]}}).container["args"]
    parsed = parser.parse_args(args)
    assert str(parsed.tls_cert) == "/etc/placement-webhook/tls/tls.crt"


def test_the_webhook_pod_opts_out_of_its_own_placement(default: Any) -> None:
    annotations = default.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["placement.novasphere.dev/skip"] == "true"


def test_no_api_token_and_no_rbac_without_the_cluster_view(default: Any) -> None:
    assert default.pod_spec["automountServiceAccountToken"] is False
    assert default.one("ServiceAccount")["automountServiceAccountToken"] is False
    assert not default.of_kind("ClusterRole") and not default.of_kind("ClusterRoleBinding")
    assert flags(default.container)["cluster-view"] == "off"


def test_the_cluster_view_gets_read_only_access_to_nodes_namespaces_and_priorityclasses(render: Callable[..., Any]) -> None:
    rendered = render({"clusterView": {"enabled": True}})
    role = rendered.one("ClusterRole")
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {("", "nodes"), ("", "namespaces"), ("scheduling.k8s.io", "priorityclasses")}
    assert all(set(rule["verbs"]) == {"get", "list", "watch"} for rule in role["rules"])
    (subject,) = rendered.one("ClusterRoleBinding")["subjects"]
    assert (subject["name"], subject["namespace"]) == (rendered.pod_spec["serviceAccountName"], "placement-system")
    assert rendered.pod_spec["automountServiceAccountToken"] is True
    assert flags(rendered.container)["cluster-view"] == "on"  # and the server does watch


def test_policies_from_values_become_one_file_each_in_the_watched_config_map(render: Callable[..., Any], tmp_path: Path) -> None:
    rendered = render({"policies": {"items": [POLICY]}})
    (config_map,) = rendered.of_kind("ConfigMap")
    assert list(config_map["data"]) == ["spread-web.yaml"]
    assert yaml.safe_load(config_map["data"]["spread-web.yaml"]) == POLICY


def test_rendered_policies_load_with_the_policy_loader(render: Callable[..., Any], tmp_path: Path) -> None:
    (config_map,) = render({"policies": {"items": [POLICY]}}).of_kind("ConfigMap")
    for name, text in config_map["data"].items():
        (tmp_path / name).write_text(text)
    policy_set = loader.load([tmp_path])
    assert [p.name for p in policy_set] == ["spread-web"]


def test_an_existing_config_map_is_mounted_instead_of_a_rendered_one(render: Callable[..., Any]) -> None:
    rendered = render({"policies": {"existingConfigMap": "team-policies", "items": [POLICY]}})
    assert not rendered.of_kind("ConfigMap")
    volumes = {v["name"]: v for v in rendered.pod_spec["volumes"]}
    assert volumes["policies"]["configMap"]["name"] == "team-policies"


def test_priority_classes_declared_in_values_are_created(render: Callable[..., Any]) -> None:
    rendered = render({"priorityClasses": [
        {"name": "high-priority", "value": 100000, "description": "customer facing"},
        {"name": "batch-low", "value": -10, "preemptionPolicy": "Never"},
    ]})
    classes = {p["metadata"]["name"]: p for p in rendered.of_kind("PriorityClass")}
    assert classes["high-priority"]["value"] == 100000 and classes["high-priority"]["globalDefault"] is False
    assert classes["high-priority"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert (classes["batch-low"]["value"], classes["batch-low"]["preemptionPolicy"]) == (-10, "Never")


def test_a_user_affinity_replaces_the_default_spread(render: Callable[..., Any]) -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "role", "operator": "In", "values": ["infra"]}]}]}}}
    assert render({"affinity": affinity}).pod_spec["affinity"] == affinity


def test_in_flight_reviews_get_at_least_the_webhook_timeout_to_finish(default: Any) -> None:
    # The API server abandons a review after timeoutSeconds, so a longer grace only delays exit.
    assert float(flags(default.container)["shutdown-grace"]) >= default.webhook["timeoutSeconds"]
