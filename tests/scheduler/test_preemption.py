"""DefaultPreemption, re-expressed from defaultpreemption/default_preemption_test.go
(TestPostFilter, TestDryRunPreemption, TestSelectBestCandidate). Start times are whole seconds
here (``epochTime<k>`` is k nanoseconds there; a pod's startTime in JSON has second
precision), which keeps their order."""
from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.builders import (
    node,
    pod,
    pod_affinity,
    selector,
    spread,
    state_for,
    term,
)
from webhook.scheduler import Cluster, Failure, place, schedule
from webhook.scheduler.preemption import preempt

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": "1"}
NODE_RES = {"cpu": "200m", "memory": "400"}
PDB_KEY = "test.kubernetes.io/is-violating-pdb"
FOO_APP = {"app": "foo"}


def _epoch(k: int) -> str:
    return f"1970-01-01T00:00:{k:02d}Z"


def _victim(name: str, where: str, priority: int, req: dict[str, str] | None = None, start: int | None = 0,
            labels: dict[str, str] | None = None) -> dict[str, Any]:
    return pod(name, on=where, priority=priority, req=req, start=None if start is None else _epoch(start),
               labels=labels)


def _nodes(*names: str, capacity: dict[str, str] = VERY_LARGE) -> list[dict[str, Any]]:
    return [node(n, capacity=capacity) for n in names]


def _status(code: str) -> Failure:
    return Failure("NodeResourcesFit", code, ("some reason",))


POST_FILTER: list[Any] = [
    pytest.param(pod("p", priority=HIGH), [_victim("p1", "node1", LOW, start=None)], _nodes("node1", capacity=ONE_POD),
                 {"node1": "Unschedulable"}, "node1", "",
                 id="TestPostFilter: pod with higher priority can be made schedulable"),
    pytest.param(pod("p"), [_victim("p1", "node1", LOW, start=None)], _nodes("node1", capacity=ONE_POD),
                 {"node1": "Unschedulable"}, None,
                 "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
                 id="TestPostFilter: pod with tied priority is still unschedulable"),
    pytest.param(pod("p", priority=HIGH), [_victim("p1", "node1", LOW, start=None)], _nodes("node1", capacity=ONE_POD),
                 {"node1": "UnschedulableAndUnresolvable"}, None,
                 "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
                 id="TestPostFilter: preemption should respect filteredNodesStatuses"),
    pytest.param(pod("p", priority=HIGH), [_victim("p1", "node1", LOW, start=None)], _nodes("node1", capacity=ONE_POD),
                 {}, None, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
                 id="TestPostFilter: an absent status means UnschedulableAndUnresolvable"),
    pytest.param(pod("p", priority=MID), [_victim("p1", "node1", HIGH, start=None), _victim("p2", "node2", LOW, start=None)],
                 _nodes("node1", "node2", capacity=ONE_POD), {"node1": "Unschedulable", "node2": "Unschedulable"},
                 "node2", "", id="TestPostFilter: pod can be made schedulable on one node"),
    pytest.param(pod("p", priority=HIGH, req=LARGE),
                 [_victim("p1", "node1", LOW, start=None), _victim("p2", "node2", LOW, start=None)],
                 _nodes("node1", "node2", capacity=NODE_RES), {"node1": "Unschedulable", "node2": "Unschedulable"}, None,
                 "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
                 id="TestPostFilter: no candidate nodes found, no enough resource after removing low priority pods"),
    pytest.param(pod("p", priority=HIGH, req=LARGE),
                 [_victim("p1", "node1", HIGH, start=None), _victim("p2", "node2", LOW, start=None),
                  _victim("p3", "node3", HIGH, start=None)],
                 [*_nodes("node1", capacity=ONE_POD), *_nodes("node2", capacity=NODE_RES), *_nodes("node3", capacity=ONE_POD)],
                 {"node1": "Unschedulable", "node2": "Unschedulable", "node3": "Unschedulable"}, None,
                 "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
                 id="TestPostFilter: no candidate nodes found with mixed reasons"),
    pytest.param(pod("p", priority=HIGH, req=LARGE),
                 [_victim("p1", "node1", LOW, start=None), _victim("p2", "node2", LOW, start=None)],
                 _nodes("node1", "node2", "node3", "node4", capacity=NODE_RES),
                 {"node1": "Unschedulable", "node2": "Unschedulable", "node4": "UnschedulableAndUnresolvable"}, None,
                 "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
                 id="TestPostFilter: 2 UnschedulableAndUnresolvable nodes and 2 nodes without enough CPU"),
]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "codes", "nominated", "message"), POST_FILTER)
def test_post_filter_matches_the_upstream_table(incoming: dict[str, Any], pods: list[Any], nodes: list[Any],
                                                codes: dict[str, str], nominated: str | None, message: str) -> None:
    state, cluster = state_for(incoming, nodes, pods)
    got = preempt(state, cluster, {n: _status(code) for n, code in codes.items()}, len(nodes))
    assert (got.nominated, got.message) == (nominated, message)


def test_the_pdb_violations_come_first_then_the_lowest_highest_priority() -> None:
    """TestPostFilter "pod can be made schedulable on minHighestPriority node"."""
    pods = [_victim("p1", "node1", HIGH, start=None, labels={PDB_KEY: "non-violating"}),
            _victim("p2", "node1", LOW, start=None, labels={PDB_KEY: "violating"}),
            _victim("p3", "node2", MID, start=None, labels={PDB_KEY: "violating"})]
    pdbs = [{"metadata": {"name": "violating-pdb", "namespace": "default"},
             "spec": {"selector": {"matchLabels": {PDB_KEY: "violating"}}},
             "status": {"disruptionsAllowed": 0}},
            {"metadata": {"name": "non-violating-pdb", "namespace": "default"},
             "spec": {"selector": {"matchLabels": {PDB_KEY: "non-violating"}}},
             "status": {"disruptionsAllowed": 2**31 - 1}}]
    cluster = Cluster.from_objects(_nodes("node1", "node2", capacity=ONE_POD), pods, pdbs=pdbs)
    result = schedule(pod("p", priority=VERY_HIGH), cluster)
    assert result.preemption is not None
    assert result.preemption.nominated == "node2"
    assert {c.node: (c.victim_keys, c.pdb_violations) for c in result.preemption.candidates} == {
        "node1": (("default/p1", "default/p2"), 1), "node2": (("default/p3",), 1)}


DRY_RUN: list[Any] = [
    pytest.param(pod("p", priority=HIGH, req=LARGE),
                 [_victim("p1", "node1", MID, LARGE), _victim("p2", "node2", MID, LARGE)], [],
                 {"node1": ["p1"], "node2": ["p2"]},
                 id="TestDryRunPreemption: a pod that fits on both nodes when lower priority pods are preempted"),
    pytest.param(pod("p", priority=LOW, req=LARGE),
                 [_victim("p1", "node1", MID, LARGE), _victim("p2", "node2", MID, LARGE)], [], {},
                 id="TestDryRunPreemption: other pods running are higher priority, no preemption would happen"),
    pytest.param(pod("p", priority=HIGH, req=LARGE),
                 [_victim("p1.1", "node1", LOW, SMALL), _victim("p1.2", "node1", MID, LARGE),
                  _victim("p2", "node2", MID, LARGE)], [],
                 {"node1": ["p1.2"], "node2": ["p2"]},
                 id="TestDryRunPreemption: medium priority pod is preempted, but lower priority one stays as it is small"),
    pytest.param(pod("p", priority=HIGH, req=LARGE),
                 [_victim("p1.1", "node1", MID, SMALL), _victim("p1.2", "node1", LOW, SMALL),
                  _victim("p1.3", "node1", MID, MEDIUM), _victim("p1.4", "node1", HIGH, SMALL),
                  _victim("p2", "node2", HIGH, LARGE)], [],
                 {"node1": ["p1.2", "p1.3"]}, id="TestDryRunPreemption: mixed priority pods are preempted"),
    pytest.param(pod("p", priority=HIGH, req=LARGE),
                 [_victim("p1.1", "node1", LOW, SMALL, 5), _victim("p1.2", "node1", LOW, SMALL, 4),
                  _victim("p1.3", "node1", MID, MEDIUM, 3), _victim("p1.4", "node1", HIGH, SMALL, 2),
                  _victim("p2", "node2", HIGH, LARGE, 1)], [],
                 {"node1": ["p1.1", "p1.3"]},
                 id="TestDryRunPreemption: mixed priority pods are preempted, pick later StartTime one when priorities are equal"),
    pytest.param(pod("p", priority=HIGH, req=VERY_LARGE),
                 [_victim("p1.1", "node1", MID, MEDIUM, labels=FOO_APP), _victim("p1.2", "node1", MID, MEDIUM, labels=FOO_APP)],
                 [{"spec": {"selector": {"matchLabels": {"app": "foo"}}}, "status": {"disruptionsAllowed": 1}}],
                 {"node1": ["p1.1", "p1.2"]}, id="TestDryRunPreemption: preemption with violation of same pdb"),
]


@pytest.mark.parametrize(("incoming", "pods", "pdbs", "want"), DRY_RUN)
def test_dry_run_candidates_match_the_upstream_table(incoming: dict[str, Any], pods: list[Any], pdbs: list[Any],
                                                     want: dict[str, list[str]]) -> None:
    nodes = sorted({p["spec"]["nodeName"] for p in pods})
    result = schedule(incoming, Cluster.from_objects(_nodes(*nodes), pods, pdbs=pdbs))
    assert result.preemption is not None
    assert {c.node: sorted(v.name for v in c.victims) for c in result.preemption.candidates} == want


def test_a_disrupted_pod_of_the_pdb_is_not_counted_again() -> None:
    """TestDryRunPreemption "... the victim belongs to DisruptedPods": 0 violations; without it, 1."""
    pods = [_victim("p1.1", "node1", MID, MEDIUM, labels=FOO_APP), _victim("p1.2", "node1", MID, MEDIUM, labels=FOO_APP)]
    counted = []
    for disrupted in ({"p1.2": "2024-01-01T00:00:00Z"}, {"p2": "2024-01-01T00:00:00Z"}):
        pdb = {"spec": {"selector": {"matchLabels": {"app": "foo"}}},
               "status": {"disruptionsAllowed": 1, "disruptedPods": disrupted}}
        result = schedule(pod("p", priority=HIGH, req=VERY_LARGE), Cluster.from_objects(_nodes("node1"), pods, pdbs=[pdb]))
        assert result.preemption is not None and result.preemption.chosen is not None
        counted.append(result.preemption.chosen.pdb_violations)
    assert counted == [0, 1]


def test_preemption_removes_an_existing_pods_anti_affinity() -> None:
    """TestDryRunPreemption "pod with anti-affinity is preempted"."""
    pods = [pod("p1.1", on="node1", priority=LOW, req=SMALL, labels={"foo": ""},
                affinity=pod_affinity(anti=[term(selector(exists=["foo"]), "hostname")])),
            _victim("p1.2", "node1", MID, SMALL), _victim("p1.3", "node1", HIGH, SMALL), _victim("p2", "node2", HIGH, SMALL)]
    nodes = [node(n, {"hostname": n}, capacity=VERY_LARGE) for n in ("node1", "node2")]
    result = schedule(pod("p", priority=HIGH, req=SMALL, labels={"foo": ""}), Cluster.from_objects(nodes, pods))
    assert result.chosen == ("node2",)  # node2 fits outright: no preemption at all
    on_node1 = schedule(pod("p", priority=HIGH, req=SMALL, labels={"foo": ""}), Cluster.from_objects(nodes[:1], pods[:3]))
    assert on_node1.preemption is not None
    assert [(c.node, c.victim_keys) for c in on_node1.preemption.candidates] == [("node1", ("default/p1.1",))]


def test_preemption_resolves_a_topology_spread_failure() -> None:
    """TestDryRunPreemption "preemption to resolve pod topology spread filter failure"."""
    nodes = [node(n, {"hostname": n, "zone": z}, capacity=VERY_LARGE)
             for n, z in (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"))]
    pods = [pod("pod-a1", on="node-a", labels={"foo": ""}, priority=MID),
            pod("pod-a2", on="node-a", labels={"foo": ""}, priority=LOW),
            pod("pod-b1", on="node-b", labels={"foo": ""}, priority=LOW),
            pod("pod-x1", on="node-x", labels={"foo": ""}, priority=HIGH),
            pod("pod-x2", on="node-x", labels={"foo": ""}, priority=HIGH)]
    foo = selector(exists=["foo"])
    incoming = pod("p", labels={"foo": ""}, priority=HIGH, topologySpreadConstraints=[
        spread(1, "zone", "DoNotSchedule", foo), spread(1, "hostname", "DoNotSchedule", foo)])
    result = schedule(incoming, Cluster.from_objects(nodes, pods))
    assert result.preemption is not None
    assert {c.node: c.victim_keys for c in result.preemption.candidates} == {
        "node-a": ("default/pod-a2",), "node-b": ("default/pod-b1",)}


SELECT_BEST: list[Any] = [
    pytest.param(LARGE, HIGH, [("node1", MID, LARGE, 0), ("node2", MID, LARGE, 0)], ("node1", "node2"),
                 id="TestSelectBestCandidate: a pod that fits on both nodes when lower priority pods are preempted"),
    pytest.param(VERY_LARGE, HIGH, [("node1", MID, MEDIUM, 0), ("node1", MID, LARGE, 0), ("node2", MID, MEDIUM, 0),
                                    ("node2", LOW, MEDIUM, 0), ("node3", LOW, MEDIUM, 0), ("node3", LOW, MEDIUM, 0)],
                 ("node3",), id="TestSelectBestCandidate: node with min highest priority pod is picked"),
    pytest.param(VERY_LARGE, HIGH, [("node1", MID, MEDIUM, 0), ("node1", MID, LARGE, 0), ("node2", MID, LARGE, 0),
                                    ("node2", LOW, MEDIUM, 0), ("node3", MID, MEDIUM, 0), ("node3", MID, MEDIUM, 0)],
                 ("node2",), id="TestSelectBestCandidate: when highest priorities are the same, minimum sum of priorities is picked"),
    pytest.param(VERY_LARGE, HIGH, [("node1", MID, SMALL, 0), ("node1", NEG, SMALL, 0), ("node1", MID, SMALL, 0),
                                    ("node1", NEG, SMALL, 0), ("node2", MID, LARGE, 0), ("node2", NEG, MEDIUM, 0),
                                    ("node3", MID, MEDIUM, 0), ("node3", NEG, SMALL, 0), ("node3", LOW, SMALL, 0)],
                 ("node2",), id="TestSelectBestCandidate: when highest priority and sum are the same, minimum number of pods is picked"),
    pytest.param(VERY_LARGE, HIGH, [("node1", MID, SMALL, 0), ("node1", NEG, SMALL, 0), ("node1", NEG, SMALL, 0),
                                    ("node2", MID, LARGE, 0), ("node2", NEG, MEDIUM, 0), ("node3", MID, MEDIUM, 0),
                                    ("node3", NEG, SMALL, 0), ("node3", LOW, SMALL, 0)],
                 ("node2",), id="TestSelectBestCandidate: sum of adjusted priorities is considered"),
    pytest.param(VERY_LARGE, VERY_HIGH, [("node1", MID, SMALL, 0), ("node1", LOW, SMALL, 0), ("node1", LOW, SMALL, 0),
                                         ("node2", HIGH, LARGE, 0), ("node3", MID, MEDIUM, 0), ("node3", LOW, SMALL, 0),
                                         ("node3", LOW, SMALL, 0), ("node3", LOW, MEDIUM, 0), ("node4", MID, MEDIUM, 0),
                                         ("node4", MID, SMALL, 0), ("node4", MID, SMALL, 0), ("node4", NEG, SMALL, 0)],
                 ("node1",), id="TestSelectBestCandidate: non-overlapping lowest high priority, sum priorities, and number of pods"),
    pytest.param(VERY_LARGE, HIGH, [("node1", MID, MEDIUM, 2), ("node1", MID, MEDIUM, 2), ("node2", MID, MEDIUM, 3),
                                    ("node2", MID, MEDIUM, 3), ("node3", MID, MEDIUM, 1), ("node3", MID, MEDIUM, 1)],
                 ("node2",), id="TestSelectBestCandidate: same priority, same number of victims, different start time for each node's pod"),
    pytest.param(VERY_LARGE, HIGH, [("node1", MID, MEDIUM, 4), ("node1", MID, MEDIUM, 2), ("node2", MID, MEDIUM, 5),
                                    ("node2", MID, MEDIUM, 1), ("node3", MID, MEDIUM, 3), ("node3", MID, MEDIUM, 6)],
                 ("node3",), id="TestSelectBestCandidate: same priority, same number of victims, different start time for all pods"),
    pytest.param(VERY_LARGE, HIGH, [("node1", LOW, MEDIUM, 4), ("node1", MID, MEDIUM, 2), ("node2", MID, MEDIUM, 6),
                                    ("node2", LOW, MEDIUM, 1), ("node3", LOW, MEDIUM, 3), ("node3", MID, MEDIUM, 5)],
                 ("node2",), id="TestSelectBestCandidate: different priority, same number of victims, different start time for all pods"),
]


@pytest.mark.parametrize(("req", "priority", "pods", "expected"), SELECT_BEST)
def test_the_nominated_node_matches_the_upstream_table(req: dict[str, str], priority: int,
                                                       pods: list[tuple[str, int, dict[str, str], int]],
                                                       expected: tuple[str, ...]) -> None:
    existing = [_victim(f"p-{i}", where, prio, res, start) for i, (where, prio, res, start) in enumerate(pods)]
    names = sorted({where for where, *_ in pods})
    result = schedule(pod("p", priority=priority, req=req), Cluster.from_objects(_nodes(*names), existing))
    assert result.preemption is not None
    assert result.preemption.nominated in expected
    count = len(names)
    assert result.message == f"0/{count} nodes are available: {count} Insufficient cpu, {count} Insufficient memory."


def test_a_pod_that_never_preempts_says_so_in_the_message() -> None:
    """PodEligibleToPreemptOthers with preemptionPolicy Never (v1.35 wording)."""
    incoming = pod("p", priority=HIGH, preemptionPolicy="Never")
    cluster = Cluster.from_objects(_nodes("node1", capacity=ONE_POD), [_victim("p1", "node1", LOW)])
    result = schedule(incoming, cluster)
    assert result.message == ("0/1 nodes are available: 1 Too many pods. "
                              "preemption: not eligible due to preemptionPolicy=Never.")
    assert result.preemption is not None and result.preemption.nominated is None


def test_placing_with_preemption_evicts_the_victims_and_binds_the_pod() -> None:
    cluster = Cluster.from_objects(_nodes("node1", capacity=ONE_POD), [_victim("p1", "node1", LOW)])
    placed = place(pod("p", priority=HIGH), cluster, apply_preemption=True)
    assert (placed.node, placed.evicted) == ("node1", ("default/p1",))
    assert [p.key for p in placed.cluster.nodes["node1"].pods] == ["default/p"]
    untouched = place(pod("p", priority=HIGH), cluster)
    assert (untouched.node, [p.key for p in untouched.cluster.nodes["node1"].pods]) == (None, ["default/p1"])
