"""Each expectation of a case, passing and failing, against a hand-made outcome."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from webhook.suites.checks import check, mismatch, project, resolve, same, yaml_diff
from webhook.suites.model import Expect

RESULT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "annotations": {"placement.novasphere.dev/applied": "spread"}},
    "spec": {
        "replicas": 3,
        "template": {
            "spec": {
                "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
                "nodeSelector": {"disktype": "ssd"},
            }
        },
    },
}
PATCH = [{"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"disktype": "ssd"}}]


@dataclass
class FakeOutcome:
    object: dict[str, Any] | None = field(default_factory=lambda: RESULT)
    patch: list[dict[str, Any]] = field(default_factory=lambda: PATCH)
    warnings: list[str] = field(default_factory=lambda: ["spread: added required hostname anti-affinity"])
    applied: list[str] = field(default_factory=lambda: ["spread"])
    audited: list[str] = field(default_factory=list)
    result: str = "patched"


def failures_of(expect: dict[str, Any], *, expected_object: dict[str, Any] | None = None) -> list[str]:
    found = check(Expect.model_validate(expect), FakeOutcome(), expected_object=expected_object)
    return [f.expectation for f in found]


@pytest.mark.parametrize(
    "expect",
    [
        {"patch": PATCH},
        {"contains": {"spec": {"template": {"spec": {"nodeSelector": {"disktype": "ssd"}}}}}},
        {"contains": {"spec": {"template": {"spec": {"tolerations": [{"key": "b"}, {"key": "a"}]}}}}},
        {"absent": ["/spec/template/spec/affinity", "/spec/strategy"]},
        {"applied": ["spread"]},
        {"audited": []},
        {"warnings": ["^spread: added", "hostname"]},
        {"unchanged": False},
        {"result": "patched"},
    ],
)
def test_a_met_expectation_passes(expect: dict[str, Any]) -> None:
    assert failures_of(expect) == []


def test_a_matching_whole_object_passes() -> None:
    assert failures_of({"object": RESULT}, expected_object=RESULT) == []


@pytest.mark.parametrize(
    ("expect", "failed"),
    [
        ({"patch": []}, "patch"),
        ({"patch": [dict(PATCH[0], op="replace")]}, "patch"),
        ({"contains": {"spec": {"replicas": 2}}}, "contains"),
        ({"contains": {"spec": {"replicas": "3"}}}, "contains"),
        ({"contains": {"spec": {"paused": False}}}, "contains"),
        ({"contains": {"spec": {"template": {"spec": {"tolerations": [{"key": "a"}, {"key": "a"}]}}}}}, "contains"),
        ({"absent": ["/spec/template/spec/nodeSelector/disktype"]}, "absent"),
        ({"applied": []}, "applied"),
        ({"applied": ["spread", "other"]}, "applied"),
        ({"audited": ["spread"]}, "audited"),
        ({"warnings": ["no such warning"]}, "warnings"),
        ({"unchanged": True}, "unchanged"),
        ({"result": "skipped"}, "result"),
    ],
)
def test_an_unmet_expectation_fails_and_says_which(expect: dict[str, Any], failed: str) -> None:
    assert failures_of(expect) == [failed]


def test_a_different_whole_object_fails_with_a_yaml_diff() -> None:
    expected = {**RESULT, "spec": {**RESULT["spec"], "replicas": 2}}
    [failure] = check(Expect.model_validate({"object": expected}), FakeOutcome(), expected_object=expected)
    assert failure.expectation == "object"
    assert "-  replicas: 2" in failure.details and "+  replicas: 3" in failure.details


def test_every_failed_expectation_is_reported_not_only_the_first() -> None:
    assert failures_of({"applied": [], "unchanged": True, "result": "ignored"}) == ["applied", "unchanged", "result"]


def test_a_contains_failure_names_the_missing_pointer_and_diffs_only_what_was_asked() -> None:
    expect = Expect.model_validate({"contains": {"metadata": {"labels": {"a": "b"}}}})
    [failure] = check(expect, FakeOutcome(), expected_object=None)
    assert failure.message == "the result does not contain /metadata/labels"
    assert "replicas" not in failure.details


def test_a_warnings_failure_lists_the_warnings_there_were() -> None:
    [failure] = check(Expect.model_validate({"warnings": ["nope"]}), FakeOutcome(), expected_object=None)
    assert "spread: added required hostname anti-affinity" in failure.render()


def test_an_unchanged_failure_shows_the_unexpected_patch() -> None:
    [failure] = check(Expect.model_validate({"unchanged": True}), FakeOutcome(), expected_object=None)
    assert "/spec/template/spec/nodeSelector" in failure.details


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [(1, 1, True), (1, True, False), ("1", 1, False), (1, 1.0, True), ({"a": [1]}, {"a": [1]}, True), ([1, 2], [2, 1], False), (None, {}, False)],
)
def test_equality_tells_yaml_types_apart(a: Any, b: Any, equal: bool) -> None:
    assert same(a, b) is equal


def test_list_containment_needs_a_distinct_item_for_each_expected_item() -> None:
    assert mismatch([{"k": 1}, {"k": 1}], [{"k": 1, "x": 2}, {"k": 1}]) is None
    assert mismatch([{"k": 1}, {"k": 1}], [{"k": 1, "x": 2}]) == (1,)


def test_projection_keeps_only_the_keys_the_expectation_names() -> None:
    assert project({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 0}}) == {"b": {"c": 2}}
    assert project([{"k": 1, "x": 2}], [{"k": 0}]) == [{"k": 1}]


@pytest.mark.parametrize(
    ("pointer", "found"),
    [("/metadata/annotations/placement.novasphere.dev~1applied", True), ("/spec/template/spec/tolerations/1/key", True),
     ("/spec/template/spec/tolerations/2", False), ("/spec/missing", False)],
)
def test_pointers_resolve_with_rfc6901_escapes(pointer: str, found: bool) -> None:
    assert resolve(RESULT, pointer)[0] is found


def test_a_yaml_diff_of_equal_values_is_empty() -> None:
    assert yaml_diff(RESULT, RESULT) == ""
