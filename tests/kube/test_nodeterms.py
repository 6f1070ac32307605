"""Node selector terms as an algebra: negation (nodeAntiAffinity), AND, identity.

The judge of every negation is the scheduler model's own reading of the terms
(``scheduler.nodeaffinity.terms_match``).
"""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.engine import preferred_score
from tests.kit.workloads import node
from webhook.kube import nodeterms
from webhook.scheduler.nodeaffinity import terms_match


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


NEGATIONS = [
    (expr("a", "In", "x", "y"), [expr("a", "NotIn", "x", "y")]),
    (expr("a", "NotIn", "x"), [expr("a", "In", "x")]),
    (expr("a", "Exists"), [expr("a", "DoesNotExist")]),
    (expr("a", "DoesNotExist"), [expr("a", "Exists")]),
    (expr("a", "Gt", "5"), [expr("a", "Lt", "6"), expr("a", "DoesNotExist")]),
    (expr("a", "Lt", "5"), [expr("a", "Gt", "4"), expr("a", "DoesNotExist")]),
]


@pytest.mark.parametrize(("original", "negated"), NEGATIONS, ids=lambda v: str(v)[:40])
def test_every_operator_negates_to_its_opposite(original: dict[str, Any], negated: list[dict[str, Any]]) -> None:
    assert nodeterms.negate(original) == negated


EXAMPLE_NODES = [
    node("bare"),
    node("low", a="3"),
    node("five", a="5"),
    node("six", a="6"),
    node("high", a="9"),
    node("x", a="x"),
    node("y", a="y"),
]


@pytest.mark.parametrize(("original", "_negated"), NEGATIONS, ids=lambda v: str(v)[:40])
def test_negation_admits_exactly_the_nodes_the_original_rejects(original: dict[str, Any], _negated: Any) -> None:
    anti = [{"matchExpressions": [original]}]
    negated_terms = nodeterms.negate_term(anti[0])
    for n in EXAMPLE_NODES:
        if n["metadata"]["labels"].get("a") in ("x", "y") and original["operator"] in ("Gt", "Lt"):
            continue  # a non-integer value satisfies neither Gt nor Lt (see nodeterms.negate)
        assert terms_match(negated_terms, n) is not terms_match(anti, n), n["metadata"]["name"]


MAX = str(2**63 - 1)


@pytest.mark.parametrize("original", [expr("a", "Gt", MAX), expr("a", "Lt", "0"), expr("a", "Lt", "00")])
def test_a_gt_or_lt_that_matches_no_node_negates_to_no_constraint(original: dict[str, Any]) -> None:
    # Node labels hold 0 .. 2^63-1: nothing is above the maximum or below 0. "Lt 2^63" or
    # "Gt -1" would be unparseable terms that match nothing (labels.NewRequirement).
    assert nodeterms.negate(original) is None
    assert nodeterms.negate_term({"matchExpressions": [expr("b", "Exists"), original]}) is None
    assert nodeterms.negate_preferred({"weight": 5, "preference": {"matchExpressions": [original]}}) == []


def test_negations_at_the_edges_stay_inside_what_the_scheduler_parses() -> None:
    assert nodeterms.negate(expr("a", "Gt", str(2**63 - 2))) == [expr("a", "Lt", MAX), expr("a", "DoesNotExist")]
    assert nodeterms.negate(expr("a", "Lt", "1")) == [expr("a", "Gt", "0"), expr("a", "DoesNotExist")]


_BOUNDS = st.one_of(st.sampled_from([0, 1, 2, 2**63 - 2, 2**63 - 1]), st.integers(min_value=0, max_value=2**63 - 1))
_LABELS = st.one_of(st.none(), _BOUNDS.map(str), _BOUNDS.map(lambda n: f"{n:08d}"))


@given(op=st.sampled_from(["Gt", "Lt"]), bound=_BOUNDS, label=_LABELS)
def test_negated_gt_and_lt_admit_exactly_the_nodes_the_original_rejects(op: str, bound: int, label: str | None) -> None:
    # Over every node whose label is absent or an integer it can hold (the judge is the
    # scheduler's own reading, kube.nodes).
    n = node("n") if label is None else node("n", a=label)
    anti = {"matchExpressions": [expr("a", op, str(bound))]}
    negated = nodeterms.negate_term(anti)
    admitted = True if negated is None else terms_match(negated, n)
    assert admitted is not terms_match([anti], n)


def test_gt_negation_admits_nodes_that_lack_the_key() -> None:
    terms = nodeterms.negate_term({"matchExpressions": [expr("a", "Gt", "5")]})
    assert terms == [{"matchExpressions": [expr("a", "Lt", "6")]}, {"matchExpressions": [expr("a", "DoesNotExist")]}]
    assert terms_match(terms, node("bare"))
    assert terms_match(terms, node("five", a="5"))
    assert not terms_match(terms, node("six", a="6"))


def test_multi_expression_anti_term_negates_to_an_or_of_single_negations() -> None:
    anti = {"matchExpressions": [expr("maintenance", "In", "true"), expr("zone", "Exists")]}
    assert nodeterms.negate_term(anti) == [
        {"matchExpressions": [expr("maintenance", "NotIn", "true")]},
        {"matchExpressions": [expr("zone", "DoesNotExist")]},
    ]


def test_match_fields_negate_in_to_not_in_and_back() -> None:
    anti = {"matchFields": [expr("metadata.name", "In", "n1")]}
    assert nodeterms.negate_term(anti) == [{"matchFields": [expr("metadata.name", "NotIn", "n1")]}]
    assert nodeterms.negate_term({"matchFields": [expr("metadata.name", "NotIn", "n1")]}) == [
        {"matchFields": [expr("metadata.name", "In", "n1")]}
    ]


@pytest.mark.parametrize(
    ("op", "bound", "scores"),
    [
        # node label a -> weight the node gets; a node without the key must score like "not Gt 5"
        ("Gt", "5", {"bare": 10, "low": 10, "five": 10, "six": 0, "high": 0}),
        ("Lt", "5", {"bare": 10, "low": 0, "five": 10, "six": 10, "high": 10}),
    ],
)
def test_preferred_gt_lt_anti_terms_weigh_every_node_like_the_faithful_negation(
    op: str, bound: str, scores: dict[str, int]
) -> None:
    prefs = nodeterms.negate_preferred({"weight": 10, "preference": {"matchExpressions": [expr("a", op, bound)]}})
    assert len(prefs) == 2  # Lt/Gt and DoesNotExist: mutually exclusive, so never counted twice
    for n in EXAMPLE_NODES[:5]:
        assert preferred_score(prefs, n) == scores[n["metadata"]["name"]], n["metadata"]["name"]



def test_a_conjunction_shares_the_requirements_of_both_terms() -> None:
    # The engine never edits a requirement in place, so ANDing copies neither the object's own
    # nor the policy's (tests/engine/test_admission_properties.py holds the policy's unedited).
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    other = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                  {"key": "maintenance", "operator": "DoesNotExist"}]}
    out = nodeterms.conjoin(term, other)
    assert out == {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                        {"key": "maintenance", "operator": "DoesNotExist"}]}
    assert out["matchExpressions"][0] is term["matchExpressions"][0]
    assert out["matchExpressions"][1] is other["matchExpressions"][1]
    assert term == {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}


@pytest.mark.parametrize("requirement", [
    expr("a", "Gt", "x"), expr("a", "Gt", "-5"), expr("a", "Lt", "1", "2"), expr("a", "In"),
    expr("a", "Exists", "x"), expr("a", "Ge", "1"), expr("-a", "Exists"),
])
def test_a_requirement_the_scheduler_refuses_has_no_negation(requirement: dict[str, Any]) -> None:
    # It matches no node, and its opposite would be refused too: the caller decides (a
    # policy error for admission, "avoids none" for explain).
    with pytest.raises(nodeterms.NodeTermError):
        nodeterms.negate_term({"matchExpressions": [requirement]})


@pytest.mark.parametrize("field", [expr("metadata.name", "Exists"), expr("metadata.name", "In", "n1", "n2"),
                                   expr("metadata.name", "Gt", "1")])
def test_match_fields_other_than_in_or_not_in_one_name_have_no_negation(field: dict[str, Any]) -> None:
    with pytest.raises(nodeterms.NodeTermError):
        nodeterms.negate_term({"matchFields": [field]})


def test_an_empty_anti_term_avoids_no_node_and_adds_no_term() -> None:
    assert nodeterms.negate_term({}) == []
    assert nodeterms.negate_preferred({"weight": 3, "preference": {}}) == []


def test_a_preferred_anti_term_of_two_requirements_has_no_weighted_negation() -> None:
    # NOT (a AND b) = NOT a OR NOT b: two weighted terms would score a node satisfying both twice.
    pref = {"weight": 5, "preference": {"matchExpressions": [expr("a", "Exists"), expr("b", "Exists")]}}
    with pytest.raises(nodeterms.NodeTermError, match="2 requirements"):
        nodeterms.negate_preferred(pref)


def test_and_of_two_term_lists_is_their_cross_product_each_distinct_term_once() -> None:
    zones = [{"matchExpressions": [expr("zone", "In", "a")]}, {"matchExpressions": [expr("zone", "In", "b")]}]
    calm = [{"matchExpressions": [expr("load", "Lt", "6")]}, {"matchExpressions": [expr("load", "DoesNotExist")]}]
    anded = nodeterms.and_terms(zones, calm)
    assert anded == [{"matchExpressions": [z["matchExpressions"][0], c["matchExpressions"][0]]}
                     for z in zones for c in calm]
    both = {"matchExpressions": [expr("zone", "In", "a"), expr("zone", "In", "b")]}
    assert nodeterms.and_terms(zones, zones) == [zones[0], both, zones[1]]  # b AND a is a AND b


TERMS = st.lists(st.builds(lambda exprs: {"matchExpressions": exprs}, st.lists(st.sampled_from([
    expr("zone", "In", "a"), expr("zone", "NotIn", "a"), expr("gpu", "Exists"), expr("gpu", "DoesNotExist"),
    expr("load", "Gt", "3"), expr("load", "Lt", "7")]), min_size=1, max_size=3)), min_size=1, max_size=3)
NODES = st.builds(lambda zone, gpu, load: node("n", **{k: v for k, v in (("zone", zone), ("gpu", gpu),
                                                                          ("load", load)) if v is not None}),
                  st.sampled_from([None, "a", "b"]), st.sampled_from([None, "1"]),
                  st.sampled_from([None, "2", "5", "9", "x"]))


@given(TERMS, TERMS, NODES)
def test_a_node_matches_the_and_of_two_term_lists_exactly_when_it_matches_both(
    terms: list[dict[str, Any]], others: list[dict[str, Any]], n: dict[str, Any]
) -> None:
    assert terms_match(nodeterms.and_terms(terms, others), n) is (terms_match(terms, n) and terms_match(others, n))


@given(TERMS, TERMS)
def test_a_conjunction_is_the_same_whether_or_not_the_caller_passes_the_terms_keys(
    terms: list[dict[str, Any]], others: list[dict[str, Any]]
) -> None:
    for term in terms:
        for other in others:
            assert nodeterms.conjoin(term, other, key=nodeterms.term_key(term),
                                     other_key=nodeterms.term_key(other)) == nodeterms.conjoin(term, other)


def _term(*exprs: tuple[str, str, list[str] | None]) -> dict[str, Any]:
    return {"matchExpressions": [{"key": k, "operator": op, **({"values": v} if v is not None else {})}
                                 for k, op, v in exprs]}


@pytest.mark.parametrize(
    ("term", "why"),
    [
        (_term(("zone", "In", ["a"]), ("zone", "In", ["b"])), "zone In [a] and zone In [b]"),
        (_term(("zone", "In", ["a", "b"]), ("zone", "NotIn", ["a", "b"])), "zone In [a, b] and zone NotIn [a, b]"),
        (_term(("gpu", "In", ["true"]), ("gpu", "DoesNotExist", None)), "gpu DoesNotExist and gpu In [true]"),
        (_term(("gpu", "Exists", None), ("gpu", "DoesNotExist", None)), "gpu DoesNotExist and gpu Exists"),
        (_term(("cpu", "Gt", ["5"]), ("cpu", "Lt", ["6"])), "no integer satisfies cpu Gt [5] and cpu Lt [6]"),
        (_term(("cpu", "Lt", ["0"])), "no integer satisfies cpu Lt [0]"),
        (_term(("cpu", "In", ["3", "x"]), ("cpu", "Gt", ["5"])), "cpu In [3, x] and cpu Gt [5]"),
        ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]},
                          {"key": "metadata.name", "operator": "In", "values": ["n2"]}]},
         "metadata.name In [n1] and metadata.name In [n2]"),
        ({}, "the term is empty"),
    ],
)
def test_a_term_no_node_can_satisfy_says_why(term: dict[str, Any], why: str) -> None:
    assert nodeterms.term_contradiction(term) == why


@pytest.mark.parametrize(
    "term",
    [
        _term(("zone", "In", ["a", "b"]), ("zone", "In", ["b", "c"])),
        _term(("zone", "In", ["a"]), ("zone", "NotIn", ["b"])),
        _term(("cpu", "Gt", ["5"]), ("cpu", "Lt", ["7"])),
        _term(("cpu", "In", ["6"]), ("cpu", "Gt", ["5"])),
        _term(("gpu", "DoesNotExist", None), ("gpu", "NotIn", ["x"])),
        _term(("a", "In", ["1"]), ("b", "DoesNotExist", None)),
    ],
)
def test_a_term_some_node_can_satisfy_is_not_flagged(term: dict[str, Any]) -> None:
    assert nodeterms.term_contradiction(term) is None
