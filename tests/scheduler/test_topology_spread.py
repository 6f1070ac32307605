"""PodTopologySpread, re-expressed from podtopologyspread/filtering_test.go (TestPreFilterState,
TestPreFilterStateAddPod, TestSingleConstraint, TestMultipleConstraints) and scoring_test.go
(TestPodTopologySpreadScore). Nodes are written ``"name:key=value,key=value"`` and existing
pods ``"node:key=value"`` to keep the tables as short as the Go ones."""
from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.builders import (
    HOSTNAME,
    expr,
    node,
    pod,
    required_nodes,
    selector,
    spread,
    state_for,
)
from webhook.scheduler import Cluster, prioritize, schedule

FOO, BAR = selector(exists=["foo"]), selector(exists=["bar"])
UNSCHEDULABLE_TAINT = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
OK, NO, NEVER = "Success", "Unschedulable", "UnschedulableAndUnresolvable"


def _labels(text: str) -> dict[str, str]:
    """``"foo,bar=a"`` -> ``{"foo": "", "bar": "a"}``."""
    out: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out[key] = value
    return out


def _nodes(*specs: str, tainted: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """``"node-a:zone=zone1,node=node-a"`` -> the node; names in ``tainted`` get the unschedulable taint."""
    out = []
    for spec in specs:
        name, _, labels = spec.partition(":")
        out.append(node(name, _labels(labels), taints=UNSCHEDULABLE_TAINT if name in tainted else ()))
    return out


def _pods(*specs: str) -> list[dict[str, Any]]:
    """``"node-a:foo"`` -> a pod on node-a labelled foo=""; ``"node-a:foo@ns1"`` in namespace ns1;
    a trailing ``!`` marks it terminating."""
    out = []
    for i, spec in enumerate(specs):
        where, _, rest = spec.partition(":")
        terminating = rest.endswith("!")
        labels, _, ns = rest.rstrip("!").partition("@")
        p = pod(f"p-{where}-{i}", ns=ns or "default", on=where, labels=_labels(labels))
        if terminating:
            p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        out.append(p)
    return out


def _incoming(*constraints: dict[str, Any], labels: str = "foo", **spec: Any) -> dict[str, Any]:
    return pod("p", labels=_labels(labels), topologySpreadConstraints=list(constraints), **spec)


ZONES_4 = _nodes("node-a:zone=zone1,node=node-a", "node-b:zone=zone1,node=node-b",
                 "node-x:zone=zone2,node=node-x", "node-y:zone=zone2,node=node-y")
SPREAD_2_1_0_3 = _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-y:foo", "node-y:foo", "node-y:foo")
NODE_ABC = _nodes("node-a:node=node-a", "node-b:node=node-b", "node-c:node=node-c")
FOO_NODES = _nodes("node-a:node=node-a,foo", "node-b:node=node-b,foo", "node-x:node=node-x,foo", "node-y:node=node-y")
ONE_ONE_ZERO_ONE = _pods("node-a:foo", "node-b:foo", "node-y:foo")

PREFILTER: list[Any] = [
    pytest.param(_incoming(spread(5, "zone", "DoNotSchedule", {"matchLabels": {"foo": "bar"}})), ZONES_4, [],
                 [{"zone1": 0, "zone2": 0}], id="TestPreFilterState: clean cluster with one spreadConstraint"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO)), ZONES_4,
                 _pods("node-a:foo", "node-a:foo@ns1", "node-b:foo", "node-y:foo@ns2", "node-y:foo"),
                 [{"zone1": 2, "zone2": 1}], id="TestPreFilterState: namespace mismatch doesn't count"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", None)), ZONES_4, SPREAD_2_1_0_3,
                 [{"zone1": 0, "zone2": 0}], id="TestPreFilterState: normal case with null label selector"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO), spread(1, "node", "DoNotSchedule", BAR), labels="foo,bar"),
                 ZONES_4[:2] + ZONES_4[3:],
                 _pods("node-a:foo", "node-a:foo,bar", "node-b:foo", "node-y:foo", "node-y:foo,bar", "node-y:foo",
                       "node-y:foo,bar"),
                 [{"zone1": 3, "zone2": 4}, {"node-a": 1, "node-b": 0, "node-y": 2}],
                 id="TestPreFilterState: different labelSelectors - complex pods"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO), spread(1, "node", "DoNotSchedule", FOO),
                           affinity=required_nodes({"matchExpressions": [expr("node", "NotIn", "node-x")]})),
                 ZONES_4, _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-y:foo", "node-y:foo", "node-y:foo", "node-y:foo"),
                 [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
                 id="TestPreFilterState: two spreadConstraints, and with podAffinity"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", BAR, affinity_policy="Ignore"), nodeSelector={"foo": ""}),
                 _nodes("node-a:node=node-a,foo", "node-b:node=node-b,foo", "node-c:node=node-c,bar"),
                 _pods("node-a:bar", "node-b:bar", "node-b:bar", "node-c:"),
                 [{"node-a": 1, "node-b": 2, "node-c": 0}], id="TestPreFilterState: NodeAffinityPolicy ignored with labelSelectors"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", BAR), nodeSelector={"foo": ""}),
                 _nodes("node-a:node=node-a,foo", "node-b:node=node-b,foo", "node-c:node=node-c,bar"),
                 _pods("node-a:bar", "node-b:bar", "node-b:bar", "node-c:"),
                 [{"node-a": 1, "node-b": 2}], id="TestPreFilterState: NodeAffinityPolicy honored with labelSelectors"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", BAR, taints_policy="Honor")),
                 _nodes("node-a:node=node-a", "node-b:node=node-b", "node-c:node=node-c,bar", tainted=("node-c",)),
                 _pods("node-a:bar", "node-b:bar", "node-b:bar", "node-c:"),
                 [{"node-a": 1, "node-b": 2}], id="TestPreFilterState: NodeTaintsPolicy honored"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", BAR, taints_policy="Honor"),
                           tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
                 _nodes("node-a:node=node-a", "node-b:node=node-b", "node-c:node=node-c,bar", tainted=("node-c",)),
                 _pods("node-a:bar", "node-b:bar", "node-b:bar", "node-c:"),
                 [{"node-a": 1, "node-b": 2, "node-c": 0}],
                 id="TestPreFilterState: NodeTaintsPolicy honored with tolerated taints"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO), spread(1, "node", "DoNotSchedule", FOO),
                           nodeSelector={"foo": ""}),
                 _nodes("node-a:zone=zone1,node=node-a", "node-b:zone=zone1,node=node-b,foo",
                        "node-x:zone=zone2,node=node-x,foo", "node-y:zone=zone2,node=node-y", tainted=("node-b",)),
                 _pods("node-a:foo", "node-a:foo", "node-x:foo", "node-y:foo"),
                 [{"zone1": 0, "zone2": 1}, {"node-b": 0, "node-x": 1}],
                 id="TestPreFilterState: two node inclusion Constraints, zone: honor/ignore, node: honor/ignore"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO, match_label_keys=["bar"]), labels="foo,bar=a"), ZONES_4,
                 _pods("node-a:foo", "node-a:foo,bar=a", "node-b:foo", "node-y:foo,bar=a", "node-y:bar"),
                 [{"zone1": 1, "zone2": 1}],
                 id="TestPreFilterState: matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", {}, match_label_keys=["foo"]), labels="foo=a"), ZONES_4,
                 _pods("node-a:foo=a", "node-a:foo=a", "node-b:foo=a", "node-y:foo=a", "node-y:foo=a"),
                 [{"zone1": 3, "zone2": 2}],
                 id="TestPreFilterState: matchLabelKeys ANDed with LabelSelector when LabelSelector is empty"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", None, match_label_keys=["bar"])), ZONES_4,
                 _pods("node-a:foo=a", "node-a:foo=a", "node-b:foo=a", "node-y:foo=a", "node-y:foo=a"),
                 [{"zone1": 0, "zone2": 0}],
                 id="TestPreFilterState: key in matchLabelKeys is ignored when LabelSelector is nil"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO), spread(1, "zone", "DoNotSchedule", BAR), labels="foo,bar"),
                 ZONES_4, _pods("node-a:foo,bar", "node-b:foo", "node-x:bar", "node-y:foo,bar", "node-y:bar"),
                 [{"zone1": 2, "zone2": 1}, {"zone1": 1, "zone2": 3}],
                 id="TestPreFilterState: two spreadConstraints with the same topologyKey"),
]


@pytest.mark.parametrize(("incoming", "nodes", "pods", "want"), PREFILTER)
def test_prefilter_counts_match_the_upstream_table(incoming: dict[str, Any], nodes: list[Any], pods: list[Any],
                                                   want: list[dict[str, int]]) -> None:
    state, _ = state_for(incoming, nodes, pods)
    assert state.spread.counts == want


def test_default_constraints_apply_only_with_an_owner_selector() -> None:
    """TestPreFilterState "default constraints and a service" / "skip if not specified", with the
    system defaults (both ScheduleAnyway: nothing for the filter, two for the score)."""
    incoming = pod("p", labels={"foo": "bar"})
    nodes = _nodes("node-a:zone=zone1,node=node-a")
    state, _ = state_for(incoming, nodes, default_selector={"matchLabels": {"foo": "bar"}})
    assert state.spread.constraints == ()
    assert [(c.topology_key, c.max_skew) for c in state.spread_score.constraints] == [
        (HOSTNAME, 3), ("topology.kubernetes.io/zone", 5)]
    state, _ = state_for(incoming, nodes)
    assert state.spread_score.constraints == ()


ADD_POD: list[Any] = [
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO)), _nodes("node-a:zone=zone1,node=node-a", "node-b:zone=zone1,node=node-b"),
                 _pods("node-b:foo"), _pods("node-a:foo")[0], "node-a", [{"node-a": 1, "node-b": 1}],
                 id="TestPreFilterStateAddPod: only node a impacts current min match"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO)), _nodes("node-a:zone=zone1,node=node-a", "node-b:zone=zone1,node=node-b"),
                 _pods("node-b:foo"), _pods("node-a:foo@ns1")[0], "node-a", [{"node-a": 0, "node-b": 1}],
                 id="TestPreFilterStateAddPod: add a pod in a different namespace doesn't change topologyKeyToMinPodsMap"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO), spread(1, "node", "DoNotSchedule", BAR), labels="foo,bar"),
                 _nodes("node-a:zone=zone1,node=node-a", "node-b:zone=zone1,node=node-b", "node-x:zone=zone2,node=node-x"),
                 _pods("node-b:bar", "node-x:foo,bar", "node-x:bar"), _pods("node-a:foo,bar")[0], "node-a",
                 [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 1, "node-x": 2}],
                 id="TestPreFilterStateAddPod: Constraints hold different labelSelectors, node a impacts both"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO),
                           affinity=required_nodes({"matchExpressions": [expr("foo", "NotIn", "bar")]})),
                 _nodes("node-a:zone=zone1,node=node-a,foo=bar", "node-b:zone=zone2,node=node-b,foo"),
                 _pods("node-a:foo,zone=zone1", "node-b:foo,zone=zone2"), _pods("node-a:foo,zone=zone1")[0], "node-a",
                 [{"zone2": 1}],
                 id="TestPreFilterStateAddPod: add a pod when scheduling node affinity unmatched pod"),
]


@pytest.mark.parametrize(("incoming", "nodes", "pods", "added", "where", "want"), ADD_POD)
def test_adding_a_pod_updates_the_counts_like_add_pod(incoming: dict[str, Any], nodes: list[Any], pods: list[Any],
                                                      added: dict[str, Any], where: str, want: list[dict[str, int]]) -> None:
    state, cluster = state_for(incoming, nodes, pods)
    bound = cluster.bind(added, where)  # the state follows the snapshot (AddPod)
    assert state.spread.counts == want
    del bound


SINGLE: list[Any] = [
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO)), ZONES_4, [], [OK, OK, OK, OK],
                 id="TestSingleConstraint: no existing pods"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", BAR)), ZONES_4, [], [OK, OK, OK, OK],
                 id="TestSingleConstraint: no existing pods, incoming pod doesn't match itself"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO)), ZONES_4,
                 _pods("node-a:foo@ns1", "node-a:foo@ns2", "node-x:foo", "node-y:foo"), [OK, OK, NO, NO],
                 id="TestSingleConstraint: existing pods in a different namespace do not count"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", None)), ZONES_4, _pods("node-x:foo", "node-y:foo"),
                 [OK, OK, OK, OK], id="TestSingleConstraint: existing pods do not match null selector"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO)), ZONES_4,
                 _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-y:foo", "node-y:foo", "node-y:foo"), [OK, OK, OK, OK],
                 id="TestSingleConstraint: pods spread across zones as 3/3, all nodes fit"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO)),
                 _nodes("node-a:zone=zone1,node=node-a", "node-b:zon=zone1,node=node-b", "node-x:zone=zone2,node=node-x",
                        "node-y:zone=zone2,node=node-y"),
                 _pods("node-a:foo", "node-b:foo", "node-x:foo", "node-y:foo"), [OK, NEVER, NO, NO],
                 id="TestSingleConstraint: pods spread across zones as 1/2 due to absence of label 'zone' on node-b"),
    pytest.param(_incoming(spread(1, "rack", "DoNotSchedule", FOO)), [ZONES_4[0], ZONES_4[2]], [], [NEVER, NEVER],
                 id="TestSingleConstraint: pod cannot be scheduled as all nodes don't have label 'rack'"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO)), ZONES_4, SPREAD_2_1_0_3, [NO, NO, OK, NO],
                 id="TestSingleConstraint: pods spread across nodes as 2/1/0/3, only node-x fits"),
    pytest.param(_incoming(spread(2, "node", "DoNotSchedule", FOO)), ZONES_4, SPREAD_2_1_0_3, [NO, OK, OK, NO],
                 id="TestSingleConstraint: pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO), labels="bar"), ZONES_4, SPREAD_2_1_0_3, [NO, OK, OK, NO],
                 id="TestSingleConstraint: pods spread across nodes as 2/1/0/3, but pod doesn't match itself"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO),
                           affinity=required_nodes({"matchExpressions": [expr("node", "In", "node-a", "node-y")]})),
                 ZONES_4, SPREAD_2_1_0_3, [OK, OK, OK, NO],
                 id="TestSingleConstraint: incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO)),
                 _nodes("node-a:node=node-a", "node-b:node=node-b"), _pods("node-a:foo!", "node-b:foo"), [OK, NO],
                 id="TestSingleConstraint: terminating Pods should be excluded"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO),
                           affinity=required_nodes({"matchExpressions": [expr("node", "NotIn", "node-b")]})),
                 ZONES_4, _pods("node-b:foo", "node-b:foo", "node-y:foo"), [OK, OK, NO, NO],
                 id="TestSingleConstraint: incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits"),
    pytest.param(_incoming(spread(2, "node", "DoNotSchedule", FOO, min_domains=4)), NODE_ABC,
                 _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-b:foo", "node-c:foo"), [NO, NO, OK],
                 id="TestSingleConstraint: 2/2/1, maxSkew 2, fewer domains than minDomains: the third node fits"),
    pytest.param(_incoming(spread(2, "node", "DoNotSchedule", FOO, min_domains=2)), NODE_ABC,
                 _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-b:foo", "node-c:foo"), [OK, OK, OK],
                 id="TestSingleConstraint: 2/2/1, maxSkew 2, more domains than minDomains: all nodes fit"),
    pytest.param(_incoming(spread(2, "zone", "DoNotSchedule", FOO, min_domains=3)), ZONES_4,
                 _pods("node-a:foo", "node-b:foo", "node-y:foo"), [NO, NO, OK, OK],
                 id="TestSingleConstraint: zones 2/1, maxSkew 2, fewer domains than minDomains: node-x and node-y fit"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO), nodeSelector={"foo": ""}), FOO_NODES, ONE_ONE_ZERO_ONE,
                 [NO, NO, OK, OK], id="TestSingleConstraint: NodeAffinityPolicy honored with labelSelectors"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO, affinity_policy="Ignore"), nodeSelector={"foo": ""}),
                 FOO_NODES, ONE_ONE_ZERO_ONE, [NO, NO, OK, NO],
                 id="TestSingleConstraint: NodeAffinityPolicy ignored with labelSelectors"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO, taints_policy="Honor")),
                 _nodes("node-a:node=node-a,foo", "node-b:node=node-b,foo", "node-x:node=node-x,foo", "node-y:node=node-y",
                        tainted=("node-y",)), ONE_ONE_ZERO_ONE, [NO, NO, OK, OK],
                 id="TestSingleConstraint: NodeTaintsPolicy honored"),
    pytest.param(_incoming(spread(1, "node", "DoNotSchedule", FOO)),
                 _nodes("node-a:node=node-a,foo", "node-b:node=node-b,foo", "node-x:node=node-x,foo", "node-y:node=node-y",
                        tainted=("node-y",)), ONE_ONE_ZERO_ONE, [NO, NO, OK, NO],
                 id="TestSingleConstraint: NodeTaintsPolicy ignored"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO), spread(1, "node", "DoNotSchedule", FOO)), ZONES_4,
                 SPREAD_2_1_0_3 + _pods("node-y:foo"), [NO, NO, NO, NO],
                 id="TestMultipleConstraints: two Constraints on zone and node, spreads = [3/4, 2/1/0/4]"),
    pytest.param(_incoming(spread(1, "zone", "DoNotSchedule", FOO), spread(1, "node", "DoNotSchedule", BAR), labels="foo,bar"),
                 ZONES_4, _pods("node-a:foo", "node-y:bar"), [NO, NO, OK, NO],
                 id="TestMultipleConstraints: Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]"),
]


@pytest.mark.parametrize(("incoming", "nodes", "pods", "want"), SINGLE)
def test_filter_codes_match_the_upstream_table(incoming: dict[str, Any], nodes: list[Any], pods: list[Any],
                                               want: list[str]) -> None:
    state, cluster = state_for(incoming, nodes, pods)
    got = [state.spread.filter(cluster.nodes[n["metadata"]["name"]]) for n in nodes]
    assert [OK if f is None else f.code for f in got] == want


def test_a_node_without_the_topology_key_gets_the_missing_label_reason() -> None:
    incoming = _incoming(spread(1, "rack", "DoNotSchedule", FOO))
    state, cluster = state_for(incoming, ZONES_4[:1])
    failure = state.spread.filter(cluster.nodes["node-a"])
    assert failure is not None
    assert failure.reasons == ("node(s) didn't match pod topology spread constraints (missing required label)",)


def test_the_whole_profile_filters_what_the_plugin_alone_let_through() -> None:
    """TestSingleConstraint notes node-b and node-x "in real case, it's false": NodeAffinity rejects them."""
    incoming = _incoming(spread(1, "node", "DoNotSchedule", FOO),
                         affinity=required_nodes({"matchExpressions": [expr("node", "In", "node-a", "node-y")]}))
    nodes = [n | {"status": {"allocatable": {"pods": "110"}}} for n in ZONES_4]
    result = schedule(incoming, Cluster.from_objects(nodes, SPREAD_2_1_0_3))
    assert result.chosen == ("node-a",)
    assert result.message == ""
    assert {n: f.plugin for n, f in result.filtered.items()} == {
        "node-b": "NodeAffinity", "node-x": "NodeAffinity", "node-y": "PodTopologySpread"}


def _host_nodes(*names: str) -> list[dict[str, Any]]:
    return [node(n, {HOSTNAME: n}) for n in names]


def _zone_nodes(*specs: str) -> list[dict[str, Any]]:
    return [node(n, {"zone": z, HOSTNAME: n}) for n, z in (s.split(":") for s in specs)]


ABCD = _host_nodes("node-a", "node-b", "node-c", "node-d")
SPREAD_4_3_2_1 = _pods(*["node-a:foo"] * 4, *["node-b:foo"] * 3, *["node-c:foo"] * 2, "node-d:foo")
SPREAD_4_2_1_3 = _pods(*["node-a:foo"] * 4, *["node-b:foo"] * 2, "node-x:foo", *["node-y:foo"] * 3)
H = HOSTNAME
SCORES: list[Any] = [
    pytest.param(_incoming(spread(1, H, "ScheduleAnyway", FOO)), ABCD[:2], [], 2, None, [100, 100],
                 id="TestPodTopologySpreadScore: one constraint on node, no existing pods"),
    pytest.param(_incoming(spread(1, H, "ScheduleAnyway", FOO)), ABCD[:2], _pods("node-a:foo", "node-a:foo", "node-b:foo"), 1,
                 None, [100], id="TestPodTopologySpreadScore: one constraint on node, only one node is candidate"),
    pytest.param(_incoming(spread(1, H, "ScheduleAnyway", FOO)), ABCD, SPREAD_2_1_0_3_D := _pods(
        "node-a:foo", "node-a:foo", "node-b:foo", "node-d:foo", "node-d:foo", "node-d:foo"), 4, None, [20, 60, 100, 0],
                 id="TestPodTopologySpreadScore: one constraint on node, all 4 nodes are candidates"),
    pytest.param(_incoming(spread(1, H, "ScheduleAnyway", None)), ABCD, SPREAD_2_1_0_3_D, 4, None, [100, 100, 100, 100],
                 id="TestPodTopologySpreadScore: one constraint on node, null selector"),
    pytest.param(_incoming(spread(2, H, "ScheduleAnyway", FOO)), ABCD, SPREAD_2_1_0_3_D, 4, None, [33, 66, 100, 16],
                 id="TestPodTopologySpreadScore: one constraint on node, all 4 nodes are candidates, maxSkew=2"),
    pytest.param(_incoming(spread(3, H, "ScheduleAnyway", FOO)), ABCD, SPREAD_4_3_2_1, 4, None, [44, 66, 77, 100],
                 id="TestPodTopologySpreadScore: one constraint on node, all 4 nodes are candidates, maxSkew=3"),
    pytest.param(_incoming(), ABCD, SPREAD_4_3_2_1, 4, {"matchLabels": {"foo": ""}}, [44, 66, 77, 100],
                 id="TestPodTopologySpreadScore: system defaulting, nodes don't have zone, pods match service"),
    pytest.param(_incoming(spread(1, H, "ScheduleAnyway", FOO)), _host_nodes("node-a", "node-b", "node-x", "node-y"),
                 SPREAD_4_2_1_3, 3, None, [33, 83, 100],
                 id="TestPodTopologySpreadScore: one constraint on node, 3 out of 4 nodes are candidates"),
    pytest.param(_incoming(spread(1, H, "ScheduleAnyway", FOO)),
                 [*_host_nodes("node-a"), node("node-b", {"n": "node-b"}), *_host_nodes("node-x", "node-y")],
                 SPREAD_4_2_1_3, 3, None, [16, 0, 100],
                 id="TestPodTopologySpreadScore: 3 out of 4 nodes are candidates, one node doesn't match topology key"),
    pytest.param(_incoming(spread(1, "zone", "ScheduleAnyway", FOO)),
                 _zone_nodes("node-a:zone1", "node-b:zone1", "node-x:zone2", "node-y:zone2"), SPREAD_4_2_1_3, 3, None,
                 [75, 75, 100], id="TestPodTopologySpreadScore: one constraint on zone, 3 out of 4 nodes are candidates"),
    pytest.param(_incoming(spread(1, "zone", "ScheduleAnyway", FOO), spread(1, H, "ScheduleAnyway", FOO)),
                 _zone_nodes("node-a:zone1", "node-x:zone2", "node-b:zone1", "node-y:zone2"),
                 _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-x:foo", "node-x:foo", *["node-y:foo"] * 4), 2, None,
                 [100, 63], id="TestPodTopologySpreadScore: two Constraints on zone and node, 2 out of 4 nodes are candidates"),
    pytest.param(_incoming(spread(1, "zone", "ScheduleAnyway", FOO), spread(1, "zone", "ScheduleAnyway", BAR), labels="foo,bar"),
                 [node("node-a", {"zone": "zone1"}), node("node-x", {"zone": "zone2"}), node("node-b", {"zone": "zone1"}),
                  node("node-y", {"zone": "zone2"})],
                 _pods("node-a:foo,bar", "node-a:foo", "node-b:foo,bar", "node-y:foo", "node-y:foo,bar", "node-y:foo"), 2,
                 None, [85, 100], id="TestPodTopologySpreadScore: two Constraints on zone, 2 out of 4 nodes are candidates"),
    pytest.param(_incoming(spread(1, "zone", "ScheduleAnyway", FOO), spread(1, H, "ScheduleAnyway", BAR), labels="foo,bar"),
                 _zone_nodes("node-a:zone1", "node-b:zone1", "node-x:zone2", "node-y:zone2"),
                 _pods("node-a:foo", "node-b:foo,bar", "node-y:foo", "node-y:bar"), 4, None, [60, 20, 100, 60],
                 id="TestPodTopologySpreadScore: two Constraints on zone and node, with different labelSelectors"),
    pytest.param(_incoming(spread(1, "zone", "ScheduleAnyway", FOO), spread(1, H, "ScheduleAnyway", BAR), labels="foo,bar"),
                 _zone_nodes("node-a:zone1", "node-b:zone1", "node-x:zone2", "node-y:zone2"),
                 _pods("node-b:bar", "node-x:foo", "node-y:foo,bar"), 4, None, [100, 60, 40, 0],
                 id="TestPodTopologySpreadScore: two Constraints, different labelSelectors, some nodes have 0 pods"),
    pytest.param(_incoming(spread(1, H, "ScheduleAnyway", FOO)), ABCD[:2],
                 _pods("node-a:foo@ns1", "node-a:foo", "node-b:foo", "node-b:foo"), 2, None, [100, 33],
                 id="TestPodTopologySpreadScore: existing pods in a different namespace do not count"),
    pytest.param(_incoming(spread(1, H, "ScheduleAnyway", FOO)), ABCD[:2], _pods("node-a:foo!", "node-b:foo"), 2, None,
                 [100, 0], id="TestPodTopologySpreadScore: terminating Pods should be excluded"),
    pytest.param(_incoming(spread(2, "node", "ScheduleAnyway", FOO, min_domains=10)), NODE_ABC,
                 _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-b:foo", "node-c:foo"), 3, None, [75, 75, 100],
                 id="TestPodTopologySpreadScore: minDomains has no effect when ScheduleAnyway"),
    pytest.param(_incoming(spread(1, "node", "ScheduleAnyway", FOO), nodeSelector={"foo": ""}),
                 _nodes("node-a:node=node-a,foo", "node-b:node=node-b,foo", "node-c:node=node-c"),
                 _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-c:foo"), 3, None, [0, 33, 100],
                 id="TestPodTopologySpreadScore: NodeAffinityPolicy honoed with labelSelectors"),
    pytest.param(_incoming(spread(1, "node", "ScheduleAnyway", FOO, affinity_policy="Ignore"), nodeSelector={"foo": ""}),
                 _nodes("node-a:node=node-a,foo", "node-b:node=node-b,foo", "node-c:node=node-c"),
                 _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-c:foo"), 3, None, [66, 100, 100],
                 id="TestPodTopologySpreadScore: NodeAffinityPolicy ignored with labelSelectors"),
    pytest.param(_incoming(spread(1, "node", "ScheduleAnyway", FOO, taints_policy="Honor")),
                 _nodes("node-a:node=node-a", "node-b:node=node-b", "node-c:node=node-c", tainted=("node-c",)),
                 _pods("node-a:foo", "node-a:foo", "node-b:foo", "node-c:foo"), 3, None, [0, 33, 100],
                 id="TestPodTopologySpreadScore: NodeTaintsPolicy honored"),
    pytest.param(_incoming(spread(1, "zone", "ScheduleAnyway", {}, match_label_keys=["foo"]),
                           spread(1, H, "ScheduleAnyway", {}, match_label_keys=["bar"]), labels="foo,bar"),
                 _zone_nodes("node-a:zone1", "node-b:zone1", "node-c:zone2", "node-d:zone2"),
                 _pods("node-a:foo", "node-b:foo,bar", "node-c:foo", "node-c:bar"), 4, None, [60, 20, 60, 100],
                 id="TestPodTopologySpreadScore: matchLabelKeys ANDed with LabelSelector when LabelSelector is empty"),
]


@pytest.mark.parametrize(("incoming", "nodes", "pods", "candidates", "owner", "want"), SCORES)
def test_scores_match_the_upstream_table(incoming: dict[str, Any], nodes: list[Any], pods: list[Any], candidates: int,
                                         owner: dict[str, Any] | None, want: list[int]) -> None:
    """The first ``candidates`` nodes passed the filters; PreScore still counts pods on all of them."""
    cluster = Cluster.from_objects(nodes, pods)
    names = [n["metadata"]["name"] for n in nodes[:candidates]]
    result = prioritize(incoming, cluster, names, default_selector=owner)
    assert [result.breakdown(n)["PodTopologySpread"].normalized for n in names] == want
