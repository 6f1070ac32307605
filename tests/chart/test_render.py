"""The chart renders for every TLS mode, passes Helm's lint, and refuses values that cannot work."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

helm = pytest.importorskip("helm_python")

ALWAYS = {"Deployment", "Service", "ServiceAccount", "PodDisruptionBudget", "ConfigMap", "MutatingWebhookConfiguration"}
EXPECTED_EXTRA = {
    "self-signed": {"Secret"},
    "cert-manager": {"Issuer", "Certificate"},
    "cert-manager-issuer": {"Certificate"},
    "secret": set(),
}


def test_each_tls_mode_renders_the_workload_and_only_its_own_certificate_objects(each_mode: Any) -> None:
    mode, rendered = each_mode
    assert rendered.kinds() == ALWAYS | EXPECTED_EXTRA[mode]


def test_every_rendered_object_has_a_name_and_namespaced_ones_sit_in_the_release_namespace(each_mode: Any) -> None:
    _mode, rendered = each_mode
    cluster_scoped = {"MutatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}
    for obj in rendered.objects:
        assert obj["metadata"]["name"]
        if obj["kind"] not in cluster_scoped:
            assert obj["metadata"]["namespace"] == "placement-system", obj["kind"]


def test_object_names_are_unique_per_kind(each_mode: Any) -> None:
    _mode, rendered = each_mode
    keys = [(o["kind"], o["metadata"]["name"]) for o in rendered.objects]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("values", [{}, {"tls": {"mode": "cert-manager"}}, {"clusterView": {"enabled": True}}])
def test_helm_lint_reports_no_errors_or_warnings(chart_dir: Path, values: dict[str, Any]) -> None:
    report = helm.lint(chart_dir, values, strict=True, namespace="placement-system")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [] and report["errors"] == []


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"replicaCount": -1}, "replicaCount"),
        ({"tls": {"mode": "vault"}}, "mode"),
        ({"tls": {"mode": "secret"}}, "secretName"),
        ({"webhook": {"failurePolicy": "Sometimes"}}, "failurePolicy"),
        ({"webhook": {"timeoutSeconds": 31}}, "timeoutSeconds"),
        ({"webhook": {"operations": ["DELETE"]}}, "operations"),
        ({"webhook": {"url": "http://insecure.example.com/mutate"}}, "url"),
        ({"webhok": {}}, "webhok"),
        ({"server": {"port": 70000}}, "port"),
        ({"policies": {"items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "spec": {}}]}}, "apiVersion"),
        ({"priorityClasses": [{"name": "High_Priority", "value": 10}]}, "name"),
        ({"extraKinds": [{"version": "v1", "kind": "Widget", "podSpecPath": "/spec", "podLabelsPath": "/metadata/labels"}]}, "resource"),
        ({"image": {"digest": "latest"}}, "digest"),
    ],
)
def test_the_values_schema_rejects(render: Callable[..., Any], values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmError) as err:
        render(values)
    assert complaint in str(err.value)


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        (
            {"webhook": {"url": "https://10.0.0.1:8443/mutate"}},
            "webhook.url calls a server outside the cluster",
        ),
        (
            {"terminationGracePeriodSeconds": 12},
            "terminationGracePeriodSeconds (12) must exceed",
        ),
        (
            {"policies": {"items": [
                {"apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy", "metadata": {"name": "a"}, "spec": {}},
                {"apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy", "metadata": {"name": "a"}, "spec": {}},
            ]}},
            'duplicate policy name "a"',
        ),
    ],
)
def test_the_templates_fail_early_with_a_clear_message_on(
    render: Callable[..., Any], values: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(helm.HelmError) as err:
        render(values)
    assert complaint in str(err.value)


def test_notes_tell_the_user_how_to_check_the_webhook_with_a_server_dry_run(default: Any) -> None:
    assert "--dry-run=server" in default.notes
    assert "placement.novasphere.dev/applied" in default.notes
    assert "kube-system, kube-node-lease, placement-system" in default.notes


def test_notes_warn_when_no_policies_are_configured_and_stay_quiet_otherwise(render: Callable[..., Any]) -> None:
    policy = {"apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy", "metadata": {"name": "p"}, "spec": {}}
    assert "No policies are configured" in render().notes
    assert "No policies are configured" not in render({"policies": {"items": [policy]}}).notes


def test_image_defaults_to_the_chart_app_version_and_a_digest_wins_over_the_tag(render: Callable[..., Any]) -> None:
    digest = "sha256:" + "a" * 64
    assert render().container["image"] == "ghcr.io/novasphere/placement-webhook:0.1.0"
    pinned = render({"image": {"tag": "9.9.9", "digest": digest}}).container["image"]
    assert pinned == f"ghcr.io/novasphere/placement-webhook@{digest}"
