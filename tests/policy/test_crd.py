"""The PlacementPolicy CustomResourceDefinition: its names and columns, a schema the API server
takes as structural (the rules of ValidateStructural and of the CRD's own validation, checked
here offline; tests/e2e/test_crd.py holds it to a real API server), descriptions for
``kubectl explain``, and the conversion from the model's JSON Schema that produces it."""
from __future__ import annotations

import contextlib
import inspect
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from webhook import cli
from webhook.policy import crd, loader, model
from webhook.policy.structural import UnsupportedSchema, convert, re2_compatible

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"

# The fields of apiextensions.k8s.io/v1 JSONSchemaProps the generated schema may use.
JSON_SCHEMA_PROPS = {
    "type", "format", "description", "default", "enum", "required", "properties", "items",
    "additionalProperties", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
    "maxLength", "minItems", "maxItems", "pattern", "anyOf", "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return crd.openapi_schema()


def _nodes(node: dict[str, Any], at: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every value schema with its path: properties, items and map values."""
    yield at, node
    for name, sub in node.get("properties", {}).items():
        yield from _nodes(sub, f"{at}.{name}")
    if "items" in node:
        yield from _nodes(node["items"], f"{at}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{at}{{}}")


def _shipped() -> list[dict[str, Any]]:
    return [doc for path in sorted(POLICIES.glob("*.yaml")) if not path.name.endswith(".suite.yaml")
            for doc in yaml.safe_load_all(path.read_text()) if doc]


# --- the definition ----------------------------------------------------------------------------


def test_the_crd_is_placementpolicies_cluster_scoped_v1alpha1_with_short_name_pp() -> None:
    definition = crd.definition()
    assert definition["apiVersion"] == "apiextensions.k8s.io/v1"
    assert definition["metadata"] == {"name": "placementpolicies.placement.novasphere.dev"}
    spec = definition["spec"]
    assert (spec["group"], spec["scope"]) == ("placement.novasphere.dev", "Cluster")
    assert spec["names"] == {"plural": "placementpolicies", "singular": "placementpolicy", "kind": "PlacementPolicy",
                             "listKind": "PlacementPolicyList", "shortNames": ["pp"]}
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_kubectl_get_shows_order_kinds_enforcement_ready_and_age() -> None:
    (version,) = crd.definition()["spec"]["versions"]
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Order", "integer", ".spec.order"),
        ("Kinds", "string", ".spec.match.kinds"),
        ("Enforcement", "string", ".spec.enforcement"),
        ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]


def test_the_status_holds_the_observed_generation_conditions_and_changed_objects(schema: dict[str, Any]) -> None:
    status = schema["properties"]["status"]["properties"]
    assert (status["observedGeneration"]["type"], status["observedGeneration"]["format"]) == ("integer", "int64")
    assert (status["changedObjects"]["type"], status["changedObjects"]["minimum"]) == ("integer", 0)
    condition = status["conditions"]["items"]
    # metav1.Condition's shape
    assert set(condition["properties"]) == {"type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"}
    assert condition["required"] == ["type", "status", "lastTransitionTime", "reason", "message"]
    assert condition["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


# --- structural ------------------------------------------------------------------------------


def test_the_root_declares_metadata_only_as_an_object(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object"
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["apiVersion"]["type"] == schema["properties"]["kind"]["type"] == "string"


def test_every_value_has_a_type_or_is_int_or_string_or_kept_as_written(schema: dict[str, Any]) -> None:
    untyped = [at for at, node in _nodes(schema) if "type" not in node
               and not node.get("x-kubernetes-int-or-string") and not node.get("x-kubernetes-preserve-unknown-fields")]
    assert untyped == []


def test_every_keyword_is_one_json_schema_props_has(schema: dict[str, Any]) -> None:
    # Not $ref, $defs, nullable, const, title, propertyNames, oneOf, x-kubernetes-validations (1.23+).
    foreign = {(at, key) for at, node in _nodes(schema) for key in node if key not in JSON_SCHEMA_PROPS}
    assert foreign == set()


def test_the_only_junctor_is_the_int_or_string_form(schema: dict[str, Any]) -> None:
    for at, node in _nodes(schema):
        if "anyOf" in node:
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], at
            assert node["x-kubernetes-int-or-string"] is True and "type" not in node, at


def test_maps_and_objects_with_properties_are_apart(schema: dict[str, Any]) -> None:
    for at, node in _nodes(schema):
        if "additionalProperties" in node:
            assert isinstance(node["additionalProperties"], dict) and "properties" not in node, at


def test_exclusive_bounds_are_flags_beside_their_bound(schema: dict[str, Any]) -> None:
    for at, node in _nodes(schema):
        for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if flag in node:
                assert node[flag] is True and bound in node, at


def test_every_pattern_is_one_go_compiles(schema: dict[str, Any]) -> None:
    patterns = [node["pattern"] for _at, node in _nodes(schema) if "pattern" in node]
    assert patterns and all(re2_compatible(p) for p in patterns)


def test_defaults_are_the_models_and_valid_against_their_own_schema(schema: dict[str, Any]) -> None:
    spec = schema["properties"]["spec"]["properties"]
    defaults = {name: node["default"] for name, node in spec.items() if "default" in node}
    assert defaults == {"order": 0, "onConflict": "merge", "enforcement": "patch", "allowSkip": True}
    assert {k: v for k, v in model.Spec().model_dump(by_alias=True).items() if k in defaults} == defaults
    for name, value in defaults.items():
        jsonschema.Draft4Validator(spec[name]).validate(value)


def test_quantities_are_kubernetes_int_or_string_quantities(schema: dict[str, Any]) -> None:
    resources = schema["properties"]["spec"]["properties"]["placement"]["properties"]["resources"]
    quantity = resources["properties"]["requiredResources"]["items"]["properties"]["minAvailable"]
    assert quantity["x-kubernetes-int-or-string"] is True
    validator = jsonschema.Draft4Validator(quantity)
    assert all(validator.is_valid(v) for v in ("500m", "4Gi", "1", "1e3", 2))
    assert not any(validator.is_valid(v) for v in ("lots", "4 Gi", 0, 1.5))


# --- descriptions: kubectl explain -------------------------------------------------------------


def _policy_models() -> list[type[BaseModel]]:
    # PlacementPolicy and Metadata are the Kubernetes object around the spec: the CRD's root.
    return [cls for _name, cls in inspect.getmembers(model, inspect.isclass)
            if issubclass(cls, BaseModel) and cls.__module__ == model.__name__
            and cls not in (model.PlacementPolicy, model.Metadata)]


@pytest.mark.parametrize("cls", _policy_models(), ids=lambda cls: cls.__name__)
def test_every_field_of_the_policy_model_is_described(cls: type[BaseModel]) -> None:
    assert [name for name, info in cls.model_fields.items() if not info.description] == []


def test_kubectl_explain_spec_placement_reads_a_description_for_it_and_each_field(schema: dict[str, Any]) -> None:
    placement = schema["properties"]["spec"]["properties"]["placement"]
    assert placement["type"] == "object" and placement["description"].startswith("Where the pods")
    assert {name: bool(f.get("description")) for name, f in placement["properties"].items()} == dict.fromkeys(
        placement["properties"], True)


def test_optional_objects_are_not_nullable_so_openapi_v2_keeps_their_fields(schema: dict[str, Any]) -> None:
    # The API server publishes a nullable value to OpenAPI v2 without type or properties.
    assert not any("nullable" in node for _at, node in _nodes(schema))
    assert "properties" in schema["properties"]["spec"]["properties"]["placement"]


# --- the same policies as lint -------------------------------------------------------------------


def test_every_shipped_policy_validates_against_the_crd_schema(schema: dict[str, Any]) -> None:
    validator = jsonschema.Draft4Validator(schema)
    shipped = _shipped()
    assert shipped
    for policy in shipped:
        assert [e.message for e in validator.iter_errors(policy)] == [], policy["metadata"]["name"]


@pytest.mark.parametrize(
    "spec",
    [
        {"order": "first"},
        {"enforcement": "sometimes"},
        {"allowSkip": "no"},
        {"match": {"kinds": []}},
        {"placement": {"nodeSelector": {"gpu": True}}},
        {"placement": {"capacity": {"prefer": "spot", "weight": 0}}},
        {"rollout": {"maxSurge": "25 percent"}},
        {"placement": {"resources": {"preferredCPU": {"weight": 1, "threshold": "101%"}}}},
        {"placement": {"tolerations": [{"effect": "Sometimes"}]}},
    ],
    ids=["order", "enforcement", "allow-skip", "empty-kinds", "bool-label-value", "weight", "surge",
         "threshold", "effect"],
)
def test_the_crd_schema_refuses_what_lint_refuses_for_its_type(
    schema: dict[str, Any], spec: dict[str, Any], tmp_path: Path
) -> None:
    policy = {"apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy",
              "metadata": {"name": "x"}, "spec": spec}
    assert not jsonschema.Draft4Validator(schema).is_valid(policy)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    with pytest.raises(loader.PolicyLoadError):
        loader.load([path])


# --- allowSkip ---------------------------------------------------------------------------------


def test_allow_skip_defaults_to_true_and_a_policy_may_refuse_the_skip() -> None:
    assert model.Spec().allow_skip is True
    refusing = model.PlacementPolicy.model_validate({
        "apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy",
        "metadata": {"name": "residency"}, "spec": {"allowSkip": False}})
    assert refusing.spec_data()["allowSkip"] is False


def test_allow_skip_must_be_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text('apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\n'
                    'metadata: {name: a}\nspec:\n  allowSkip: "no"\n')
    with pytest.raises(loader.PolicyLoadError) as info:
        loader.load([path])
    [error] = info.value.errors
    assert (error.line, error.field) == (5, "spec.allowSkip")
    assert "must be a boolean" in error.message


# --- the conversion -------------------------------------------------------------------------------

DEFS = {"Thing": {"type": "object", "description": "A thing.", "title": "Thing",
                  "properties": {"size": {"type": "integer", "title": "Size"}}, "additionalProperties": False}}


@pytest.mark.parametrize(
    ("source", "structural"),
    [
        ({"anyOf": [{"$ref": "#/$defs/Thing"}, {"type": "null"}], "default": None, "description": "The thing."},
         {"type": "object", "description": "The thing.", "properties": {"size": {"type": "integer"}}}),
        ({"$ref": "#/$defs/Thing"},
         {"type": "object", "description": "A thing.", "properties": {"size": {"type": "integer"}}}),
        ({"type": "string", "const": "v1"}, {"type": "string", "enum": ["v1"]}),
        ({"type": "number", "exclusiveMinimum": 0}, {"type": "number", "minimum": 0, "exclusiveMinimum": True}),
        ({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+%$"}]},
         {"minimum": 0, "pattern": "^[0-9]+%$", "anyOf": [{"type": "integer"}, {"type": "string"}],
          "x-kubernetes-int-or-string": True}),
        ({"anyOf": [{"type": "string", "maxLength": 63}, {"type": "number"}], "description": "A label value."},
         {"type": "string", "description": "A label value.", "maxLength": 63}),
        ({"oneOf": [{"type": "string", "enum": ["a"]}, {"$ref": "#/$defs/Thing"}], "description": "Either."},
         {"description": "Either.", "x-kubernetes-preserve-unknown-fields": True}),
        ({"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"minLength": 1}},
         {"type": "object", "additionalProperties": {"type": "string"}}),
        ({"type": "object", "additionalProperties": True}, {"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
        ({"type": "string", "pattern": "^(?!-)[a-z]+$"}, {"type": "string"}),
        ({"type": "string", "pattern": "^[a-z]+$"}, {"type": "string", "pattern": "^[a-z]+$"}),
        ({"type": "string", "description": "Set ``spread``."}, {"type": "string", "description": "Set `spread`."}),
    ],
    ids=["optional-ref-not-nullable", "ref-keeps-its-docstring", "const", "exclusive-minimum", "int-or-string",
         "string-or-number", "several-shapes", "map-without-key-rules", "map-of-anything", "python-only-pattern-dropped",
         "re2-pattern-kept", "docstring-quotes"],
)
def test_a_json_schema_construct_becomes_its_structural_form(source: dict[str, Any], structural: dict[str, Any]) -> None:
    assert convert(source, DEFS) == structural


@pytest.mark.parametrize(
    ("source", "complaint"),
    [
        ({"type": "object", "properties": {"a": {"type": "string", "if": {}}}}, "x.a: 'if' has no structural-schema"),
        ({"type": "object", "properties": {"a": {"description": "untyped"}}}, "x.a: no type"),
    ],
    ids=["unknown-keyword", "no-type"],
)
def test_a_construct_without_a_structural_form_is_refused_naming_its_path(source: dict[str, Any], complaint: str) -> None:
    with pytest.raises(UnsupportedSchema, match=re.escape(complaint)):
        convert(source, {}, at="x")


@pytest.mark.parametrize(
    ("pattern", "compatible"),
    [
        (r"^(100|[1-9]?\d)%$", True),
        (r"^(?:a|b)+?$", True),
        (r"^(?P<name>[a-z])$", True),
        (r"(?i)^abc$", True),
        (r"[(?=]", True),
        (r"[]a]", True),
        (r"^(?=a)", False),
        (r"^(?!a)", False),
        (r"(?<=a)b", False),
        (r"(?<!a)b", False),
        (r"(a)\1", False),
        (r"(?P<x>a)(?P=x)", False),
        (r"(?>a)", False),
        (r"a++", False),
        (r"a{,3}", False),
        (r"abc\Z", False),
        (r"(?x) a b", False),
        (r"[a-", False),
    ],
)
def test_re2_compatible_tells_patterns_go_reads_as_python_does(pattern: str, compatible: bool) -> None:
    assert re2_compatible(pattern) is compatible


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_an_escaped_literal_is_always_re2_compatible(text: str) -> None:
    assert re2_compatible(re.escape(text))


# --- what the chart ships -----------------------------------------------------------------------


def test_the_manifest_is_the_definition_under_a_header_saying_how_to_regenerate_it() -> None:
    text = crd.manifest()
    assert text.startswith("# ") and "placement-webhook schema --crd >" in text.splitlines()[1]
    assert yaml.safe_load(text) == crd.definition()
    assert "&id" not in text  # written out in full, no YAML anchors


def test_schema_crd_prints_the_manifest() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["schema", "--crd"])
    assert code == 0 and out.getvalue() == crd.manifest()
