"""PlacementTest suite documents are validated as strictly as policies."""
from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from webhook import API_VERSION, TEST_KIND
from webhook.suites.model import Suite, format_path, validation_problems

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}


def suite(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": TEST_KIND,
        "metadata": {"name": "s"},
        "policies": ["p.yaml"],
        "cases": [{"name": "c", "object": DEPLOYMENT, "expect": {"unchanged": True}}],
    }
    data.update(changes)
    return data


def case(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "c", "object": DEPLOYMENT, "expect": {"unchanged": True}}
    data.update(changes)
    return data


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        Suite.model_validate(data)
    return [(format_path(path), message) for path, message in validation_problems(info.value, data)]


def test_a_minimal_suite_validates_with_spec_defaults() -> None:
    parsed = Suite.model_validate(suite())
    assert parsed.cases[0].operation == "CREATE"
    assert parsed.cases[0].namespace is None


def test_the_model_accepts_exactly_the_spec_api_version_and_kind() -> None:
    assert Suite.model_validate(suite()).api_version == API_VERSION
    assert Suite.model_validate(suite()).kind == TEST_KIND


def test_inline_policies_and_paths_may_be_mixed() -> None:
    parsed = Suite.model_validate(suite(policies=["a.yaml", {"kind": "PlacementPolicy"}]))
    assert parsed.policies == ["a.yaml", {"kind": "PlacementPolicy"}]


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (suite(kind="PlacementPolicy"), "kind", "must be one of 'PlacementTest', not 'PlacementPolicy'"),
        (suite(apiVersion="v1"), "apiVersion", "must be one of 'placement.novasphere.dev/v1alpha1'"),
        (suite(polices=["p.yaml"]), "polices", 'unknown field "polices"; did you mean "policies"?'),
        (suite(policies=[]), "policies", "list should have at least 1 item"),
        (suite(cases=[]), "cases", "list should have at least 1 item"),
        (suite(cases=[case(expct={})]), "cases[0].expct", 'unknown field "expct"; did you mean "expect"?'),
        (suite(cases=[case(expect={"objct": {}})]), "cases[0].expect.objct", 'unknown field "objct"; did you mean "object"?'),
        (suite(cases=[case(expect={})]), "cases[0].expect", "give at least one of object, objectFile"),
        (suite(cases=[case(expect={"unchanged": "yes"})]), "cases[0].expect.unchanged", "input should be a valid boolean"),
        (suite(cases=[case(expect={"warnings": ["(unclosed"]})]), "cases[0].expect.warnings", "invalid regular expression"),
        (suite(cases=[case(expect={"absent": ["spec/x"]})]), "cases[0].expect.absent", "JSON pointer must start with '/'"),
        (suite(cases=[case(expect={"result": "done"})]), "cases[0].expect.result", "must be one of 'patched', 'unchanged'"),
        (suite(cases=[case(expect={"object": {}, "objectFile": "x.yaml"})]), "cases[0].expect", "not both"),
        (suite(cases=[case(objectFile="x.yaml")]), "cases[0]", "give exactly one of object or objectFile"),
        (suite(cases=[{"name": "c", "expect": {"unchanged": True}}]), "cases[0]", "give exactly one of object"),
        (suite(cases=[case(object={"kind": "Deployment"})]), "cases[0].object", "string apiVersion and kind"),
        (suite(cases=[case(operation="PATCH")]), "cases[0].operation", "must be one of 'CREATE'"),
        (suite(cases=[case(name="")]), "cases[0].name", "at least 1 character"),
        (suite(cases=[case(), case()]), "cases[1].name", "duplicate case name 'c'"),
        (suite(metadata={}), "metadata.name", "required field is missing"),
        (suite(cluster={"nodez": []}), "cluster.nodez", 'did you mean "nodes"?'),
        (suite(cluster={"priorityClasses": [{"value": 1}]}), "cluster.priorityClasses", "needs metadata.name"),
        (suite(cluster={"nodes": [{}, {"kind": "Pod"}]}), "cluster.nodes[1]", "must be a Node, not kind 'Pod'"),
        (suite(cluster={"pods": [{"kind": "Pod"}]}), "cluster.pods[0]", "needs metadata.name"),
        (suite(cluster={"objects": [{"kind": "PodDisruptionBudget"}]}), "cluster.objects[0]", "string apiVersion and kind"),
        (suite(cluster={"stateFile": ["dump.yaml"]}), "cluster.stateFile", 'did you mean "stateFiles"?'),
        (suite(cluster={"stateFiles": [""]}), "cluster.stateFiles[0]", "at least 1 character"),
        (suite(cases=[case(expect={"placement": {}})]), "cases[0].expect.placement", "give at least one of schedules"),
        (suite(cases=[case(expect={"placement": {"replicas": 2}})]), "cases[0].expect.placement", "give at least one of"),
        (suite(cases=[case(expect={"placement": {"onlyNode": ["a"]}})]), "cases[0].expect.placement.onlyNode",
         'did you mean "onlyNodes"?'),
        (suite(cases=[case(expect={"placement": {"nodes": ["a", None]}})]), "cases[0].expect.placement.nodes[1]",
         "null is not a node name"),
        (suite(cases=[case(expect={"placement": {"onlyNodes": []}})]), "cases[0].expect.placement.onlyNodes",
         "at least 1 item"),
        (suite(cases=[case(expect={"placement": {"placed": -1}})]), "cases[0].expect.placement.placed",
         "greater than or equal to 0"),
        (suite(cases=[case(expect={"placement": {"pending": True}})]), "cases[0].expect.placement.pending",
         "valid integer"),
        (suite(cases=[case(expect={"placement": {"schedules": "yes"}})]), "cases[0].expect.placement.schedules",
         "valid boolean"),
        (suite(cases=[case(expect={"placement": {"message": "(x"}})]), "cases[0].expect.placement.message",
         "invalid regular expression"),
        (suite(cases=[case(expect={"placement": {"rollout": {}}})]), "cases[0].expect.placement.rollout",
         "give at least one of completes, steps, minAvailable"),
        (suite(cases=[case(expect={"placement": {"rollout": {"completes": True}, "update": False}})]),
         "cases[0].expect.placement", "needs the update simulated"),
    ],
)
def test_a_broken_suite_names_the_field_and_the_problem(data: dict[str, Any], field: str, message: str) -> None:
    found = problems(data)
    assert any(f == field and message in m for f, m in found), found


def test_every_problem_is_reported_at_once() -> None:
    found = problems(suite(kind="x", polices=[], cases=[case(expect={})]))
    assert {f for f, _ in found} >= {"kind", "polices", "cases[0].expect"}


def test_a_placement_expectation_validates_with_camel_case_names() -> None:
    expect = {"placement": {"nodes": ["a", "a"], "onlyNodes": ["a"], "replicas": 2, "update": True,
                            "rollout": {"completes": False, "steps": 1, "minAvailable": 2}}}
    placement = Suite.model_validate(suite(cases=[case(expect=expect)])).cases[0].expect.placement
    assert placement is not None and placement.only_nodes == ["a"] and placement.nodes == ["a", "a"]
    assert placement.rollout is not None and placement.rollout.min_available == 2


def test_an_unknown_field_without_a_close_match_lists_the_allowed_ones() -> None:
    [(field, message)] = problems(suite(zzzzzz=1))
    assert field == "zzzzzz"
    assert message == 'unknown field "zzzzzz" (allowed: apiVersion, cases, cluster, kind, metadata, policies)'


@pytest.mark.parametrize(
    ("path", "text"),
    [((), ""), (("cases", 0, "expect"), "cases[0].expect"), (("policies", 2), "policies[2]")],
)
def test_field_paths_read_like_policy_error_paths(path: tuple[str | int, ...], text: str) -> None:
    assert format_path(path) == text
