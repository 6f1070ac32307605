"""Wukong objects get their placement through the native scheduling API."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kit.engine import apply
from tests.kit.policies import policy as make_policy
from webhook.cluster.view import StaticClusterView
from webhook.engine.placement import PlacementError

ZONE = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
MAINT = {"matchExpressions": [{"key": "maintenance", "operator": "In", "values": ["true"]}]}


def wukong(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "vm.novasphere.dev/v1alpha1", "kind": "Wukong",
            "metadata": {"name": "vm1", "labels": {"app": "vm"}}, "spec": spec if spec is not None else {"cpu": 2}}


def test_node_affinity_is_written_into_spec_scheduling() -> None:
    obj = wukong()
    apply(obj, make_policy(placement={"nodeAffinity": {"required": [ZONE], "preferred": [{"weight": 5, "preference": ZONE}]}}))
    assert obj["spec"] == {"cpu": 2, "scheduling": {"nodeAffinity": {"required": [ZONE],
                                                                      "preferred": [{"weight": 5, "preference": ZONE}]}}}


def test_node_anti_affinity_is_native_and_not_negated() -> None:
    obj = wukong()
    apply(obj, make_policy(placement={"nodeAntiAffinity": {"required": [MAINT]}}))
    assert obj["spec"]["scheduling"] == {"nodeAntiAffinity": {"required": [MAINT]}}


def test_existing_required_terms_are_anded_like_pod_node_affinity() -> None:
    disk = {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}
    obj = wukong({"scheduling": {"nodeAffinity": {"required": [copy.deepcopy(disk)]}}})
    apply(obj, make_policy(placement={"nodeAffinity": {"required": [ZONE]}}))
    assert obj["spec"]["scheduling"]["nodeAffinity"]["required"] == [
        {"matchExpressions": disk["matchExpressions"] + ZONE["matchExpressions"]}
    ]


def test_resources_are_native_resource_affinity() -> None:
    resources = {"preferredCPU": {"weight": 80, "threshold": "70%"},
                 "requiredResources": [{"resourceType": "gpu", "minAvailable": "1"}]}
    obj = wukong()
    apply(obj, make_policy(placement={"resources": copy.deepcopy(resources)}))
    assert obj["spec"]["scheduling"] == {"resourceAffinity": resources}


def test_scheduling_scalars_go_to_the_scheduling_policy() -> None:
    obj = wukong()
    cluster = StaticClusterView(priority_classes={"vip": {"value": 5, "preemptionPolicy": "Never"}})
    apply(obj, make_policy(scheduling={"priorityClassName": "vip", "schedulerName": "wukong-scheduler",
                                       "preemptionPolicy": "Never"}), cluster)
    assert obj["spec"]["scheduling"] == {"schedulingPolicy": {
        "priorityClassName": "vip", "schedulerName": "wukong-scheduler", "preemptionPolicy": "Never"}}


def test_spread_sets_the_legacy_high_availability_pair() -> None:
    obj = wukong()
    apply(obj, make_policy(placement={"podAntiAffinity": {"spread": "required"}}))
    assert obj["spec"]["highAvailability"] == {"antiAffinity": True, "nodeSelector": "kubernetes.io/hostname"}
    assert "scheduling" not in obj["spec"]


def test_an_explicit_false_anti_affinity_is_a_users_choice() -> None:
    obj = wukong({"highAvailability": {"antiAffinity": False}})
    result = apply(obj, make_policy(placement={"podAntiAffinity": {"spread": "required"}}))
    assert obj["spec"]["highAvailability"]["antiAffinity"] is False
    assert "p: antiAffinity False kept (policy wants True)" in result.warnings


def test_node_selector_and_capacity_become_required_and_preferred_requirements() -> None:
    obj = wukong()
    apply(obj, make_policy(placement={"nodeSelector": {"disk": "ssd"},
                                      "capacity": {"prefer": "spot", "require": "on-demand", "provider": "gke"}}))
    affinity = obj["spec"]["scheduling"]["nodeAffinity"]
    assert affinity["required"] == [{"matchExpressions": [
        {"key": "disk", "operator": "In", "values": ["ssd"]},
        {"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"}]}]
    assert affinity["preferred"] == [{"weight": 50, "preference": {"matchExpressions": [
        {"key": "cloud.google.com/gke-spot", "operator": "In", "values": ["true"]}]}}]


@pytest.mark.parametrize(
    ("placement", "skipped"),
    [
        ({"tolerations": [{"key": "a", "operator": "Exists"}]}, "tolerations"),
        ({"podAffinity": {"required": [{"topologyKey": "zone"}]}}, "podAffinity"),
        ({"capacity": {"prefer": "spot", "provider": "aks"}}, "the spot toleration"),
    ],
)
def test_what_wukong_cannot_express_is_skipped_with_a_warning(placement: dict[str, Any], skipped: str) -> None:
    result = apply(wukong(), make_policy(placement=placement))
    assert f"p: {skipped} skipped: Wukong has no equivalent" in result.warnings


@pytest.mark.parametrize("mode", ["merge", "keep", "replace"])
def test_wukong_placement_is_idempotent_in_every_mode(mode: str) -> None:
    obj = wukong({"scheduling": {"nodeAffinity": {"required": [MAINT]}, "resourceAffinity": {
        "preferredCPU": {"weight": 1, "threshold": "10%"}}}})
    policy = make_policy(on_conflict=mode, placement={
        "nodeAffinity": {"required": [ZONE]}, "nodeAntiAffinity": {"preferred": [{"weight": 3, "preference": MAINT}]},
        "resources": {"preferredCPU": {"weight": 80, "threshold": "70%"}, "requiredResources": [
            {"resourceType": "gpu", "minAvailable": "1"}]},
        "podAntiAffinity": {"spread": "preferred"}}, scheduling={"schedulerName": "s"})
    apply(obj, policy)
    once = copy.deepcopy(obj)
    assert apply(obj, policy).changed is False
    assert obj == once


def test_keep_leaves_a_set_resource_affinity_and_merge_keeps_a_users_threshold() -> None:
    existing = {"preferredCPU": {"weight": 1, "threshold": "10%"}}
    policy_spec = {"placement": {"resources": {"preferredCPU": {"weight": 80, "threshold": "70%"}}}}
    kept = wukong({"scheduling": {"resourceAffinity": copy.deepcopy(existing)}})
    assert apply(kept, make_policy(on_conflict="keep", **policy_spec)).changed is False
    merged = wukong({"scheduling": {"resourceAffinity": copy.deepcopy(existing)}})
    apply(merged, make_policy(**policy_spec))
    assert merged["spec"]["scheduling"]["resourceAffinity"] == existing
    replaced = wukong({"scheduling": {"resourceAffinity": copy.deepcopy(existing)}})
    apply(replaced, make_policy(on_conflict="replace", **policy_spec))
    assert replaced["spec"]["scheduling"]["resourceAffinity"] == policy_spec["placement"]["resources"]


def test_a_wukong_object_without_spec_is_a_placement_error() -> None:
    obj = {"apiVersion": "vm.novasphere.dev/v1alpha1", "kind": "Wukong", "metadata": {"name": "x"}}
    with pytest.raises(PlacementError, match="no spec"):
        apply(obj, make_policy(placement={"nodeSelector": {"a": "b"}}))


def test_nothing_is_created_when_the_policy_adds_nothing_wukong_has() -> None:
    obj = wukong()
    result = apply(obj, make_policy(placement={"tolerations": [{"key": "a", "operator": "Exists"}]}))
    assert obj == wukong()
    assert result.changed is False
