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
    # Wukong has no priorityClassName: the class's integer value goes to schedulingPolicy.priority.
    assert obj["spec"]["scheduling"] == {"schedulingPolicy": {
        "schedulerName": "wukong-scheduler", "preemptionPolicy": "Never", "priority": 5}}


@pytest.mark.parametrize("cluster", [None, StaticClusterView(priority_classes={})], ids=["no view", "unknown class"])
def test_a_class_whose_value_is_unknown_writes_nothing_and_says_why(cluster: Any) -> None:
    obj = wukong()
    result = apply(obj, make_policy(scheduling={"priorityClassName": "vip"}), cluster)
    assert "scheduling" not in obj["spec"]
    assert any(w.startswith("p: priority of vip not written: Wukong has no priorityClassName") for w in result.warnings)


def test_the_authors_priority_and_rules_are_never_removed() -> None:
    obj = wukong({"scheduling": {"schedulingPolicy": {"priority": 7, "rules": [{"name": "r1"}]}}})
    cluster = StaticClusterView(priority_classes={"vip": {"value": 5}})
    result = apply(obj, make_policy(scheduling={"priorityClassName": "vip", "schedulerName": "s"}), cluster)
    assert obj["spec"]["scheduling"]["schedulingPolicy"] == {"priority": 7, "rules": [{"name": "r1"}], "schedulerName": "s"}
    assert "p: priority 7 kept (the author's; vip has 5)" in result.warnings


def test_spread_sets_the_legacy_anti_affinity_switch_and_nothing_else() -> None:
    obj = wukong()
    apply(obj, make_policy(placement={"podAntiAffinity": {"spread": "required"}}))
    # highAvailability.nodeSelector is a map of labels, never a topology key string.
    assert obj["spec"]["highAvailability"] == {"antiAffinity": True}
    assert "scheduling" not in obj["spec"]


def test_an_explicit_false_anti_affinity_is_a_users_choice() -> None:
    obj = wukong({"highAvailability": {"antiAffinity": False}})
    result = apply(obj, make_policy(placement={"podAntiAffinity": {"spread": "required"}}))
    assert obj["spec"]["highAvailability"]["antiAffinity"] is False
    assert "p: antiAffinity False kept (policy wants True)" in result.warnings


def test_node_selector_goes_to_the_legacy_map_and_capacity_to_node_affinity() -> None:
    obj = wukong()
    apply(obj, make_policy(placement={"nodeSelector": {"disk": "ssd"},
                                      "capacity": {"prefer": "spot", "require": "on-demand", "provider": "gke"}}))
    assert obj["spec"]["highAvailability"] == {"nodeSelector": {"disk": "ssd"}}
    affinity = obj["spec"]["scheduling"]["nodeAffinity"]
    assert affinity["required"] == [{"matchExpressions": [
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


def test_the_legacy_node_selector_map_is_merged_key_by_key_and_keeps_other_keys() -> None:
    obj = wukong({"highAvailability": {"nodeSelector": {"rack": "r1", "disk": "hdd"}}})
    result = apply(obj, make_policy(placement={"nodeSelector": {"disk": "ssd", "zone": "a"}}))
    assert obj["spec"]["highAvailability"]["nodeSelector"] == {"rack": "r1", "disk": "hdd", "zone": "a"}
    assert "p: nodeSelector disk=hdd kept (policy wants ssd)" in result.warnings
