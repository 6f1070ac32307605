"""The MutatingWebhookConfiguration: what the API server sends, where, and what it never sends."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.kube import kinds as targets
from webhook.kube.kinds import BUILTIN

# The resource (lowercase plural) the API server uses for each built-in kind.
PLURALS = {
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "ReplicaSet": "replicasets",
    "DaemonSet": "daemonsets",
    "Job": "jobs",
    "CronJob": "cronjobs",
    "Pod": "pods",
    "VirtualMachine": "virtualmachines",
    "VirtualMachineInstance": "virtualmachineinstances",
    "VirtualMachineInstanceReplicaSet": "virtualmachineinstancereplicasets",
    "VirtualMachinePool": "virtualmachinepools",
    "Wukong": "wukongs",
}


def covered(webhook: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(group, version, resource) triples the webhook's rules select."""
    return {
        (group, version, resource)
        for rule in webhook["rules"]
        for group in rule["apiGroups"]
        for version in rule["apiVersions"]
        for resource in rule["resources"]
    }


def test_the_plural_table_knows_every_builtin_kind() -> None:
    assert {t.kind for t in BUILTIN} == set(PLURALS)


@pytest.mark.parametrize("target", list(BUILTIN), ids=lambda t: t.describe())
def test_default_rules_cover_every_kind_the_server_handles(default: Any, target: targets.Target) -> None:
    assert (target.group, target.version, PLURALS[target.kind]) in covered(default.webhook)


def test_rules_send_create_and_update_of_namespaced_resources_only(default: Any) -> None:
    for rule in default.webhook["rules"]:
        assert rule["operations"] == ["CREATE", "UPDATE"]
        assert rule["scope"] == "Namespaced"
        assert not any("/" in r for r in rule["resources"]), "subresources (scale, status) are not placed"


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("sideEffects", "None"),
        ("admissionReviewVersions", ["v1", "v1beta1"]),
        ("failurePolicy", "Ignore"),
        ("timeoutSeconds", 3),
        ("reinvocationPolicy", "IfNeeded"),
        ("matchPolicy", "Equivalent"),
        ("name", "mutate.placement.novasphere.dev"),
    ],
)
def test_webhook_defaults(default: Any, field: str, expected: Any) -> None:
    assert default.webhook[field] == expected


def test_the_client_config_points_at_the_service_mutate_path_and_port(default: Any) -> None:
    service = default.one("Service")
    ref = default.webhook["clientConfig"]["service"]
    assert (ref["name"], ref["namespace"], ref["path"]) == (service["metadata"]["name"], "placement-system", "/mutate")
    assert ref["port"] in {p["port"] for p in service["spec"]["ports"] if p["name"] == "https"}


def _expressions(webhook: dict[str, Any]) -> list[dict[str, Any]]:
    expressions: list[dict[str, Any]] = webhook["namespaceSelector"]["matchExpressions"]
    return expressions


def test_control_plane_and_own_namespaces_are_excluded_by_their_immutable_name_label(default: Any) -> None:
    by_name = [e for e in _expressions(default.webhook) if e["key"] == "kubernetes.io/metadata.name"]
    assert by_name == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kube-node-lease", "placement-system"]}
    ]


def test_the_release_namespace_is_excluded_wherever_the_chart_is_installed(render: Callable[..., Any]) -> None:
    rendered = render(namespace="kube-system")
    values = next(e["values"] for e in _expressions(rendered.webhook) if e["key"] == "kubernetes.io/metadata.name")
    assert values == ["kube-system", "kube-node-lease"]


def test_namespaces_labelled_skip_are_excluded_and_unlabelled_ones_are_not(default: Any) -> None:
    assert {"key": "placement.novasphere.dev/skip", "operator": "NotIn", "values": ["true"]} in _expressions(default.webhook)


def test_extra_namespace_expressions_are_anded_with_the_exclusions(render: Callable[..., Any]) -> None:
    extra = {"key": "team", "operator": "Exists"}
    expressions = _expressions(render({"webhook": {"namespaceSelectorExpressions": [extra]}}).webhook)
    assert len(expressions) == 3 and expressions[-1] == extra


def test_object_selector_is_absent_by_default_and_rendered_when_given(default: Any, render: Callable[..., Any]) -> None:
    selector = {"matchExpressions": [{"key": "placement.novasphere.dev/skip", "operator": "DoesNotExist"}]}
    assert "objectSelector" not in default.webhook
    assert render({"webhook": {"objectSelector": selector}}).webhook["objectSelector"] == selector


def test_a_url_client_config_replaces_the_service_for_a_webhook_outside_the_cluster(render: Callable[..., Any]) -> None:
    values = {
        "webhook": {"url": "https://192.0.2.10:8443/mutate"},
        "tls": {"mode": "secret", "secretName": "tls", "caBundle": "Q0E="},
    }
    client = render(values).webhook["clientConfig"]
    assert client == {"url": "https://192.0.2.10:8443/mutate", "caBundle": "Q0E="}


def test_the_rule_list_is_configurable(render: Callable[..., Any]) -> None:
    rules = [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]
    assert covered(render({"webhook": {"rules": rules}}).webhook) == {("apps", "v1", "deployments")}


def test_failure_policy_fail_is_available_for_clusters_that_require_placement(render: Callable[..., Any]) -> None:
    assert render({"webhook": {"failurePolicy": "Fail"}}).webhook["failurePolicy"] == "Fail"


WIDGET = {
    "group": "example.com",
    "version": "v1",
    "kind": "Widget",
    "resource": "widgets",
    "podSpecPath": "/spec/template/spec",
    "podLabelsPath": "/spec/template/metadata/labels",
    "selectorPath": "/spec/selector",
}


def test_extra_kinds_get_a_webhook_rule_and_a_kinds_file_the_server_can_load(
    render: Callable[..., Any], tmp_path: Path
) -> None:
    rendered = render({"extraKinds": [WIDGET]})
    assert ("example.com", "v1", "widgets") in covered(rendered.webhook)
    config = next(c for c in rendered.of_kind("ConfigMap") if c["metadata"]["name"].endswith("-config"))
    kinds_file = tmp_path / "kinds.yaml"
    kinds_file.write_text(config["data"]["kinds.yaml"])
    loaded = targets.load_kinds_config(kinds_file)
    widget = loaded.lookup("example.com", "Widget")
    assert widget is not None and widget.pod_spec == ("spec", "template", "spec")
    assert "--kinds-config=/etc/placement-webhook/config/kinds.yaml" in rendered.container["args"]


def test_without_extra_kinds_there_is_no_kinds_file_or_flag(default: Any) -> None:
    assert not any(a.startswith("--kinds-config") for a in default.container["args"])
    assert [c["metadata"]["name"] for c in default.of_kind("ConfigMap")] == ["pw-placement-webhook-policies"]


def test_kinds_file_holds_only_fields_the_server_accepts(render: Callable[..., Any]) -> None:
    config = next(c for c in render({"extraKinds": [WIDGET]}).of_kind("ConfigMap") if c["metadata"]["name"].endswith("-config"))
    (entry,) = yaml.safe_load(config["data"]["kinds.yaml"])["kinds"]
    assert "resource" not in entry and entry["kind"] == "Widget"
