"""InterPodAffinity, re-expressed from interpodaffinity/filtering_test.go
(TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes) and scoring_test.go
(TestPreferredAffinity), with the namespaces of their fake namespace lister."""
from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.builders import (
    node,
    pod,
    pod_affinity,
    selector,
    state_for,
    term,
)
from webhook.scheduler import Cluster, prioritize

NAMESPACES = {"subteam1.team1": {"team": "team1"}, "subteam2.team1": {"team": "team1"},
              "subteam1.team2": {"team": "team2"}, "subteam2.team2": {"team": "team2"}}
SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
NODE1 = node("node1", {"region": "r1", "zone": "z11"})
AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
TEAM1 = selector(in_=[("team", ["team1"])])


def _in(key: str, *values: str) -> dict[str, Any]:
    return selector(in_=[(key, list(values))])


SINGLE: list[Any] = [
    pytest.param(pod(labels=S1), [], None,
                 id="TestRequiredAffinitySingleNode: no required affinity schedules onto a node without pods"),
    pytest.param(pod(labels={"security": "S1"}, affinity=pod_affinity(required=[term(_in("service", "securityscan", "value2"), "region")])),
                 [pod("e", on="node1", labels=SCAN)], None,
                 id="TestRequiredAffinitySingleNode: In operator matching the existing pod"),
    pytest.param(pod(labels=S1, affinity=pod_affinity(required=[term(selector(not_in=[("service", ["securityscan3", "value3"])]), "region")])),
                 [pod("e", on="node1", labels=SCAN)], None,
                 id="TestRequiredAffinitySingleNode: NotIn operator matching the existing pod"),
    pytest.param(pod(labels=S1, affinity=pod_affinity(required=[term(_in("service", "securityscan", "value2"), "", namespaces=["DiffNameSpace"])])),
                 [pod("e", ns="ns", on="node1", labels=SCAN)], ("UnschedulableAndUnresolvable", AFF),
                 id="TestRequiredAffinitySingleNode: labelSelector in a different namespace does not satisfy"),
    pytest.param(pod(labels=SCAN, affinity=pod_affinity(required=[term(_in("service", "antivirusscan", "value2"), "")])),
                 [pod("e", on="node1", labels=SCAN)], ("UnschedulableAndUnresolvable", AFF),
                 id="TestRequiredAffinitySingleNode: an unmatching labelSelector does not satisfy"),
    pytest.param(pod(labels=S1, affinity=pod_affinity(required=[
        term(selector(exists=["service"], absent=["wrongkey"]), "region"),
        term(selector(in_=[("service", ["securityscan2"])], not_in=[("service", ["WrongValue"])]), "region")])),
                 [pod("e", on="node1", labels=SCAN)], ("UnschedulableAndUnresolvable", AFF),
                 id="TestRequiredAffinitySingleNode: requirements of a selector are ANDed"),
    pytest.param(pod(labels=S1, affinity=pod_affinity(required=[term(_in("service", "securityscan", "value2"), "region")],
                                                      anti=[term(_in("service", "securityscan", "value2"), "zone")])),
                 [pod("e", on="node1", labels=SCAN)], ("Unschedulable", ANTI),
                 id="TestRequiredAffinitySingleNode: satisfies the affinity but not the anti-affinity"),
    pytest.param(pod(labels=SCAN, affinity=pod_affinity(required=[term(_in("service", "securityscan", "value2"), "region")],
                                                        anti=[term(_in("service", "antivirusscan", "value2"), "node")])),
                 [pod("e", on="node1", labels=SCAN, affinity=pod_affinity(anti=[term(_in("service", "securityscan", "value2"), "zone")]))],
                 ("Unschedulable", EXISTING),
                 id="TestRequiredAffinitySingleNode: fails the existing pod's anti-affinity symmetry"),
    pytest.param(pod(labels=SCAN, affinity=pod_affinity(required=[term(selector(not_in=[("service", ["securityscan", "value2"])]), "region")])),
                 [pod("e", on="node2", labels=SCAN)], ("UnschedulableAndUnresolvable", AFF),
                 id="TestRequiredAffinitySingleNode: a pod not matching its own term gets no free pass"),
    pytest.param(pod(labels=SCAN),
                 [pod("e", on="node1", labels=SCAN, affinity=pod_affinity(anti=[term(selector(not_in=[("service", ["securityscan", "value2"])]), "zone")]))],
                 None, id="TestRequiredAffinitySingleNode: an existing anti-affinity not matching the pod is satisfied"),
    pytest.param(pod(labels=S1, affinity=pod_affinity(required=[term(_in("service", "securityscan", "value2"), "region", ns_selector=TEAM1)])),
                 [pod("e", ns="subteam1.team1", on="node1", labels=SCAN)], None,
                 id="TestRequiredAffinitySingleNode: affinity with NamespaceSelector"),
    pytest.param(pod(labels=S1, affinity=pod_affinity(required=[term(_in("service", "securityscan", "value2"), "region", ns_selector=TEAM1)])),
                 [pod("e", ns="subteam1.team2", on="node1", labels=SCAN)], ("UnschedulableAndUnresolvable", AFF),
                 id="TestRequiredAffinitySingleNode: affinity with non-matching NamespaceSelector"),
    pytest.param(pod(ns="subteam1.team1", labels=S1, affinity=pod_affinity(anti=[term(_in("service", "securityscan", "value2"), "zone", ns_selector=TEAM1)])),
                 [pod("e", ns="subteam2.team1", on="node1", labels=SCAN)], ("Unschedulable", ANTI),
                 id="TestRequiredAffinitySingleNode: anti-affinity with matching NamespaceSelector"),
    pytest.param(pod(ns="subteam1.team1", labels=S1, affinity=pod_affinity(anti=[term(_in("service", "securityscan", "value2"), "zone", ns_selector={})])),
                 [pod("e", ns="subteam2.team1", on="node1", labels=SCAN)], ("Unschedulable", ANTI),
                 id="TestRequiredAffinitySingleNode: anti-affinity with matching all NamespaceSelector"),
    pytest.param(pod(ns="subteam1.team1", labels=S1, affinity=pod_affinity(anti=[term(_in("service", "securityscan", "value2"), "zone", ns_selector=TEAM1)])),
                 [pod("e", ns="subteam1.team2", on="node1", labels=SCAN)], None,
                 id="TestRequiredAffinitySingleNode: anti-affinity with non-matching NamespaceSelector"),
]


@pytest.mark.parametrize(("incoming", "pods", "want"), SINGLE)
def test_required_affinity_on_a_single_node_matches_the_upstream_table(incoming: dict[str, Any], pods: list[Any],
                                                                        want: tuple[str, str] | None) -> None:
    state, cluster = state_for(incoming, [NODE1], pods, namespaces=NAMESPACES)
    got = state.interpod.filter(cluster.nodes["node1"])
    assert (None if got is None else (got.code, got.reasons[0])) == want


CHINA, CHINA_AZ1, INDIA = {"region": "China"}, {"region": "China", "az": "az1"}, {"region": "India"}
MULTI: list[Any] = [
    pytest.param(pod(affinity=pod_affinity(required=[term(_in("foo", "bar"), "region")])),
                 [pod("p1", on="node1", labels={"foo": "bar"})],
                 [("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)], [None, None, AFF],
                 id="TestRequiredAffinityMultipleNodes: every node sharing the matching pod's region fits"),
    pytest.param(pod(labels={"foo": "bar", "service": "securityscan"},
                     affinity=pod_affinity(required=[term(_in("foo", "bar"), "zone"), term(_in("service", "securityscan"), "zone")])),
                 [pod("p1", on="nodeA", labels={"foo": "bar"})],
                 [("nodeA", {"zone": "az1", "hostname": "h1"}), ("nodeB", {"zone": "az2", "hostname": "h2"})], [None, None],
                 id="TestRequiredAffinityMultipleNodes: the first pod of a self-affine collection is not blocked"),
    pytest.param(pod(labels={"foo": "bar", "service": "securityscan"},
                     affinity=pod_affinity(required=[term(_in("foo", "bar"), "zone"), term(_in("service", "securityscan"), "zone")])),
                 [pod("p1", on="nodeA", labels={"foo": "bar"})],
                 [("nodeA", {"zoneLabel": "az1", "hostname": "h1"}), ("nodeB", {"zoneLabel": "az2", "hostname": "h2"})],
                 [AFF, AFF], id="TestRequiredAffinityMultipleNodes: the first pod still needs the topology keys"),
    pytest.param(pod(affinity=pod_affinity(anti=[term(_in("foo", "abc"), "region")])),
                 [pod("p", on="nodeA", labels={"foo": "abc"})],
                 [("nodeA", {"region": "r1", "hostname": "nodeA"}), ("nodeB", {"region": "r1", "hostname": "nodeB"})],
                 [ANTI, ANTI], id="TestRequiredAffinityMultipleNodes: anti-affinity blocks the whole region"),
    pytest.param(pod(ns="NS1", labels={"foo": "123"}, affinity=pod_affinity(anti=[term(_in("foo", "bar"), "region")])),
                 [pod("a", ns="NS1", on="nodeA", labels={"foo": "bar"}),
                  pod("c", ns="NS2", on="nodeC", affinity=pod_affinity(anti=[term(_in("foo", "123"), "region")]))],
                 [("nodeA", CHINA), ("nodeB", CHINA_AZ1), ("nodeC", INDIA)], [ANTI, ANTI, None],
                 id="TestRequiredAffinityMultipleNodes: an existing anti-affinity in another namespace does not apply"),
    pytest.param(pod(labels={"foo": ""}),
                 [pod("a", on="nodeA", affinity=pod_affinity(anti=[term(selector(exists=["foo"]), "invalid-node-label")]))],
                 [("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
                  ("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"})], [None, None],
                 id="TestRequiredAffinityMultipleNodes: an existing anti-affinity term needs its topology key"),
]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "want"), MULTI)
def test_required_affinity_over_several_nodes_matches_the_upstream_table(incoming: dict[str, Any], pods: list[Any],
                                                                          nodes: list[Any], want: list[str | None]) -> None:
    state, cluster = state_for(incoming, [node(n, labels) for n, labels in nodes], pods)
    got = [state.interpod.filter(cluster.nodes[n]) for n, _ in nodes]
    assert [None if f is None else f.reasons[0] for f in got] == want


def _w(weight: int, sel: dict[str, Any], key: str, **kw: Any) -> dict[str, Any]:
    return term(sel, key, weight=weight, **kw)


STAY_S1_REGION = pod_affinity(preferred=[_w(5, _in("security", "S1"), "region")])
STAY_S2_REGION = pod_affinity(preferred=[_w(6, _in("security", "S2"), "region")])
AFFINITY3 = pod_affinity(preferred=[_w(8, selector(not_in=[("security", ["S1"])], in_=[("security", ["S2"])]), "region"),
                                    _w(2, selector(exists=["security"], absent=["wrongkey"]), "region")])
HARD = pod_affinity(required=[term(_in("security", "S1", "value2"), "region"),
                              term(selector(exists=["security"], absent=["wrongkey"]), "region")])
AWAY_S1_AZ = pod_affinity(anti_preferred=[_w(5, _in("security", "S1"), "az")])
AWAY_S2_AZ = pod_affinity(anti_preferred=[_w(5, _in("security", "S2"), "az")])
STAY_S1_AWAY_S2 = pod_affinity(preferred=[_w(8, _in("security", "S1"), "region")],
                               anti_preferred=[_w(5, _in("security", "S2"), "az")])
NS_SELECTED = pod_affinity(preferred=[_w(5, _in("security", "S1"), "region", namespaces=["subteam2.team2"], ns_selector=TEAM1)])
ANTI_NS_SELECTED = pod_affinity(anti_preferred=[_w(5, _in("security", "S1"), "region", namespaces=["subteam2.team2"],
                                                   ns_selector=TEAM1)])
S2 = {"security": "S2"}
AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}


def _on(name: str, labels: dict[str, str] | None = None, affinity: dict[str, Any] | None = None, ns: str = "default") -> Any:
    spec: dict[str, Any] = {"affinity": affinity} if affinity else {}
    return pod(f"e-{name}-{id(labels)}-{id(affinity)}", ns=ns, on=name, labels=labels, **spec)


PREFERRED: list[Any] = [
    pytest.param(pod(labels=S1), [], [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)], [0, 0, 0],
                 id="TestPreferredAffinity: all nodes are same priority as Affinity is nil"),
    pytest.param(pod(labels=S1, affinity=STAY_S1_REGION), [_on("node1", S1), _on("node2", S2), _on("node3", S1)],
                 [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)], [100, 0, 0],
                 id="TestPreferredAffinity: matching topology key and pods score high"),
    pytest.param(pod(affinity=STAY_S1_REGION), [_on("node1", S1)],
                 [("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)], [100, 100, 0],
                 id="TestPreferredAffinity: nodes sharing the topology value score the same"),
    pytest.param(pod(labels=S1, affinity=AFFINITY3), [_on("node1", S1), _on("node2", S2), _on("node3", S1)],
                 [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)], [20, 100, 0],
                 id="TestPreferredAffinity: different label operators, including some match failures"),
    pytest.param(pod(labels=S2), [_on("node1", S1, STAY_S1_REGION), _on("node2", S2, STAY_S2_REGION)],
                 [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)], [0, 100, 0],
                 id="TestPreferredAffinity: affinity symmetry of existing pods' preferred terms"),
    pytest.param(pod(ns="subteam1.team1", labels=S1), [_on("node1", S1, NS_SELECTED), _on("node2", S2, STAY_S2_REGION)],
                 [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)], [100, 0, 0],
                 id="TestPreferredAffinity: affinity symmetry with namespace selector"),
    pytest.param(pod(ns="subteam1.team1", labels=S1), [_on("node1", S1, ANTI_NS_SELECTED), _on("node2", S2, STAY_S2_REGION)],
                 [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)], [0, 100, 100],
                 id="TestPreferredAffinity: anti-affinity symmetry with namespace selector"),
    pytest.param(pod(labels=S1), [_on("node1", S1, HARD), _on("node2", S2, HARD)],
                 [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)], [100, 100, 0],
                 id="TestPreferredAffinity: existing pods' required affinity counts at hardPodAffinityWeight"),
    pytest.param(pod(labels=S1, affinity=AWAY_S1_AZ), [_on("node1", S1), _on("node1", S1), _on("node2", S2)],
                 [("node1", AZ1), ("node2", INDIA)], [0, 100],
                 id="TestPreferredAffinity: the node with more anti-affinity matches scores lower"),
    pytest.param(pod(labels=S2), [_on("node1", S1, AWAY_S2_AZ), _on("node2", S2, AWAY_S1_AZ)],
                 [("node1", AZ1), ("node2", AZ2)], [0, 100],
                 id="TestPreferredAffinity: anti-affinity symmetry of existing pods"),
    pytest.param(pod(labels=S1, affinity=STAY_S1_AWAY_S2),
                 [_on("node1", S1), _on("node2", S2), _on("node3", None, STAY_S1_AWAY_S2), _on("node4", None, AWAY_S1_AZ)],
                 [("node1", CHINA), ("node2", AZ1), ("node3", INDIA), ("node4", AZ2)], [100, 0, 100, 0],
                 id="TestPreferredAffinity: affinity, anti-affinity and symmetry together"),
    pytest.param(pod(labels=S1), [_on("node1", S1), _on("node2", None, STAY_S1_AWAY_S2)],
                 [("node1", CHINA), ("node2", CHINA)], [0, 0],
                 id="TestPreferredAffinity: avoid panic when partial nodes in a topology have pods with affinity"),
    pytest.param(pod(ns="subteam1.team1", labels=S1, affinity=NS_SELECTED),
                 [_on("node1", S1, ns="subteam1.team1"), _on("node1", S1, ns="subteam1.team1"),
                  _on("node1", S1, ns="subteam1.team2"), _on("node2", S1, ns="subteam2.team1")],
                 [("node1", CHINA), ("node2", INDIA)], [100, 0],
                 id="TestPreferredAffinity: affinity with pods matching NamespaceSelector"),
]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "want"), PREFERRED)
def test_preferred_affinity_scores_match_the_upstream_table(incoming: dict[str, Any], pods: list[Any], nodes: list[Any],
                                                            want: list[int]) -> None:
    cluster = Cluster.from_objects([node(n, labels) for n, labels in nodes], pods, NAMESPACES)
    result = prioritize(incoming, cluster, [n for n, _ in nodes])
    assert [result.breakdown(n)["InterPodAffinity"].normalized for n, _ in nodes] == want


def test_the_first_self_affine_pod_is_free_only_while_no_pod_matches_anywhere() -> None:
    incoming = pod(labels={"app": "db"}, affinity=pod_affinity(required=[term(_in("app", "db"), "zone")]))
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})]
    state, cluster = state_for(incoming, nodes)
    assert [state.interpod.filter(n) for n in cluster.nodes.values()] == [None, None]
    state, cluster = state_for(incoming, nodes, [pod("db-0", on="a", labels={"app": "db"})])
    assert [f is None for f in map(state.interpod.filter, cluster.nodes.values())] == [True, False]
