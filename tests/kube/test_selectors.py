"""Label selectors evaluated as ``labels.Requirement.Matches`` does (apimachinery/pkg/labels)."""
from __future__ import annotations

from typing import Any

import pytest

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
