"""Controller-owned objects are never mutated: their owner's admission placed the template
they were stamped from (a ReplicaSet of a Deployment, a Job of a CronJob, a Pod of a
ReplicaSet, a VMI of a VirtualMachine...)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.kit.engine import FAKE
from tests.kit.policies import policy, policy_set
from tests.kit.workloads import target_of, workload
from webhook.engine import admission, review
from webhook.kube.kinds import BUILTIN, Target
from webhook.policy import loader
from webhook.policy.policyset import PolicySet

ROOT = Path(__file__).resolve().parents[2]
ZONE = policy("zone", placement={"nodeSelector": {"zone": "a"}})


def _owner(api_version: str, kind: str, name: str = "web", *, controller: Any = True) -> dict[str, Any]:
    ref = {"apiVersion": api_version, "kind": kind, "name": name, "uid": "0b6c4d2e-1f3a-4c5b-9d7e-8a9b0c1d2e3f"}
    if controller is not None:
        ref["controller"] = controller
    return ref


def _kind(group: str, kind: str) -> Target:
    target = BUILTIN.lookup(group, kind)
    assert target is not None
    return target


def _admit(
    obj: dict[str, Any], policies: PolicySet | None = None, *, steps: admission.Steps = FAKE, **kw: Any
) -> admission.Outcome:
    request = review.request_for_object(obj, **kw)
    return admission.admit(request, policies=policies or policy_set(ZONE), steps=steps)


OWNED = [
    (("apps", "ReplicaSet"), ("apps/v1", "Deployment")),
    (("batch", "Job"), ("batch/v1", "CronJob")),
    (("", "Pod"), ("apps/v1", "ReplicaSet")),
    (("", "Pod"), ("apps/v1", "StatefulSet")),
    (("", "Pod"), ("apps/v1", "DaemonSet")),
    (("", "Pod"), ("batch/v1", "Job")),
    (("kubevirt.io", "VirtualMachineInstance"), ("kubevirt.io/v1", "VirtualMachine")),
    (("kubevirt.io", "VirtualMachineInstance"), ("kubevirt.io/v1", "VirtualMachineInstanceReplicaSet")),
    (("kubevirt.io", "VirtualMachine"), ("pool.kubevirt.io/v1alpha1", "VirtualMachinePool")),
]


@pytest.mark.parametrize(("kind", "owner"), OWNED, ids=[f"{k[1]} of {o[1]}" for k, o in OWNED])
def test_an_object_its_controller_stamped_is_admitted_unchanged_with_the_reason(
    kind: tuple[str, str], owner: tuple[str, str]
) -> None:
    obj = workload(_kind(*kind), "web-5d4f8c", owner=_owner(*owner))
    out = _admit(obj)
    assert (out.result, out.patch, out.object) == ("ignored", [], obj)
    assert out.reason == f"owned by {owner[1]}/web: placed through its owner"


def test_the_shipped_avoid_maintenance_policy_leaves_a_deployments_replicaset_alone() -> None:
    shipped = loader.load([ROOT / "policies" / "avoid-maintenance.yaml"])
    replica_set = workload(_kind("apps", "ReplicaSet"), "shop-7c9f", namespace="shop",
                           owner=_owner("apps/v1", "Deployment", "shop"))
    out = _admit(replica_set, shipped, steps=admission.ENGINE)
    assert out.result == "ignored" and out.patch == []
    assert out.reason == "owned by Deployment/shop: placed through its owner"
    del replica_set["metadata"]["ownerReferences"]
    assert _admit(replica_set, shipped, steps=admission.ENGINE).result == "patched", "a ReplicaSet of its own is still placed"


def test_an_update_of_an_owned_object_is_not_mutated_either() -> None:
    replica_set = workload(_kind("apps", "ReplicaSet"), owner=_owner("apps/v1", "Deployment"))
    out = _admit(replica_set, operation="UPDATE", old_object=replica_set)
    assert out.result == "ignored" and out.patch == []


def test_the_owner_is_known_by_group_and_kind_not_by_kind_alone() -> None:
    not_apps = workload(_kind("apps", "ReplicaSet"), owner=_owner("example.com/v1", "Deployment"))
    assert _admit(not_apps).result == "patched"


def test_any_version_of_a_handled_group_and_kind_counts() -> None:
    older = workload(_kind("kubevirt.io", "VirtualMachineInstance"), owner=_owner("kubevirt.io/v1alpha3", "VirtualMachine"))
    assert _admit(older).reason == "owned by VirtualMachine/web: placed through its owner"


@pytest.mark.parametrize("controller", [False, None, "true"], ids=["false", "absent", "a string"])
def test_an_owner_that_is_not_the_controller_does_not_block_mutation(controller: Any) -> None:
    obj = workload(_kind("apps", "ReplicaSet"), owner=_owner("apps/v1", "Deployment", controller=controller))
    assert _admit(obj).result == "patched"


def test_an_operator_of_a_kind_the_engine_does_not_handle_does_not_block_mutation() -> None:
    obj = workload(_kind("apps", "StatefulSet"), owner=_owner("databases.example.com/v1", "PostgresCluster"))
    assert _admit(obj).result == "patched"


def test_a_kind_declared_in_the_kinds_configuration_counts_as_an_owner() -> None:
    widget = Target("example.com", "v1", "Widget", ("spec", "template", "spec"), ("spec", "template", "metadata", "labels"))
    policies = PolicySet((ZONE,), targets=BUILTIN.extended([widget]))
    obj = workload(_kind("apps", "Deployment"), owner=_owner("example.com/v1", "Widget", "w1"))
    out = _admit(obj, policies)
    assert out.result == "ignored" and out.reason == "owned by Widget/w1: placed through its owner"
    assert _admit(obj).result == "patched", "without the declaration a Widget is a stranger's object"


@pytest.mark.parametrize("refs", [{"apiVersion": "apps/v1"}, ["not a reference", 3], "Deployment"])
def test_malformed_owner_references_are_passed_over(refs: Any) -> None:
    obj = workload(_kind("apps", "ReplicaSet"))
    obj["metadata"]["ownerReferences"] = refs
    assert _admit(obj).result == "patched"


def test_the_first_controller_reference_decides_as_in_get_controller_of() -> None:
    obj = workload(_kind("apps", "ReplicaSet"))
    obj["metadata"]["ownerReferences"] = [
        _owner("databases.example.com/v1", "PostgresCluster", "pg", controller=False),
        _owner("apps/v1", "Deployment", "web"),
    ]
    assert _admit(obj).reason == "owned by Deployment/web: placed through its owner"


def test_an_owned_object_is_not_mutated_even_when_a_policy_refuses_the_skip_annotation() -> None:
    obj = workload(_kind("apps", "ReplicaSet"), owner=_owner("apps/v1", "Deployment"))
    refusing = policy("residency", allowSkip=False, placement={"nodeSelector": {"region": "eu"}})
    assert _admit(obj, policy_set(refusing)).result == "ignored"


def test_the_target_is_still_reported_for_an_owned_object() -> None:
    obj = workload(_kind("apps", "ReplicaSet"), owner=_owner("apps/v1", "Deployment"))
    assert _admit(obj).target == target_of(obj)
