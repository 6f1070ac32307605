"""Compilation of a policy's placement into Kubernetes fragments (docs/policies.md, "Merge modes", 3.3, 3.5)."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.engine import preferred_score
from tests.kit.policies import policy as make_policy
from tests.kit.workloads import node
from webhook.engine import fragments
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
    assert fragments.negate(original) == negated


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
    negated_terms = fragments.negate_term(anti[0])
    for n in EXAMPLE_NODES:
        if n["metadata"]["labels"].get("a") in ("x", "y") and original["operator"] in ("Gt", "Lt"):
            continue  # a non-integer value satisfies neither Gt nor Lt (see compile.negate)
        assert terms_match(negated_terms, n) is not terms_match(anti, n), n["metadata"]["name"]


MAX = str(2**63 - 1)


@pytest.mark.parametrize("original", [expr("a", "Gt", MAX), expr("a", "Lt", "0"), expr("a", "Lt", "00")])
def test_a_gt_or_lt_that_matches_no_node_negates_to_no_constraint(original: dict[str, Any]) -> None:
    # Node labels hold 0 .. 2^63-1: nothing is above the maximum or below 0. "Lt 2^63" or
    # "Gt -1" would be unparseable terms that match nothing (labels.NewRequirement).
    assert fragments.negate(original) is None
    assert fragments.negate_term({"matchExpressions": [expr("b", "Exists"), original]}) is None
    policy = make_policy(placement={"nodeAntiAffinity": {"required": [{"matchExpressions": [original]}]}})
    assert fragments.compiled(policy).required is None
    assert fragments.negate_preferred({"weight": 5, "preference": {"matchExpressions": [original]}}) == []


def test_negations_at_the_edges_stay_inside_what_the_scheduler_parses() -> None:
    assert fragments.negate(expr("a", "Gt", str(2**63 - 2))) == [expr("a", "Lt", MAX), expr("a", "DoesNotExist")]
    assert fragments.negate(expr("a", "Lt", "1")) == [expr("a", "Gt", "0"), expr("a", "DoesNotExist")]


_BOUNDS = st.one_of(st.sampled_from([0, 1, 2, 2**63 - 2, 2**63 - 1]), st.integers(min_value=0, max_value=2**63 - 1))
_LABELS = st.one_of(st.none(), _BOUNDS.map(str), _BOUNDS.map(lambda n: f"{n:08d}"))


@given(op=st.sampled_from(["Gt", "Lt"]), bound=_BOUNDS, label=_LABELS)
def test_negated_gt_and_lt_admit_exactly_the_nodes_the_original_rejects(op: str, bound: int, label: str | None) -> None:
    # Over every node whose label is absent or an integer it can hold (the judge is the
    # scheduler's own reading, kube.nodes).
    n = node("n") if label is None else node("n", a=label)
    anti = {"matchExpressions": [expr("a", op, str(bound))]}
    negated = fragments.negate_term(anti)
    admitted = True if negated is None else terms_match(negated, n)
    assert admitted is not terms_match([anti], n)


def test_gt_negation_admits_nodes_that_lack_the_key() -> None:
    terms = fragments.negate_term({"matchExpressions": [expr("a", "Gt", "5")]})
    assert terms == [{"matchExpressions": [expr("a", "Lt", "6")]}, {"matchExpressions": [expr("a", "DoesNotExist")]}]
    assert terms_match(terms, node("bare"))
    assert terms_match(terms, node("five", a="5"))
    assert not terms_match(terms, node("six", a="6"))


def test_multi_expression_anti_term_negates_to_an_or_of_single_negations() -> None:
    anti = {"matchExpressions": [expr("maintenance", "In", "true"), expr("zone", "Exists")]}
    assert fragments.negate_term(anti) == [
        {"matchExpressions": [expr("maintenance", "NotIn", "true")]},
        {"matchExpressions": [expr("zone", "DoesNotExist")]},
    ]


def test_match_fields_negate_in_to_not_in_and_back() -> None:
    anti = {"matchFields": [expr("metadata.name", "In", "n1")]}
    assert fragments.negate_term(anti) == [{"matchFields": [expr("metadata.name", "NotIn", "n1")]}]
    assert fragments.negate_term({"matchFields": [expr("metadata.name", "NotIn", "n1")]}) == [
        {"matchFields": [expr("metadata.name", "In", "n1")]}
    ]


def test_several_required_anti_terms_are_all_avoided() -> None:
    placement = {
        "nodeAntiAffinity": {
            "required": [
                {"matchExpressions": [expr("maintenance", "In", "true")]},
                {"matchExpressions": [expr("gpu", "Exists")]},
            ]
        }
    }
    terms = fragments.compile_spec({"placement": placement}).required
    assert terms == [{"matchExpressions": [expr("maintenance", "NotIn", "true"), expr("gpu", "DoesNotExist")]}]


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
    prefs = fragments.negate_preferred({"weight": 10, "preference": {"matchExpressions": [expr("a", op, bound)]}})
    assert len(prefs) == 2  # Lt/Gt and DoesNotExist: mutually exclusive, so never counted twice
    for n in EXAMPLE_NODES[:5]:
        assert preferred_score(prefs, n) == scores[n["metadata"]["name"]], n["metadata"]["name"]


def test_required_node_affinity_or_terms_are_anded_with_negated_anti_terms() -> None:
    placement = {
        "nodeAffinity": {"required": [{"matchExpressions": [expr("zone", "In", "a")]},
                                      {"matchExpressions": [expr("zone", "In", "b")]}]},
        "nodeAntiAffinity": {"required": [{"matchExpressions": [expr("load", "Gt", "5")]}]},
    }
    terms = fragments.compile_spec({"placement": placement}).required
    assert terms is not None and len(terms) == 4
    assert terms_match(terms, node(zone="a"))
    assert terms_match(terms, node(zone="b", load="2"))
    assert not terms_match(terms, node(zone="b", load="7"))
    assert not terms_match(terms, node(zone="c"))


def test_contradictory_combinations_are_dropped_from_the_compiled_terms() -> None:
    placement = {
        "nodeAffinity": {"required": [{"matchExpressions": [expr("load", "Exists")]}]},
        "nodeAntiAffinity": {"required": [{"matchExpressions": [expr("load", "Gt", "5")]}]},
    }
    assert fragments.compile_spec({"placement": placement}).required == [
        {"matchExpressions": [expr("load", "Exists"), expr("load", "Lt", "6")]}
    ]


def test_more_than_64_compiled_terms_is_a_policy_error() -> None:
    anti = [{"matchExpressions": [expr(f"k{i}", "Exists"), expr(f"j{i}", "Exists")]} for i in range(7)]
    policy = make_policy(placement={"nodeAntiAffinity": {"required": anti}})
    assert "more than 64" in str(fragments.compiled(policy).error)


def test_a_required_affinity_that_contradicts_itself_is_a_policy_error() -> None:
    placement = {
        "nodeAffinity": {"required": [{"matchExpressions": [expr("a", "Exists")]}]},
        "nodeAntiAffinity": {"required": [{"matchExpressions": [expr("a", "Exists")]}]},
    }
    assert "can match no node" in str(fragments.compiled(make_policy(placement=placement)).error)


def test_compiled_fragments_are_memoised_on_the_policy() -> None:
    policy = make_policy(placement={"nodeSelector": {"disk": "ssd"}})
    assert fragments.compiled(policy) is fragments.compiled(policy)


PROVIDERS = [
    ("generic", "spot", expr("node.kubernetes.io/capacity", "In", "spot")),
    ("generic", "on-demand", expr("node.kubernetes.io/capacity", "In", "on-demand")),
    ("karpenter", "spot", expr("karpenter.sh/capacity-type", "In", "spot")),
    ("karpenter", "on-demand", expr("karpenter.sh/capacity-type", "In", "on-demand")),
    ("eks", "spot", expr("eks.amazonaws.com/capacityType", "In", "SPOT")),
    ("eks", "on-demand", expr("eks.amazonaws.com/capacityType", "In", "ON_DEMAND")),
    ("gke", "spot", expr("cloud.google.com/gke-spot", "In", "true")),
    ("gke", "on-demand", expr("cloud.google.com/gke-spot", "DoesNotExist")),
    ("aks", "spot", expr("kubernetes.azure.com/scalesetpriority", "In", "spot")),
    ("aks", "on-demand", expr("kubernetes.azure.com/scalesetpriority", "DoesNotExist")),
    (
        {"label": "example.com/lifecycle", "spot": ["preemptible"], "onDemand": []},
        "on-demand",
        expr("example.com/lifecycle", "DoesNotExist"),
    ),
]


@pytest.mark.parametrize(("provider", "want", "requirement"), PROVIDERS, ids=lambda v: str(v)[:30])
def test_capacity_prefer_compiles_to_a_weighted_preferred_term(provider: Any, want: str, requirement: Any) -> None:
    spec = {"placement": {"capacity": {"prefer": want, "weight": 40, "provider": provider}}}
    assert fragments.compile_spec(spec).preferred == [{"weight": 40, "preference": {"matchExpressions": [requirement]}}]


@pytest.mark.parametrize(("provider", "want", "requirement"), PROVIDERS, ids=lambda v: str(v)[:30])
def test_capacity_require_compiles_to_a_required_term(provider: Any, want: str, requirement: Any) -> None:
    spec = {"placement": {"capacity": {"require": want, "weight": 50, "provider": provider}}}
    assert fragments.compile_spec(spec).required == [{"matchExpressions": [requirement]}]


@pytest.mark.parametrize(
    ("capacity", "tolerated"),
    [
        ({"prefer": "spot", "provider": "aks"}, True),
        ({"require": "spot", "provider": "aks"}, True),
        ({"prefer": "on-demand", "provider": "aks"}, False),
        ({"prefer": "spot", "provider": "gke"}, False),
        ({"prefer": "spot", "provider": "eks"}, False),
    ],
)
def test_the_aks_spot_taint_is_tolerated_only_when_spot_is_wanted(capacity: dict[str, Any], tolerated: bool) -> None:
    tolerations = fragments.compile_spec({"placement": {"capacity": capacity}}).tolerations
    assert (tolerations == [fragments.AKS_TOLERATION]) is tolerated


def test_an_explicit_provider_brings_its_own_toleration() -> None:
    tol = {"key": "lifecycle", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
    provider = {"label": "lifecycle", "spot": ["spot"], "onDemand": ["normal"], "toleration": tol}
    compiled = fragments.compile_spec({"placement": {"capacity": {"require": "spot", "provider": provider}}})
    assert compiled.tolerations == [tol]


P = "placement.novasphere.dev/"


@pytest.mark.parametrize(
    ("resources", "preferred"),
    [
        ({"preferredCPU": {"weight": 80, "threshold": "70%"}}, [(80, P + "cpu-usage", "70")]),
        ({"preferredMemory": {"weight": 60, "threshold": "80%"}}, [(60, P + "memory-usage", "80")]),
        ({"preferredStorage": {"weight": 20, "threshold": "90%"}}, [(20, P + "storage-usage", "90")]),
    ],
)
def test_resource_thresholds_compile_to_preferred_usage_lt_terms(
    resources: dict[str, Any], preferred: list[tuple[int, str, str]]
) -> None:
    compiled = fragments.compile_spec({"placement": {"resources": resources}})
    assert compiled.preferred == [
        {"weight": w, "preference": {"matchExpressions": [expr(k, "Lt", v)]}} for w, k, v in preferred
    ]


@pytest.mark.parametrize(
    ("resource_type", "min_available", "requirement"),
    [
        ("gpu", "1", expr(P + "gpu-available", "Gt", "0")),
        ("gpu", "2", expr(P + "gpu-available", "Gt", "1")),
        ("memory", "4Gi", expr(P + "memory-available", "Gt", "4095")),
        ("memory", "1.5Gi", expr(P + "memory-available", "Gt", "1535")),
        ("memory", "100M", expr(P + "memory-available", "Gt", "95")),  # 95.37 MiB rounds up to 96
        ("storage", "10Gi", expr(P + "storage-available", "Gt", "10239")),
        ("cpu", "500m", expr(P + "cpu-available", "Gt", "499")),
        ("cpu", "2", expr(P + "cpu-available", "Gt", "1999")),
        ("cpu", "0.5", expr(P + "cpu-available", "Gt", "499")),
    ],
)
def test_required_resources_compile_to_available_gt_terms(
    resource_type: str, min_available: str, requirement: dict[str, Any]
) -> None:
    resources = {"requiredResources": [{"resourceType": resource_type, "minAvailable": min_available}]}
    assert fragments.compile_spec({"placement": {"resources": resources}}).required == [
        {"matchExpressions": [requirement]}
    ]


def test_several_required_resources_are_one_anded_term() -> None:
    resources = {
        "requiredResources": [
            {"resourceType": "gpu", "minAvailable": "1"},
            {"resourceType": "memory", "minAvailable": "4Gi"},
        ]
    }
    assert fragments.compile_spec({"placement": {"resources": resources}}).required == [
        {"matchExpressions": [expr(P + "gpu-available", "Gt", "0"), expr(P + "memory-available", "Gt", "4095")]}
    ]


@pytest.mark.parametrize(
    "placement",
    [
        {"resources": {"preferredCPU": {"weight": 1, "threshold": "seventy"}}},
        {"resources": {"requiredResources": [{"resourceType": "disk", "minAvailable": "1"}]}},
        {"capacity": {"prefer": "spot", "provider": "openstack"}},
        {"nodeAntiAffinity": {"required": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}]}},
    ],
)
def test_a_spec_the_loader_would_reject_becomes_a_policy_error_not_a_crash(placement: dict[str, Any]) -> None:
    assert fragments.compiled(make_policy(placement=placement)).error


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def containers(value: Any) -> list[int]:
    """The ids of every dict and list inside ``value``, ``value`` included."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in containers(v))]
    return []


@given(json_values)
def test_a_json_copy_is_equal_and_shares_no_dict_or_list_with_the_original(value: Any) -> None:
    copied = fragments.copy_json(value)
    assert copied == value
    assert not set(containers(copied)) & set(containers(value))


def test_a_json_copy_does_not_alias_a_value_repeated_inside_the_original() -> None:
    shared = {"key": "zone", "operator": "Exists"}
    copied = fragments.copy_json([shared, shared])
    assert copied[0] is not copied[1]
    copied[0]["key"] = "region"
    assert copied[1]["key"] == "zone" and shared["key"] == "zone"


def test_a_conjunction_shares_the_terms_requirements_and_copies_the_ones_it_adds() -> None:
    # The engine never edits a requirement in place, so ANDing need not copy the object's own.
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    other = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                  {"key": "maintenance", "operator": "DoesNotExist"}]}
    out = fragments.conjoin(term, other)
    assert out == {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                        {"key": "maintenance", "operator": "DoesNotExist"}]}
    assert out["matchExpressions"][0] is term["matchExpressions"][0]
    assert out["matchExpressions"][1] is not other["matchExpressions"][1]
    assert term == {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
