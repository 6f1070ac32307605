"""Suggestions are changes after which the simulated rollout completes, smallest first."""
from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.builders import HOSTNAME, ONE_PER_NODE, deployment, node, nodes, running
from webhook.explain.simulate import place_all
from webhook.explain.suggest import Rank, dedicated_taint, suggest
from webhook.explain.workloads import build
from webhook.kube.kinds import BUILTIN
from webhook.scheduler import Cluster

Obj = dict[str, Any]
SSD_IN_ZONE_A = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]},
                          {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}


def zoned(count: int, **extra: Any) -> list[Obj]:
    return [node(f"n{i}", {HOSTNAME: f"n{i}", "zone": "a"}, capacity={"cpu": "4", "memory": "8Gi"}, **extra)
            for i in range(count)]


def test_a_rollout_that_completes_needs_no_suggestion() -> None:
    assert suggest(deployment(), Cluster.from_objects(nodes(2), running(2, 2))) == []


def test_the_stuck_spread_rollout_is_told_to_take_one_down_first_and_that_is_verified() -> None:
    found = suggest(deployment(affinity=ONE_PER_NODE), Cluster.from_objects(nodes(2), running(2, 2)))
    assert [s.change for s in found] == [
        "set maxSurge: 0, maxUnavailable: 1 (take one old pod down before each new one)",
        "add 1 node like n0 (same labels, taints and allocatable)"]
    assert found[0].verdict.summary() == "the rollout completes in 4 steps with at least 1 of 2 replicas available"
    assert found[1].patch == [] and found[1].nodes == 1
    assert found[1].verdict.min_available == 2  # the spare node takes the surge pod: nothing goes down


def test_match_label_keys_is_suggested_only_where_the_cluster_honours_it() -> None:
    cluster = Cluster.from_objects(nodes(2), running(2, 2))
    unknown = suggest(deployment(affinity=ONE_PER_NODE), cluster)
    honoured = suggest(deployment(affinity=ONE_PER_NODE), Cluster.from_objects(nodes(2), running(2, 2)),
                       match_label_keys=True)
    assert not any("matchLabelKeys" in s.change for s in unknown)
    scoped = next(s for s in honoured if "matchLabelKeys" in s.change)
    assert scoped.patch == [{"op": "add", "path": "/spec/template/spec/affinity/podAntiAffinity/"
                             "requiredDuringSchedulingIgnoredDuringExecution/0/matchLabelKeys",
                             "value": ["pod-template-hash"]}]
    assert scoped.verdict.min_available == 2  # old and new no longer repel: nothing goes down early


def test_a_term_that_already_selects_the_revision_gets_no_match_label_keys() -> None:
    # The API server rejects matchLabelKeys naming a key the labelSelector has.
    affinity = copy.deepcopy(ONE_PER_NODE)
    term = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    term["labelSelector"]["matchExpressions"] = [{"key": "pod-template-hash", "operator": "Exists"}]
    found = suggest(deployment(affinity=affinity), Cluster.from_objects(nodes(2), running(2, 2)), match_label_keys=True)
    assert not any("matchLabelKeys" in s.change for s in found)


def test_the_expression_no_node_satisfies_is_the_one_dropped() -> None:
    found = suggest(deployment(affinity=SSD_IN_ZONE_A), Cluster.from_objects(zoned(2), running(2, 2)))
    changes = [s.change for s in found]
    assert changes == ["drop nodeSelectorTerms[0].matchExpressions[0] (disk In [ssd])",
                       "make the required node affinity preferred (weight 100)"]
    assert found[0].patch == [{"op": "remove", "path": "/spec/template/spec/affinity/nodeAffinity/"
                               "requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0"}]


def test_made_preferred_the_terms_keep_their_intent_as_a_preference() -> None:
    found = suggest(deployment(affinity=SSD_IN_ZONE_A), Cluster.from_objects(zoned(2), running(2, 2)))
    changed = jsonpatch.apply_patch(deployment(affinity=SSD_IN_ZONE_A), found[-1].patch)
    node_affinity = changed["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert node_affinity == {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": SSD_IN_ZONE_A["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
         ["nodeSelectorTerms"][0]}]}


def test_a_node_selector_no_node_has_is_dropped() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "ssd", "zone": "a"}
    found = suggest(obj, Cluster.from_objects(zoned(2), running(2, 2)))
    assert [s.change for s in found] == ["drop nodeSelector disk=ssd"]


def test_the_taint_that_keeps_every_node_out_is_tolerated() -> None:
    tainted = zoned(2, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    found = suggest(deployment(), Cluster.from_objects(tainted, running(2, 2)))
    assert [s.change for s in found] == ["tolerate the taint dedicated=gpu:NoSchedule"]
    changed = jsonpatch.apply_patch(deployment(), found[0].patch)
    assert changed["spec"]["template"]["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]


def test_replicas_that_do_not_fit_ask_for_as_many_nodes_as_they_need() -> None:
    small = [node(f"n{i}", {HOSTNAME: f"n{i}"}, capacity={"cpu": "1", "memory": "8Gi"}) for i in range(2)]
    obj = deployment(4)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "600m"}}
    found = suggest(obj, Cluster.from_objects(small))  # a new Deployment: nothing runs yet
    assert [s.change for s in found] == ["add 2 nodes like n0, n1 (same labels, taints and allocatable)"]
    assert found[0].verdict.completes and found[0].nodes == 2


def test_no_nodes_are_suggested_when_every_node_is_the_wrong_kind() -> None:
    tainted = zoned(2, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    assert not any(s.nodes for s in suggest(deployment(), Cluster.from_objects(tainted, running(2, 2))))


def test_a_null_tolerations_field_is_set_rather_than_appended_to() -> None:
    tainted = zoned(2, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    obj = deployment()
    obj["spec"]["template"]["spec"]["tolerations"] = None
    found = suggest(obj, Cluster.from_objects(tainted, running(2, 2)))
    assert found[0].patch == [{"op": "add", "path": "/spec/template/spec/tolerations", "value": [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}]


def _fresh(obj: Any, cluster: Cluster) -> Any:
    """Place a new Deployment's replicas (explain's simulation of a workload being created)."""
    (target,) = BUILTIN.with_kind("Deployment")
    return place_all(build(obj, target), cluster)


def test_a_required_in_expression_is_widened_by_the_values_of_the_nodes_it_turned_away() -> None:
    zones = [node(f"n{i}", {HOSTNAME: f"n{i}", "zone": z}, capacity={"cpu": "4"}) for i, z in enumerate("aabc")]
    affinity = {**ONE_PER_NODE, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    web = deployment(replicas=3, affinity=affinity)  # one per node, and only 2 nodes in zone a
    found = suggest(web, Cluster.from_objects(zones), simulate=_fresh, rollout=False)
    assert found[0].change == "widen nodeSelectorTerms[0].matchExpressions[0] (zone In [a]) to also allow b, c"
    assert found[0].patch[0]["value"] == ["a", "b", "c"] and found[0].verdict.completes


def test_a_required_not_in_expression_is_narrowed_to_let_the_turned_away_nodes_in() -> None:
    pool = [node(f"n{i}", {HOSTNAME: f"n{i}", "pool": p}, capacity={"cpu": "4"}) for i, p in enumerate(["web", "batch"])]
    affinity = {**ONE_PER_NODE, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["batch", "gpu"]}]}]}}}
    found = suggest(deployment(replicas=2, affinity=affinity), Cluster.from_objects(pool), simulate=_fresh,
                    rollout=False)
    assert found[0].change == ("narrow nodeSelectorTerms[0].matchExpressions[0] (pool NotIn [batch, gpu]) to no longer "
                               "exclude batch")
    assert found[0].patch[0]["value"] == ["gpu"]


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _gpu_node(name: str = "gpu-1") -> Obj:
    return node(name, {HOSTNAME: name}, capacity={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"}, taints=[GPU_TAINT])


def test_a_web_workload_is_told_to_tolerate_the_gpu_taint_last_and_why() -> None:
    found = suggest(deployment(affinity=ONE_PER_NODE), Cluster.from_objects([*nodes(2), _gpu_node()], running(2, 2)))
    assert [s.change for s in found] == [
        "set maxSurge: 0, maxUnavailable: 1 (take one old pod down before each new one)",
        "add 1 node like n0 (same labels, taints and allocatable)",
        "tolerate the taint nvidia.com/gpu=present:NoSchedule"]
    assert [s.why for s in found] == [
        "changes only how the rollout proceeds, not where the pods may run; one replica fewer serves while each is "
        "replaced",
        "the workload stays as it is; the cluster needs 1 more node of a shape it already has",
        "last resort: the 1 node(s) tainted nvidia.com/gpu are kept for dedicated hardware or duties, which this "
        "workload does not ask for"]


def test_a_workload_that_requests_the_gpu_is_told_to_tolerate_its_taint_as_an_ordinary_change() -> None:
    obj = deployment(1)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    found = suggest(obj, Cluster.from_objects([_gpu_node()]), simulate=_fresh, rollout=False)
    assert [(s.change, s.why) for s in found] == [
        ("tolerate the taint nvidia.com/gpu=present:NoSchedule",
         "the workload requests nvidia.com/gpu, which the 1 node(s) tainted nvidia.com/gpu are kept for")]


def test_an_ordinary_taint_ranks_with_the_relaxed_requirements_before_nodes_are_added() -> None:
    spot = {"key": "spot", "value": "true", "effect": "NoSchedule"}
    cluster = Cluster.from_objects([*nodes(2), node("s0", {HOSTNAME: "s0"}, capacity={"cpu": "4"}, taints=[spot])],
                                   running(2, 2))
    found = suggest(deployment(affinity=ONE_PER_NODE), cluster)
    assert [s.change for s in found][1:] == ["tolerate the taint spot=true:NoSchedule",
                                             "add 1 node like n0 (same labels, taints and allocatable)"]
    assert found[1].why == "lets the pods onto the 1 node(s) tainted spot, which keep other pods out today"


@pytest.mark.parametrize(("key", "value", "dedicated"), [
    ("nvidia.com/gpu", "present", True),
    ("amd.com/gpu", "", True),
    ("cloud.google.com/gke-accelerator", "nvidia-tesla-t4", True),
    ("google.com/tpu", "present", True),
    ("dedicated", "ml", True),
    ("pool", "dedicated", True),
    ("node-role.kubernetes.io/control-plane", "", True),
    ("node-role.kubernetes.io/master", "", True),
    ("spot", "true", False),
    ("node.kubernetes.io/disk-pressure", "", False),
    ("team", "gpuless", False),
])
def test_dedicated_hardware_taints_are_told_by_their_key_and_value(key: str, value: str, dedicated: bool) -> None:
    assert dedicated_taint(key, value) is dedicated


TAINTS = [GPU_TAINT, {"key": "spot", "value": "true", "effect": "NoSchedule"},
          {"key": "dedicated", "value": "db", "effect": "NoSchedule"}, {"key": "zone-b", "value": "", "effect": "NoSchedule"}]


def _suggested(order: list[int]) -> list[Any]:
    extra = [node(f"t{i}", {HOSTNAME: f"t{i}"}, capacity={"cpu": "4", "memory": "8Gi"}, taints=[TAINTS[i]]) for i in order]
    return suggest(deployment(affinity=ONE_PER_NODE), Cluster.from_objects([*nodes(2), *extra], running(2, 2)))


@settings(max_examples=20, deadline=None)
@given(st.permutations(range(4)))
def test_suggestions_come_in_rank_order_whatever_order_the_tainted_nodes_are_in(order: list[int]) -> None:
    found = _suggested(order)
    assert [s.rank for s in found] == sorted(s.rank for s in found) and all(s.why for s in found)
    assert [s.change for s in found] == [s.change for s in _suggested([0, 1, 2, 3])]
    assert found[-1].rank == Rank.DEDICATED  # a dedicated pool's taint, the GPU's cut by the limit of five
