"""Label selectors evaluated as ``labels.Requirement.Matches`` does (apimachinery/pkg/labels)."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.kube import selectors

TIER_WEB = {"tier": "web"}
DB_ZONE_A = {"tier": "db", "zone": "a"}

TABLE: list[tuple[dict[str, Any] | None, dict[str, Any], bool]] = [
    ({}, {}, True),  # an empty selector selects everything
    (None, {"tier": "web"}, False),  # a null one (a pod affinity term without labelSelector) nothing
    ({"matchLabels": {"tier": "web"}}, TIER_WEB, True),
    ({"matchLabels": {"tier": "web"}}, {}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "db"]}]}, DB_ZONE_A, True),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}, {}, False),
    # NotIn and DoesNotExist hold for a label set without the key
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]}, {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]}, TIER_WEB, False),
    ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, DB_ZONE_A, True),
    ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, {"zone": ""}, True),  # present, empty value
    ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, {"zone": ""}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, TIER_WEB, True),
    # matchLabels and matchExpressions are ANDed
    ({"matchLabels": {"tier": "db"}, "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
     DB_ZONE_A, False),
    # label values are strings: a number written in YAML compares as its text
    ({"matchLabels": {"rank": "1"}}, {"rank": 1}, True),
    # an operator label selectors do not have never selects
    ({"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]}, {}, False),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), TABLE)
def test_selectors_follow_the_requirement_semantics_of_kubernetes(
    selector: dict[str, Any] | None, labels: dict[str, Any], expected: bool
) -> None:
    assert selectors.matches(selector, labels) is expected


@pytest.mark.parametrize(("selector", "labels", "expected"), [row for row in TABLE if row[0] is not None])
def test_a_mismatch_is_explained_exactly_when_the_selector_fails(
    selector: dict[str, Any], labels: dict[str, Any], expected: bool
) -> None:
    assert (selectors.mismatch(selector, labels) is None) is expected


def test_the_explanation_names_the_requirement_and_what_was_found() -> None:
    why = selectors.mismatch({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]}, TIER_WEB)
    assert why == "label tier In [db] does not hold (found tier=web)"
    assert selectors.mismatch({"matchLabels": {"zone": "a"}}, {}) == "label zone=a required, found no such label"


def test_match_labels_and_the_same_requirement_written_as_in_are_one_selector() -> None:
    assert selectors.canonical({"matchLabels": {"app": "web"}}) == selectors.canonical(
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}
    )
    assert selectors.canonical({"matchLabels": {"app": "web"}}) != selectors.canonical(
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}
    )
    assert selectors.canonical(None) is None and selectors.canonical({}) == frozenset()


# Requirement.Matches, one row per case of apimachinery/pkg/labels/selector.go: the value the
# key has (None: absent), the requirement, and whether it holds. Label selectors and node
# selector requirements both read this one rule.
HOLDS: list[tuple[str | None, str, list[str], bool]] = [
    ("web", "In", ["web", "db"], True),
    (None, "In", ["web"], False),
    ("api", "NotIn", ["web"], True),
    (None, "NotIn", ["web"], True),  # a missing key satisfies NotIn, for pods and nodes alike
    ("web", "NotIn", ["web"], False),
    ("", "Exists", [], True),
    (None, "DoesNotExist", [], True),
    ("6", "Gt", ["5"], True),
    ("5", "Gt", ["5"], False),
    (None, "Gt", ["5"], False),  # Gt and Lt need the key
    ("six", "Gt", ["5"], False),  # and an integer value
    ("4", "Lt", ["5"], True),
    ("-1", "Lt", ["0"], True),  # the node's side is read with ParseInt, which takes a sign
    ("1", "Ge", ["0"], False),  # an operator Kubernetes does not have holds nowhere
]


@pytest.mark.parametrize(("value", "op", "values", "expected"), HOLDS)
def test_one_requirement_holds_as_requirement_matches_says(value: str | None, op: str, values: list[str],
                                                           expected: bool) -> None:
    bound = int(values[0]) if op in ("Gt", "Lt") else None
    assert selectors.holds(op, value, set(values), bound) is expected


@pytest.mark.parametrize(("key", "op", "values", "node", "valid"), [
    ("tier", "In", ["web"], False, True),
    ("tier", "Gt", ["5"], False, False),  # LabelSelectorAsSelector has no Gt
    ("tier", "Gt", ["5"], True, True),  # a NodeSelectorRequirement does
    ("tier", "Gt", ["5", "6"], True, False),  # with exactly one value
    ("tier", "Gt", ["-5"], True, False),  # that is also a label value: no sign
    ("tier", "In", [], True, False),
    ("tier", "Exists", ["x"], False, False),
    ("-bad", "Exists", [], False, False),
])
def test_a_requirement_is_refused_where_labels_new_requirement_refuses_it(key: str, op: str, values: list[str],
                                                                          node: bool, valid: bool) -> None:
    assert (selectors.requirement_error(key, op, values, node=node) is None) is valid


@pytest.mark.parametrize(("op", "values", "valid"), [
    ("In", ["n1"], True), ("NotIn", ["n1"], True), ("In", ["n1", "n2"], False), ("Exists", [], False),
    ("Gt", ["1"], False),
])
def test_a_match_fields_requirement_is_in_or_not_in_with_one_name(op: str, values: list[str], valid: bool) -> None:
    assert (selectors.field_requirement_error(op, values) is None) is valid


def _req(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


@pytest.mark.parametrize(("requirements", "why"), [
    ([_req("t", "In", "a"), _req("t", "In", "b")], "t In [a] and t In [b]"),
    ([_req("t", "Exists"), _req("t", "DoesNotExist")], "t DoesNotExist and t Exists"),
    ([_req("t", "In", "a"), _req("t", "NotIn", "a")], "t In [a] and t NotIn [a]"),
    ([_req("n", "Gt", "5"), _req("n", "Lt", "6")], "no integer satisfies n Gt [5] and n Lt [6]"),
    ([_req("t", "In", "a", "b"), _req("t", "In", "b", "c")], None),
    ([_req("t", "NotIn", "a"), _req("t", "DoesNotExist")], None),  # a label set without t
    ([_req("t", "In", "a"), _req("u", "DoesNotExist")], None),  # keys are independent
])
def test_requirements_conflict_only_when_no_label_set_satisfies_them_all(requirements: list[dict[str, Any]],
                                                                        why: str | None) -> None:
    assert selectors.conflict(requirements) == why


REQ_KEYS = st.sampled_from(["t", "n"])
REQ_VALUES = st.sampled_from(["a", "b", "0", "5", "6"])
REQUIREMENTS = st.lists(st.one_of(
    st.builds(lambda k, op, vs: _req(k, op, *sorted(set(vs))), REQ_KEYS, st.sampled_from(["In", "NotIn"]),
              st.lists(REQ_VALUES, min_size=1, max_size=2)),
    st.builds(lambda k, op: _req(k, op), REQ_KEYS, st.sampled_from(["Exists", "DoesNotExist"])),
    st.builds(lambda k, op, v: _req(k, op, v), REQ_KEYS, st.sampled_from(["Gt", "Lt"]), REQ_VALUES.filter(str.isdigit)),
), max_size=4)
LABEL_SETS = st.dictionaries(REQ_KEYS, st.sampled_from(["a", "b", "c", "0", "4", "5", "6", "7"]), max_size=2)


@given(REQUIREMENTS, LABEL_SETS)
def test_a_conflict_is_never_reported_for_requirements_some_label_set_satisfies(
        requirements: list[dict[str, Any]], labels: dict[str, str]) -> None:
    def bound(req: dict[str, Any]) -> int | None:
        return int(req["values"][0]) if req["operator"] in ("Gt", "Lt") else None

    if all(selectors.holds(r["operator"], labels.get(r["key"]), set(r.get("values") or ()), bound(r))
           for r in requirements):
        assert selectors.conflict(requirements) is None


@pytest.mark.parametrize(("requirement", "why"), [
    (_req("t", "In", "a"), None),
    (_req("t", "NotIn", "a"), None),
    (_req("t", "Exists"), None),
    (_req("t", "DoesNotExist"), None),
    (_req("t", "In"), "t In"),  # In with no value left
    (_req("n", "Gt", "x"), "n Gt [x] is not an integer the scheduler can read"),
    (_req("n", "Gt", "9223372036854775807"), "no integer satisfies n Gt [9223372036854775807]"),
    (_req("n", "Lt", "0"), "no integer satisfies n Lt [0]"),
    (_req("n", "Gt", "5"), None),
])
def test_a_requirement_alone_on_its_key_conflicts_only_with_itself(requirement: dict[str, Any], why: str | None) -> None:
    assert selectors.conflict([requirement, _req("other", "Exists")]) == why


ODD_VALUES = st.one_of(st.none(), st.lists(st.sampled_from(["a", "0", "5", 7]), max_size=2), st.just("ab"), st.just({}))


@given(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Near"]), ODD_VALUES)
def test_the_shortcut_for_a_lone_requirement_says_what_the_whole_rule_says(op: str, values: Any) -> None:
    requirement = {"key": "t", "operator": op, "values": values}
    try:
        expected = selectors._key_conflict("t", [requirement])
    except (TypeError, IndexError) as exc:  # what the whole rule raises, the shortcut must raise too
        with pytest.raises(type(exc)):
            selectors.conflict([requirement])
        return
    assert selectors.conflict([requirement]) == expected
