"""End to end: one scheduling cycle of the whole default profile (``schedule``), replicas
placed one after another (``place``), and the FitError message as the scheduler formats it
(``FitError.Error()`` in pkg/scheduler/framework/types.go)."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.scheduler.builders import (
    HOSTNAME,
    expr,
    node,
    pod,
    pod_affinity,
    required_nodes,
    selector,
    spread,
    term,
)
from webhook.scheduler import (
    DEFAULT_WEIGHTS,
    Cluster,
    Options,
    Result,
    place,
    schedule,
)

CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110"}
DB_TAINT = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}


def _node(name: str, zone: str = "z1", **kw: Any) -> dict[str, Any]:
    labels = {HOSTNAME: name, "topology.kubernetes.io/zone": zone, **kw.pop("labels", {})}
    return node(name, labels, capacity=kw.pop("capacity", CAPACITY), **kw)


def _web(name: str = "web", **spec: Any) -> dict[str, Any]:
    return pod(name, labels={"app": "web"}, req={"cpu": "500m", "memory": "512Mi"}, **spec)


def test_the_message_counts_each_node_under_its_first_failing_filter_sorted_as_strings() -> None:
    nodes = [_node("a", taints=[DB_TAINT]), _node("b", capacity={"cpu": "1", "pods": "10"}),
             _node("c", capacity={"cpu": "1", "pods": "10"})]
    result = schedule(pod("p", req={"cpu": "2"}), Cluster.from_objects(nodes))
    assert result.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    # A request above allocatable cannot be fixed by preemption: UnschedulableAndUnresolvable.
    assert {n: f.code for n, f in result.filtered.items()} == {
        "a": "UnschedulableAndUnresolvable", "b": "UnschedulableAndUnresolvable", "c": "UnschedulableAndUnresolvable"}


def test_nodes_short_of_room_for_a_pod_of_equal_priority_find_no_victims() -> None:
    nodes = [_node("a", taints=[DB_TAINT]), _node("b"), _node("c")]
    pods = [pod(f"x-{n}", on=n, req={"cpu": "3"}) for n in ("b", "c")]
    result = schedule(pod("p", req={"cpu": "2"}), Cluster.from_objects(nodes, pods))
    assert result.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod.")


def test_a_release_before_the_generic_taint_reason_names_the_taint() -> None:
    result = schedule(pod("p"), Cluster.from_objects([_node("a", taints=[DB_TAINT])]),
                      options=Options.for_version((1, 34, 1)), preempt=False)
    assert result.message == "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: db}."


def test_every_failing_filter_is_listed_in_profile_order_but_only_the_first_is_counted() -> None:
    nodes = [_node("a", taints=[DB_TAINT], capacity={"cpu": "1", "pods": "10"}, unschedulable=True)]
    incoming = pod("p", req={"cpu": "2"}, nodeSelector={"disk": "ssd"}, nodeName="b")
    result = schedule(incoming, Cluster.from_objects(nodes), preempt=False)
    assert [f.plugin for f in result.failures["a"]] == [
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodeResourcesFit"]
    assert result.filtered["a"].plugin == "NodeUnschedulable"
    assert result.message == "0/1 nodes are available: 1 node(s) were unschedulable."


def test_the_node_affinity_failure_names_the_term_and_expression() -> None:
    incoming = pod("p", affinity=required_nodes({"matchExpressions": [expr("disk", "In", "ssd", "nvme")]}))
    result = schedule(incoming, Cluster.from_objects([_node("a", labels={"disk": "hdd"})]), preempt=False)
    (failure,) = result.failures["a"]
    assert failure.reasons == ("node(s) didn't match Pod's node affinity/selector",)
    assert "nodeSelectorTerms[0].matchExpressions[0] disk In [nvme, ssd]" in failure.details[0]


def test_a_matchfields_affinity_only_visits_the_named_nodes() -> None:
    incoming = pod("p", affinity=required_nodes({"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                  "values": ["b"]}]}))
    result = schedule(incoming, Cluster.from_objects([_node("a"), _node("b", taints=[DB_TAINT]), _node("c")]),
                      preempt=False)
    assert result.message == ("0/3 nodes are available: 1 node(s) had untolerated taint(s), "
                              "2 node(s) didn't satisfy plugin(s) [NodeAffinity].")


@pytest.mark.parametrize(("incoming", "reason"), [
    pytest.param(pod("p", req={"nvidia.com/gpu": "1"}), "Insufficient nvidia.com/gpu", id="extended resources"),
    pytest.param(pod("p", nodeName="elsewhere"), "node(s) didn't match the requested node name", id="node name"),
    pytest.param(pod("p", containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]),
                 "node(s) didn't have free ports for the requested pod ports", id="host ports"),
    pytest.param(pod("p", affinity=pod_affinity(required=[term(selector({"app": "db"}), HOSTNAME)])),
                 "node(s) didn't match pod affinity rules", id="pod affinity"),
])
def test_each_filter_reports_its_own_reason(incoming: dict[str, Any], reason: str) -> None:
    existing = [pod("proxy", on="a", containers=[{"name": "c", "ports": [{"containerPort": 1, "hostPort": 8080}]}])]
    result = schedule(incoming, Cluster.from_objects([_node("a")], existing), preempt=False)
    assert result.message == f"0/1 nodes are available: 1 {reason}."


def test_a_pod_tolerating_the_unschedulable_taint_may_use_a_cordoned_node() -> None:
    incoming = pod("p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                      "effect": "NoSchedule"}])
    assert schedule(incoming, Cluster.from_objects([_node("a", unschedulable=True)])).chosen == ("a",)


def test_the_total_is_the_weighted_sum_of_the_normalized_plugin_scores() -> None:
    nodes = [_node("a"), _node("b", zone="z2"), _node("c", zone="z2")]
    existing = [pod("big", on="a", req={"cpu": "3", "memory": "6Gi"}), pod("web-0", on="b", labels={"app": "web"})]
    result = schedule(_web(topologySpreadConstraints=[spread(1, HOSTNAME, "ScheduleAnyway", selector({"app": "web"}))]),
                      Cluster.from_objects(nodes, existing))
    for name in result.feasible:
        parts = result.breakdown(name)
        assert {p: s.weight for p, s in parts.items()} == dict(DEFAULT_WEIGHTS)
        assert sum(s.weighted for s in parts.values()) == result.score(name)
    assert result.chosen == ("c",)
    assert result.ranking()[0] == ("c", result.score("c"))


def test_identical_nodes_tie_and_place_takes_the_first_by_name() -> None:
    cluster = Cluster.from_objects([_node("b"), _node("a")])
    placed = place(_web(), cluster)
    assert placed.result.chosen == ("a", "b")
    assert (placed.node, placed.tied) == ("a", ("a", "b"))
    assert [p.key for p in placed.cluster.nodes["a"].pods] == ["default/web"]
    assert cluster.nodes["a"].pods == ()  # the input snapshot is left as it was


def _replicas(count: int, template: dict[str, Any], cluster: Cluster) -> tuple[list[str | None], Result, Cluster]:
    placed: list[str | None] = []
    result = None
    for i in range(count):
        replica = copy.deepcopy(template)
        replica["metadata"]["name"] = f"web-{i}"
        step = place(replica, cluster)
        placed.append(step.node)
        cluster, result = step.cluster, step.result
    assert result is not None
    return placed, result, cluster


def test_replicas_with_hostname_anti_affinity_take_one_node_each_until_none_is_left() -> None:
    anti = pod_affinity(anti=[term(selector({"app": "web"}), HOSTNAME)])
    nodes = [_node("a"), _node("b"), _node("c")]
    placed, last, _ = _replicas(4, _web(affinity=anti), Cluster.from_objects(nodes))
    assert sorted(n for n in placed[:3] if n) == ["a", "b", "c"] and placed[3] is None
    assert last.message == ("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
                            "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")


def test_replicas_spread_evenly_over_zones_under_a_hard_constraint() -> None:
    constraint = spread(1, "topology.kubernetes.io/zone", "DoNotSchedule", selector({"app": "web"}))
    nodes = [_node("a"), _node("b"), _node("c", zone="z2")]
    placed, _, cluster = _replicas(6, _web(topologySpreadConstraints=[constraint]), Cluster.from_objects(nodes))
    per_zone = {"z1": sum(n in ("a", "b") for n in placed), "z2": placed.count("c")}
    assert per_zone == {"z1": 3, "z2": 3}
    assert len(cluster.nodes["c"].pods) == 3


def test_the_incrementally_updated_state_equals_a_fresh_one() -> None:
    """After binding replicas, a cycle on the updated snapshot gives exactly what a snapshot
    built from scratch with the same pods gives (PreFilter/PreScore state kept by AddPod)."""
    anti = pod_affinity(anti_preferred=[term(selector({"app": "web"}), HOSTNAME, weight=10)])
    template = _web(affinity=anti, topologySpreadConstraints=[
        spread(1, "topology.kubernetes.io/zone", "DoNotSchedule", selector({"app": "web"}))])
    nodes = [_node("a"), _node("b"), _node("c", zone="z2"), _node("d", zone="z2", taints=[DB_TAINT])]
    existing = [pod("db", on="d", labels={"app": "db"}, req={"cpu": "1"}),
                pod("web-old", on="a", labels={"app": "web"}, affinity=pod_affinity(anti=[term(selector({"app": "x"}), HOSTNAME)]))]
    _, _, cluster = _replicas(5, template, Cluster.from_objects(nodes, existing))
    fresh = Cluster.from_objects([n.obj for n in cluster.nodes.values()],
                                 [{**p.obj, "spec": {**p.obj["spec"], "nodeName": n.name}} for p, n in cluster.pods()])
    incoming = copy.deepcopy(template)
    incoming["metadata"]["name"] = "web-next"
    got, want = schedule(incoming, cluster), schedule(incoming, fresh)
    assert (got.feasible, got.totals, dict(got.plugin_scores), got.message) == (
        want.feasible, want.totals, dict(want.plugin_scores), want.message)
    assert {n: [str(f) for f in fs] for n, fs in got.failures.items()} == {
        n: [str(f) for f in fs] for n, fs in want.failures.items()}


def test_system_default_spreading_applies_only_with_an_owner_selector() -> None:
    nodes = [_node("a"), _node("b"), _node("c", zone="z2")]
    existing = [pod("web-old", on="a", labels={"app": "web"})]
    owned = schedule(pod("p", labels={"app": "web"}), Cluster.from_objects(nodes, existing),
                     default_selector={"matchLabels": {"app": "web"}})
    assert [owned.breakdown(n)["PodTopologySpread"].normalized for n in ("a", "b", "c")] != [0, 0, 0]
    bare = schedule(pod("p", labels={"app": "web"}), Cluster.from_objects(nodes, existing))
    assert [bare.breakdown(n)["PodTopologySpread"].normalized for n in ("a", "b", "c")] == [0, 0, 0]


def test_unbinding_one_pod_copies_only_its_node_and_the_state_follows_as_after_evict() -> None:
    """``unbind`` takes one pod off its known node: the other nodes are the same objects, and a
    cycle on the result (its PreFilter/PreScore state kept by RemovePod) is the one ``evict``
    and a snapshot built without the pod give."""
    spread_web = _web(topologySpreadConstraints=[
        spread(1, "topology.kubernetes.io/zone", "DoNotSchedule", selector({"app": "web"}))])
    nodes = [_node("a"), _node("b"), _node("c", zone="z2")]
    existing = [_web("web-1", on="a"), _web("web-2", on="b"), _web("web-3", on="c")]
    cluster = Cluster.from_objects(nodes, existing)
    schedule(spread_web, cluster)  # the pod's state now lives in this snapshot's trackers
    leaving = next(p for p in cluster.nodes["c"].pods if p.name == "web-3")
    unbound = cluster.unbind(leaving, "c")
    assert unbound.nodes["a"] is cluster.nodes["a"] and unbound.nodes["b"] is cluster.nodes["b"]
    assert [p.name for p in unbound.nodes["c"].pods] == []
    whole = Cluster.from_objects(nodes, existing)
    evicted = whole.evict([p for p, _ in whole.pods() if p.name == "web-3"])
    assert [p.name for p in evicted.nodes["c"].pods] == []
    fresh = Cluster.from_objects(nodes, existing[:2])
    got, after_evict, want = schedule(spread_web, unbound), schedule(spread_web, evicted), schedule(spread_web, fresh)
    assert got.chosen == want.chosen == after_evict.chosen == ("c",)
    assert got.totals == want.totals and got.message == want.message


def test_a_nodes_pods_by_namespace_follow_every_copy_of_the_node() -> None:
    """PodTopologySpread counts through ``NodeInfo.in_namespace``: a copy with pods added or
    removed groups its own pods, never the original's."""
    cluster = Cluster.from_objects([_node("a")], [_web("web-1", on="a"), pod("db", ns="data", on="a")])
    node_a = cluster.nodes["a"]
    assert [p.name for p in node_a.in_namespace("default")] == ["web-1"]
    assert [p.name for p in node_a.in_namespace("data")] == ["db"] and node_a.in_namespace("none") == ()
    more = cluster.bind(_web("web-2"), "a").nodes["a"]
    assert [p.name for p in more.in_namespace("default")] == ["web-1", "web-2"]
    fewer = more.without_pods([p for p in more.pods if p.name == "web-1"])
    assert [p.name for p in fewer.in_namespace("default")] == ["web-2"]
    assert [p.name for p in node_a.in_namespace("default")] == ["web-1"]


def test_a_cluster_without_nodes_answers_no_nodes_available_before_any_plugin_runs() -> None:
    # genericScheduler.Schedule returns ErrNoNodesAvailable when the snapshot is empty: no
    # FitError histogram, no preemption, even for a pod PreFilter would reject.
    for spec in ({}, {"affinity": pod_affinity(required=[term({"app": "db"}, HOSTNAME)])}):
        result = schedule(pod("p", **spec), Cluster.from_objects([]))
        assert (result.message, result.schedulable, result.preemption) == (
            "no nodes available to schedule pods", False, None)
