"""NodeAffinity, re-expressed from nodeaffinity/node_affinity_test.go (TestNodeAffinity,
TestNodeAffinityPriority), plus the per-term explanation the scheduler only logs."""
from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.builders import expr, node, pod, required_nodes, state_for
from webhook.scheduler import Cluster, Options, prioritize, schedule
from webhook.scheduler.filters import node_affinity
from webhook.scheduler.nodeaffinity import prefilter_node_names


def _fields(*names: str) -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]} for n in names]}


def _exprs(*items: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(items)}


FILTER_CASES: list[Any] = [
    pytest.param({"nodeSelector": {"foo": "bar"}}, {}, "node1", False, id="TestNodeAffinity: missing labels"),
    pytest.param({"nodeSelector": {"foo": "bar"}}, {"foo": "bar"}, "node1", True, id="TestNodeAffinity: same labels"),
    pytest.param({"nodeSelector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, "node1", True,
                 id="TestNodeAffinity: node labels are superset"),
    pytest.param({"nodeSelector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, "node1", False,
                 id="TestNodeAffinity: node labels are subset"),
    pytest.param({"affinity": required_nodes(_exprs(expr("foo", "In", "bar", "value2")))}, {"foo": "bar"}, "node1", True,
                 id="TestNodeAffinity: matchExpressions In matches the node"),
    pytest.param({"affinity": required_nodes(_exprs(expr("kernel-version", "Gt", "0204")))}, {"kernel-version": "0206"},
                 "node1", True, id="TestNodeAffinity: matchExpressions Gt matches the node"),
    pytest.param({"affinity": required_nodes(_exprs(expr("mem-type", "NotIn", "DDR", "DDR2")))}, {"mem-type": "DDR3"},
                 "node1", True, id="TestNodeAffinity: matchExpressions NotIn matches the node"),
    pytest.param({"affinity": required_nodes(_exprs(expr("GPU", "Exists")))}, {"GPU": "NVIDIA-GRID-K1"}, "node1", True,
                 id="TestNodeAffinity: matchExpressions Exists matches the node"),
    pytest.param({"affinity": required_nodes(_exprs(expr("foo", "In", "value1", "value2")))}, {"foo": "bar"}, "node1",
                 False, id="TestNodeAffinity: affinity not matching the node's labels"),
    pytest.param({"affinity": required_nodes(_exprs())}, {"foo": "bar"}, "node1", False,
                 id="TestNodeAffinity: empty MatchExpressions match no objects"),
    pytest.param({"affinity": required_nodes(_exprs(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")))},
                 {"GPU": "NVIDIA-GRID-K1"}, "node1", False, id="TestNodeAffinity: ANDed matchExpressions that don't match"),
    pytest.param({"affinity": required_nodes(_exprs(expr("foo", "In", "bar", "value2")),
                                             _exprs(expr("diffkey", "In", "wrong", "value2")))},
                 {"foo": "bar"}, "node1", True, id="TestNodeAffinity: NodeSelectorTerms are ORed"),
    pytest.param({"nodeSelector": {"foo": "bar"}, "affinity": required_nodes(_exprs(expr("foo", "Exists")))},
                 {"foo": "barrrrrr"}, "node1", False,
                 id="TestNodeAffinity: affinity matches but the nodeSelector does not"),
    pytest.param({"affinity": required_nodes(_exprs(expr("foo", "NotIn", "invalid value: ___@#$%^")))}, {"foo": "bar"},
                 "node1", False, id="TestNodeAffinity: an invalid value in a term makes it match no node"),
    pytest.param({"affinity": required_nodes(_fields("node1"))}, {}, "node2", False,
                 id="TestNodeAffinity: matchFields In that does not match the node"),
    pytest.param({"affinity": required_nodes(_fields("node1", "node2"), _exprs(expr("foo", "In", "bar")))}, {"foo": "bar"},
                 "node2", True, id="TestNodeAffinity: two terms, matchFields fails but matchExpressions matches"),
    pytest.param({"affinity": required_nodes({**_fields("node1"), **_exprs(expr("foo", "In", "bar"))})}, {"foo": "bar"},
                 "node2", False, id="TestNodeAffinity: one term, matchFields fails though matchExpressions matches"),
]


@pytest.mark.parametrize(("spec", "labels", "name", "fits"), FILTER_CASES)
def test_the_node_affinity_filter_matches_the_upstream_table(spec: dict[str, Any], labels: dict[str, str], name: str,
                                                             fits: bool) -> None:
    state, cluster = state_for(pod(**spec), [node(name, labels)])
    got = node_affinity(state.plan, cluster.nodes[name], Options())
    assert (got is None) == fits
    if got is not None:
        assert got.reasons == ("node(s) didn't match Pod's node affinity/selector",)
        assert got.code == "UnschedulableAndUnresolvable"


@pytest.mark.parametrize(("terms", "want"), [
    pytest.param([_fields("node1")], frozenset({"node1"}), id="TestNodeAffinity: matchFields In yields a PreFilterResult"),
    pytest.param([_fields("node1"), _fields("node2")], frozenset({"node1", "node2"}),
                 id="TestNodeAffinity: two terms of node.Name affinity are unioned"),
    pytest.param([_fields("node1", "node2")], frozenset(), id="TestNodeAffinity: two conflicting match field requirements"),
    pytest.param([_fields("node1", "node2"), _exprs(expr("foo", "In", "bar"))], None,
                 id="TestNodeAffinity: a term without names lets every node through"),
])
def test_the_prefilter_result_is_the_union_of_each_terms_names(terms: list[Any], want: frozenset[str] | None) -> None:
    assert prefilter_node_names({"affinity": required_nodes(*terms)}) == want


def test_conflicting_name_terms_reject_the_pod_at_prefilter_with_the_schedulers_message() -> None:
    cluster = Cluster.from_objects([node("node1"), node("node2")])
    result = schedule(pod(affinity=required_nodes(_fields("node1", "node2"))), cluster)
    assert result.message == ("0/2 nodes are available: pod affinity terms conflict. preemption: "
                              "0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


def _preferred(*items: tuple[int, list[dict[str, Any]]]) -> dict[str, Any]:
    prefs = [{"weight": w, "preference": {"matchExpressions": e}} for w, e in items]
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": prefs}}


AFFINITY1 = _preferred((2, [expr("foo", "In", "bar")]))
AFFINITY2 = _preferred((2, [expr("foo", "In", "bar")]), (4, [expr("key", "In", "value")]),
                       (5, [expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1")]))
LABEL1, LABEL2, LABEL3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
LABEL4, LABEL5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}


@pytest.mark.parametrize(("affinity", "nodes", "want"), [
    pytest.param(None, {"node1": LABEL1, "node2": LABEL2, "node3": LABEL3}, {"node1": 0, "node2": 0, "node3": 0},
                 id="TestNodeAffinityPriority: all nodes are same priority as NodeAffinity is nil"),
    pytest.param(AFFINITY1, {"node1": LABEL4, "node2": LABEL2, "node3": LABEL3}, {"node1": 0, "node2": 0, "node3": 0},
                 id="TestNodeAffinityPriority: no node matches the preferred terms"),
    pytest.param(AFFINITY1, {"node1": LABEL1, "node2": LABEL2, "node3": LABEL3}, {"node1": 100, "node2": 0, "node3": 0},
                 id="TestNodeAffinityPriority: only node1 matches the preferred terms"),
    pytest.param(AFFINITY2, {"node1": LABEL1, "node5": LABEL5, "node2": LABEL2}, {"node1": 18, "node5": 100, "node2": 36},
                 id="TestNodeAffinityPriority: all nodes match with different priorities"),
])
def test_the_node_affinity_score_matches_the_upstream_table(affinity: Any, nodes: dict[str, Any], want: dict[str, int]) -> None:
    cluster = Cluster.from_objects([node(n, labels) for n, labels in nodes.items()])
    result = prioritize(pod(**({"affinity": affinity} if affinity else {})), cluster, list(nodes))
    assert {n: result.breakdown(n)["NodeAffinity"].normalized for n in nodes} == want


def test_a_preferred_term_that_cannot_parse_is_an_error_as_prescore_returns_one() -> None:
    bad = _preferred((2, [expr("invalid key", "In", "bar")]))
    with pytest.raises(ValueError, match="invalid key"):
        prioritize(pod(affinity=bad), Cluster.from_objects([node("node1")]), ["node1"])


def test_the_failure_names_the_selector_entry_and_the_first_failed_expression_of_every_term() -> None:
    incoming = pod(nodeSelector={"disk": "ssd"},
                   affinity=required_nodes(_exprs(expr("zone", "In", "a"), expr("gpu", "Exists")),
                                           _exprs(expr("kernel", "Gt", "5")), {}))
    state, cluster = state_for(incoming, [node("n1", {"disk": "hdd", "zone": "a", "kernel": "4"})])
    got = node_affinity(state.plan, cluster.nodes["n1"], Options())
    assert got is not None
    assert got.details == (
        "nodeSelector disk=ssd (node has disk=hdd)",
        "nodeSelectorTerms[0].matchExpressions[1] gpu Exists (node has no label gpu)",
        "nodeSelectorTerms[1].matchExpressions[0] kernel Gt [5] (node has kernel=4)",
        "nodeSelectorTerms[2] is empty and matches no node",
    )
