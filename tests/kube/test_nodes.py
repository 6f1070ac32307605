"""The cluster view and the scheduler predicates the engine counts nodes with.

The matching itself is the scheduler model's (scheduler); these tests pin it down as
the engine's rollout rules and the test kit read it: Node dicts in, yes or no out.
"""
from __future__ import annotations

from typing import Any

import pytest

from tests.kit.workloads import node
from webhook.cluster.view import ClusterView, StaticClusterView
from webhook.engine import rollout
from webhook.kube.nodes import label_int, tolerates
from webhook.scheduler.filters import NodeEligibility
from webhook.scheduler.nodeaffinity import terms_match


def requirement_matches(req: dict[str, Any], label: str | None) -> bool:
    """One requirement, in a term of its own, against a node with (or without) label ``k``."""
    return terms_match([{"matchExpressions": [req]}], node("n1") if label is None else node("n1", k=label))


def term_matches(term: dict[str, Any], n: dict[str, Any]) -> bool:
    return terms_match([term], n)


def node_eligible(pod_spec: dict[str, Any], n: dict[str, Any]) -> bool:
    return NodeEligibility(pod_spec).admits(n)


def test_a_static_view_is_a_cluster_view() -> None:
    assert isinstance(StaticClusterView(), ClusterView)


def test_a_view_can_be_built_from_a_dump_of_kubernetes_objects() -> None:
    objects = [
        {"kind": "List", "items": [node("a", zone="1"), node("b")]},
        {"kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}},
        {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        {"kind": "ConfigMap", "metadata": {"name": "ignored"}},
    ]
    view = StaticClusterView.from_objects(objects, match_label_keys=True)
    assert [n["metadata"]["name"] for n in view.nodes()] == ["a", "b"]
    assert view.namespace_labels("prod") == {"env": "prod"}
    assert view.namespace_labels("dev") is None
    assert (view.priority_class("high") or {}).get("value") == 1000
    assert view.priority_class("low") is None
    assert view.supports_match_label_keys() is True


@pytest.mark.parametrize(
    ("op", "values", "label", "matches"),
    [
        ("In", ["a"], "a", True),
        ("In", ["a"], "b", False),
        ("In", ["a"], None, False),
        ("NotIn", ["a"], "b", True),
        ("NotIn", ["a"], None, True),  # a node without the key is "not in"
        ("NotIn", ["a"], "a", False),
        ("Exists", [], "x", True),
        ("Exists", [], None, False),
        ("DoesNotExist", [], None, True),
        ("DoesNotExist", [], "x", False),
        ("Gt", ["5"], "6", True),
        ("Gt", ["5"], "5", False),
        ("Gt", ["5"], None, False),
        ("Gt", ["5"], "big", False),
        ("Lt", ["5"], "4", True),
        ("Lt", ["5"], "-1", True),
        ("Lt", ["5"], None, False),
    ],
)
def test_requirements_match_like_the_scheduler(op: str, values: list[str], label: str | None, matches: bool) -> None:
    assert requirement_matches({"key": "k", "operator": op, "values": values}, label) is matches


def test_an_empty_term_matches_no_node_and_terms_are_ored() -> None:
    n = node("n1", zone="a")
    assert term_matches({}, n) is False
    assert terms_match([{}, {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}], n)
    assert terms_match(None, n)


def test_match_fields_select_on_the_node_name() -> None:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    assert term_matches(term, node("n1"))
    assert not term_matches(term, node("n2"))


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        ({"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}, {"key": "a", "value": "b", "effect": "NoSchedule"}, True),
        ({"key": "a", "value": "b"}, {"key": "a", "value": "b", "effect": "NoExecute"}, True),
        ({"key": "a", "value": "c"}, {"key": "a", "value": "b", "effect": "NoSchedule"}, False),
        ({"key": "a", "operator": "Exists"}, {"key": "a", "value": "z", "effect": "NoSchedule"}, True),
        ({"operator": "Exists"}, {"key": "any", "effect": "NoExecute"}, True),
        ({"key": "a", "operator": "Exists", "effect": "NoExecute"}, {"key": "a", "effect": "NoSchedule"}, False),
    ],
)
def test_tolerations_tolerate_taints_like_the_api(toleration: dict[str, Any], taint: dict[str, Any], tolerated: bool) -> None:
    assert tolerates(toleration, taint) is tolerated


def test_prefer_no_schedule_taints_do_not_make_a_node_ineligible() -> None:
    n = {**node("n1"), "spec": {"taints": [{"key": "a", "effect": "PreferNoSchedule"}]}}
    assert node_eligible({}, n)


def test_a_cordoned_node_needs_the_unschedulable_toleration() -> None:
    n = {**node("n1"), "spec": {"unschedulable": True}}
    assert not node_eligible({}, n)
    assert node_eligible({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}, n)


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("007", 7), ("42", 42), ("9223372036854775807", 2**63 - 1),
     ("9223372036854775808", None), ("1_0", None), ("+5", None), ("-1", None), (" 5", None), ("5 ", None),
     ("", None), ("ten", None), ("1e3", None)],
)
def test_gt_and_lt_read_integers_as_strconv_parseint_reads_a_label_value(text: str, value: int | None) -> None:
    # labels.NewRequirement / Requirement.Matches: ParseInt(v, 10, 64) of a valid label value.
    assert label_int(text) == value


@pytest.mark.parametrize("bad", ["1_0", "+5", "9223372036854775808"])
def test_a_requirement_value_the_scheduler_cannot_parse_matches_no_node(bad: str) -> None:
    n = node(gpus="12")
    assert not requirement_matches({"key": "gpus", "operator": "Gt", "values": [bad]}, "12")
    assert not requirement_matches({"key": "gpus", "operator": "Lt", "values": [bad]}, "12")
    assert not term_matches({"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": [bad]}]}, n)


def test_a_node_label_that_is_not_an_int64_satisfies_neither_gt_nor_lt() -> None:
    for label in ("12a", "99999999999999999999", ""):
        assert not requirement_matches({"key": "k", "operator": "Gt", "values": ["0"]}, label)
        assert not requirement_matches({"key": "k", "operator": "Lt", "values": ["9"]}, label)



@pytest.mark.parametrize(
    "req",
    [
        {"key": "zone", "operator": "In", "values": ["a b"]},  # not a label value
        {"key": "bad key", "operator": "Exists"},  # not a qualified name
        {"key": "zone", "operator": "Exists", "values": ["a"]},  # Exists takes no values
        {"key": "zone", "operator": "Near", "values": ["a"]},  # no such operator
    ],
)
def test_a_requirement_labels_new_requirement_rejects_makes_its_term_match_nothing(req: dict[str, Any]) -> None:
    # nodeaffinity.LazyErrorNodeSelector: a term that fails to parse never matches, and the
    # other terms still do (GetRequiredNodeAffinity).
    n = node("n1", **{"zone": "a", "bad key": "x"})
    assert not terms_match([{"matchExpressions": [req]}], n)
    assert terms_match([{"matchExpressions": [req]}, {"matchExpressions": [{"key": "zone", "operator": "In",
                                                                           "values": ["a"]}]}], n)


def test_the_engine_counts_no_domain_for_a_term_the_scheduler_cannot_parse() -> None:
    nodes = [node(f"n{i}", **{"kubernetes.io/hostname": f"n{i}", "zone": "a"}) for i in range(3)]
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a b"]}]}]}}}}
    assert rollout.eligible_domains(spec, nodes, "kubernetes.io/hostname") == 0
