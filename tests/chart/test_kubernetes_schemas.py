"""Every rendered object is valid for the Kubernetes versions the chart supports (kubernetes-validate).

cert-manager's Issuer and Certificate are CustomResources: kubernetes-validate ships only the
built-in API's schemas, so their shape is pinned by tests/chart/test_tls.py instead.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

kubernetes_validate = pytest.importorskip("kubernetes_validate")

# Chart.yaml says kubeVersion >=1.25; check the oldest supported and the newest known schema.
VERSIONS = ["1.25", kubernetes_validate.latest_version()]
CUSTOM_RESOURCES = {"cert-manager.io/v1"}

EVERYTHING_ON = {
    "clusterView": {"enabled": True},
    "priorityClasses": [{"name": "high-priority", "value": 1000, "description": "d"}],
    "policies": {"items": [{"apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy",
                            "metadata": {"name": "p"}, "spec": {"placement": {"nodeSelector": {"disktype": "ssd"}}}}]},
    "extraKinds": [{"group": "example.com", "version": "v1", "kind": "Widget", "resource": "widgets",
                    "podSpecPath": "/spec/template/spec", "podLabelsPath": "/spec/template/metadata/labels"}],
    "webhook": {"objectSelector": {"matchLabels": {"placement": "on"}}},
    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "ScheduleAnyway",
                                   "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "placement-webhook"}}}],
}


def _validate_all(objects: list[dict[str, Any]]) -> list[str]:
    errors: list[str] = []
    for obj in objects:
        if obj["apiVersion"] in CUSTOM_RESOURCES:
            continue
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                errors.append(f"{obj['kind']}/{obj['metadata']['name']} on {version}: {exc.message}")
    return errors


def test_every_built_in_object_validates_strictly_in_each_tls_mode(each_mode: Any) -> None:
    _mode, rendered = each_mode
    assert _validate_all(rendered.objects) == []


def test_every_optional_object_validates_strictly(render: Callable[..., Any]) -> None:
    rendered = render(EVERYTHING_ON)
    assert {"ClusterRole", "ClusterRoleBinding", "PriorityClass"} <= rendered.kinds()
    assert _validate_all(rendered.objects) == []


def test_the_validator_rejects_a_broken_object(default: Any) -> None:
    broken = dict(default.one("Service"), spec={"ports": [{"port": "https-not-a-number"}]})
    assert _validate_all([broken]) != []


def test_only_cert_manager_objects_are_left_to_their_own_checks(render: Callable[..., Any]) -> None:
    rendered = render({"tls": {"mode": "cert-manager"}})
    skipped = {o["kind"] for o in rendered.objects if o["apiVersion"] in CUSTOM_RESOURCES}
    assert skipped == {"Issuer", "Certificate"}
