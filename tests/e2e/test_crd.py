"""The chart's PlacementPolicy CustomResourceDefinition on a real kube-apiserver: it is accepted
and established, takes every shipped policy as written, refuses a wrong type by its schema,
publishes its descriptions for ``kubectl explain``, keeps its status apart from its spec and
prints its columns. Needs KUBEBUILDER_ASSETS (see docs/install.md); skipped with that message otherwise.
"""
from __future__ import annotations

import copy
import json
import re
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit.envtest import ControlPlane, wait_until
from webhook import API_GROUP
from webhook.policy import crd

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
CHART_CRD = ROOT / "charts" / "placement-webhook" / "crds" / "placementpolicies.yaml"
POLICIES = ROOT / "policies"
# The spec fields the CRD defaults, as the model does.
DEFAULTS = {"order": 0, "onConflict": "merge", "enforcement": "patch", "allowSkip": True}
# OpenAPI v2 names a CRD's kind by its group reversed (kube-openapi's ToRESTFriendlyName).
DEFINITION = ".".join(reversed(API_GROUP.split("."))) + f".{crd.VERSION}.{crd.KIND}"


def _established(cluster: Any) -> bool:
    conditions = cluster.crds.read_custom_resource_definition(crd.NAME).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def _gone(cluster: Any) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        cluster.crds.read_custom_resource_definition(crd.NAME)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


@pytest.fixture(scope="module")
def installed(cluster: Any) -> Iterator[dict[str, Any]]:
    """The chart's CRD file, created as Helm creates ``crds/``, established; deleted afterwards."""
    definition = yaml.safe_load(CHART_CRD.read_text())
    cluster.crds.create_custom_resource_definition(definition)
    try:
        wait_until(lambda: _established(cluster), what="the PlacementPolicy CRD to be established")
        yield definition
    finally:
        cluster.crds.delete_custom_resource_definition(crd.NAME)
        wait_until(lambda: _gone(cluster), what="the PlacementPolicy CRD to be deleted")


def _create(cluster: Any, policy: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = cluster.objects.create_cluster_custom_object(API_GROUP, crd.VERSION, crd.PLURAL, policy)
    return created


def _get(cluster: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.objects.get_cluster_custom_object(API_GROUP, crd.VERSION, crd.PLURAL, name)
    return found


def _policy(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{API_GROUP}/{crd.VERSION}", "kind": crd.KIND,
            "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"}, "spec": spec}


def _refusal(cluster: Any, policy: dict[str, Any]) -> str:
    """The API server's message refusing ``policy``; fails when it is accepted."""
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as refused:
        _create(cluster, policy)
    assert refused.value.status == 422, refused.value.body
    message: str = json.loads(refused.value.body)["message"]
    return message


def _raw(control_plane: ControlPlane, path: str, *, accept: str = "application/json") -> Any:
    """GET ``path`` as kubectl does it, with the Accept header it chooses."""
    context = ssl.create_default_context(cafile=str(control_plane.ca_file))
    request = urllib.request.Request(
        f"{control_plane.url}{path}", headers={"Authorization": f"Bearer {control_plane.token}", "Accept": accept}
    )
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.load(response)


def _shipped() -> list[dict[str, Any]]:
    return [doc for path in sorted(POLICIES.glob("*.yaml")) if not path.name.endswith(".suite.yaml")
            for doc in yaml.safe_load_all(path.read_text()) if doc]


# --- the definition ------------------------------------------------------------------------


def test_the_chart_crd_is_established_cluster_scoped_with_the_short_name_pp(cluster: Any, installed: dict[str, Any]) -> None:
    stored = cluster.crds.read_custom_resource_definition(crd.NAME)
    assert stored.spec.scope == "Cluster"
    assert stored.spec.names.short_names == ["pp"]
    assert [v.name for v in stored.spec.versions] == ["v1alpha1"]


def test_every_shipped_policy_is_stored_as_written(cluster: Any, installed: dict[str, Any]) -> None:
    shipped = _shipped()
    assert len(shipped) >= 9
    for policy in shipped:
        _create(cluster, policy)
        stored = _get(cluster, policy["metadata"]["name"])
        # Nothing pruned, nothing changed: only the schema's defaults added.
        assert stored["spec"] == {**DEFAULTS, **policy["spec"]}, policy["metadata"]["name"]


# --- validation by the schema ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"order": "first"}, "spec.order"),
        ({"enforcement": "sometimes"}, "spec.enforcement"),
        ({"allowSkip": "no"}, "spec.allowSkip"),
        ({"match": {"kinds": "Deployment"}}, "spec.match.kinds"),
        ({"placement": {"nodeSelector": {"gpu": True}}}, "spec.placement.nodeSelector.gpu"),
        ({"placement": {"capacity": {"prefer": "spot", "weight": 101}}}, "spec.placement.capacity.weight"),
        ({"rollout": {"maxSurge": "many"}}, "spec.rollout.maxSurge"),
        ({"rollout": {"maxUnavailable": -1}}, "spec.rollout.maxUnavailable"),
        ({"placement": {"resources": {"requiredResources": [{"resourceType": "gpu", "minAvailable": "lots"}]}}},
         "spec.placement.resources.requiredResources.minAvailable"),
        ({"placement": {"resources": {"preferredCPU": {"weight": 10, "threshold": "170%"}}}},
         "spec.placement.resources.preferredCPU.threshold"),
    ],
    ids=["string-order", "bad-enum", "string-bool", "string-for-list", "bool-label-value", "weight-range",
         "surge-pattern", "negative-unavailable", "quantity-pattern", "percent-pattern"],
)
def test_a_wrong_value_is_refused_by_the_schema_naming_its_field(
    cluster: Any, installed: dict[str, Any], spec: dict[str, Any], field: str
) -> None:
    # v1.20 names a list item without its index (go-openapi's validator); later releases with it.
    assert field in re.sub(r"\[\d+\]", "", _refusal(cluster, _policy(spec)))


@pytest.mark.parametrize(
    "rollout", [{"maxSurge": 1, "maxUnavailable": 0}, {"maxSurge": "25%", "maxUnavailable": "100%"}],
    ids=["integers", "percentages"],
)
def test_rollout_numbers_are_int_or_string(cluster: Any, installed: dict[str, Any], rollout: dict[str, Any]) -> None:
    created = _create(cluster, _policy({"rollout": {"mode": "explicit", **rollout}}))
    assert created["spec"]["rollout"] == {"mode": "explicit", **rollout}


def test_a_quantity_may_be_an_integer_as_in_kubernetes(cluster: Any, installed: dict[str, Any]) -> None:
    required = [{"resourceType": "gpu", "minAvailable": 1}, {"resourceType": "memory", "minAvailable": "4Gi"}]
    created = _create(cluster, _policy({"placement": {"resources": {"requiredResources": required}}}))
    assert created["spec"]["placement"]["resources"]["requiredResources"] == required


def test_an_explicit_capacity_provider_is_kept_whole(cluster: Any, installed: dict[str, Any]) -> None:
    provider = {"label": "example.com/lifecycle", "spot": ["preemptible"], "onDemand": [],
                "toleration": {"key": "example.com/lifecycle", "operator": "Equal", "value": "preemptible",
                               "effect": "NoSchedule"}}
    created = _create(cluster, _policy({"placement": {"capacity": {"prefer": "spot", "provider": provider}}}))
    assert created["spec"]["placement"]["capacity"]["provider"] == provider


def test_an_unknown_field_is_pruned_not_refused(cluster: Any, installed: dict[str, Any]) -> None:
    # A structural schema drops what it does not describe; catching the typo is lint's job.
    created = _create(cluster, _policy({"order": 3, "placment": {"nodeSelector": {"disk": "ssd"}}}))
    assert created["spec"] == {**DEFAULTS, "order": 3}


def test_a_null_optional_field_is_dropped_like_an_omitted_one(
    cluster: Any, control_plane: ControlPlane, installed: dict[str, Any]
) -> None:
    # Optional fields are not nullable (nullable would blank them in the OpenAPI v2 kubectl reads).
    # From v1.20 the API server prunes a null it was not told to keep; v1.19 refuses it.
    assert control_plane.server_version() >= (1, 20)
    created = _create(cluster, _policy({"order": 4, "exclude": None, "placement": None}))
    assert created["spec"] == {**DEFAULTS, "order": 4}


# --- kubectl explain ---------------------------------------------------------------------------


def _published(control_plane: ControlPlane) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def published() -> bool:
        found.update(_raw(control_plane, "/openapi/v2").get("definitions", {}).get(DEFINITION, {}))
        return bool(found)

    # The API server publishes a CRD's OpenAPI asynchronously after it is established.
    wait_until(published, what=f"{DEFINITION} in /openapi/v2", interval=1.0)
    return found


def test_the_published_openapi_describes_spec_placement_and_each_of_its_fields(
    control_plane: ControlPlane, installed: dict[str, Any]
) -> None:
    # What `kubectl explain placementpolicy.spec.placement` reads.
    definition = _published(control_plane)
    placement = definition["properties"]["spec"]["properties"]["placement"]
    assert placement["type"] == "object" and placement["description"]
    fields = placement["properties"]
    assert {"nodeSelector", "nodeAffinity", "podAntiAffinity", "capacity", "resources"} <= set(fields)
    assert all(field.get("description") for field in fields.values()), fields
    assert fields["nodeAffinity"]["properties"]["required"]["type"] == "array"


# --- status --------------------------------------------------------------------------------


def _status(generation: int, *, changed: int) -> dict[str, Any]:
    # A non-empty message: an API server built with Go 1.16 or later before kubernetes#99804 was
    # fixed (the Debian v1.20.2 of this tier is one) reads "" as null and refuses it.
    return {"observedGeneration": generation, "changedObjects": changed, "conditions": [{
        "type": "Ready", "status": "True", "reason": "Loaded", "message": "in force",
        "lastTransitionTime": "2024-01-02T03:04:05Z", "observedGeneration": generation}]}


def test_the_status_subresource_takes_the_status_and_leaves_the_spec(cluster: Any, installed: dict[str, Any]) -> None:
    created = _create(cluster, _policy({"order": 7}))
    name, generation = created["metadata"]["name"], created["metadata"]["generation"]
    created["status"] = _status(generation, changed=3)
    created["spec"]["order"] = 99  # ignored by the status subresource
    updated = cluster.objects.replace_cluster_custom_object_status(API_GROUP, crd.VERSION, crd.PLURAL, name, created)
    assert updated["status"] == _status(generation, changed=3)
    assert updated["spec"]["order"] == 7
    assert updated["metadata"]["generation"] == generation


def test_a_spec_update_leaves_the_status_and_bumps_the_generation(cluster: Any, installed: dict[str, Any]) -> None:
    created = _create(cluster, _policy({"order": 8}))
    name = created["metadata"]["name"]
    created["status"] = _status(created["metadata"]["generation"], changed=1)
    with_status = cluster.objects.replace_cluster_custom_object_status(API_GROUP, crd.VERSION, crd.PLURAL, name, created)
    edited = copy.deepcopy(with_status)
    edited["spec"]["order"] = 9
    edited["status"] = _status(42, changed=1000)
    replaced = cluster.objects.replace_cluster_custom_object(API_GROUP, crd.VERSION, crd.PLURAL, name, edited)
    assert replaced["spec"]["order"] == 9
    assert replaced["status"] == with_status["status"]
    assert replaced["metadata"]["generation"] == with_status["metadata"]["generation"] + 1


def test_a_status_with_a_wrong_condition_is_refused(cluster: Any, installed: dict[str, Any]) -> None:
    from kubernetes.client.exceptions import ApiException

    created = _create(cluster, _policy({}))
    created["status"] = _status(1, changed=0)
    created["status"]["conditions"][0]["status"] = "Yes"
    with pytest.raises(ApiException) as refused:
        cluster.objects.replace_cluster_custom_object_status(
            API_GROUP, crd.VERSION, crd.PLURAL, created["metadata"]["name"], created)
    message = re.sub(r"\[\d+\]", "", json.loads(refused.value.body)["message"])
    assert refused.value.status == 422 and "status.conditions.status" in message


# --- kubectl get ---------------------------------------------------------------------------


def test_kubectl_get_prints_order_kinds_enforcement_ready_and_age(
    cluster: Any, control_plane: ControlPlane, installed: dict[str, Any]
) -> None:
    created = _create(cluster, _policy({"order": 5, "enforcement": "audit", "match": {"kinds": ["Deployment", "Job"]}}))
    name = created["metadata"]["name"]
    created["status"] = _status(created["metadata"]["generation"], changed=0)
    cluster.objects.replace_cluster_custom_object_status(API_GROUP, crd.VERSION, crd.PLURAL, name, created)
    table = _raw(control_plane, f"/apis/{API_GROUP}/{crd.VERSION}/{crd.PLURAL}/{name}",
                 accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert table["kind"] == "Table"
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Order", "Kinds", "Enforcement", "Ready", "Age"]
    (row,) = table["rows"]
    cells = dict(zip(columns, row["cells"]))
    assert cells["Name"] == name and cells["Order"] == 5 and cells["Enforcement"] == "audit"
    assert cells["Kinds"] == '["Deployment","Job"]'
    assert cells["Ready"] == "True"
    assert cells["Age"]


def test_a_policy_without_status_prints_no_ready_value(
    cluster: Any, control_plane: ControlPlane, installed: dict[str, Any]
) -> None:
    name = _create(cluster, _policy({}))["metadata"]["name"]
    table = _raw(control_plane, f"/apis/{API_GROUP}/{crd.VERSION}/{crd.PLURAL}/{name}",
                 accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    cells = dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"]))
    assert cells["Order"] == 0 and cells["Enforcement"] == "patch"
    assert cells["Kinds"] is None and cells["Ready"] is None
