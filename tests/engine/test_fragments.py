"""Compilation of a policy's placement into Kubernetes fragments (docs/policies.md, "Merge modes", 3.3, 3.5)."""
from __future__ import annotations

from typing import Any

import pytest

from tests.kit.policies import policy as make_policy
from tests.kit.workloads import node
from webhook.engine import fragments
from webhook.kube.capacity import AKS_TOLERATION
from webhook.scheduler.nodeaffinity import terms_match


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


MAX = str(2**63 - 1)


@pytest.mark.parametrize("original", [expr("a", "Gt", MAX), expr("a", "Lt", "0"), expr("a", "Lt", "00")])
def test_an_anti_term_that_matches_no_node_compiles_to_no_required_affinity(original: dict[str, Any]) -> None:
    # Node labels hold 0 .. 2^63-1: nothing is above the maximum or below 0 (kube.nodeterms.negate).
    policy = make_policy(placement={"nodeAntiAffinity": {"required": [{"matchExpressions": [original]}]}})
    assert fragments.compiled(policy).required is None


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
    assert (tolerations == [AKS_TOLERATION]) is tolerated


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
        {"nodeAntiAffinity": {"required": [{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}]}},
        {"nodeAntiAffinity": {"preferred": [{"weight": 1, "preference": {"matchExpressions": [
            {"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}}]}},
    ],
)
def test_a_spec_the_loader_would_reject_becomes_a_policy_error_not_a_crash(placement: dict[str, Any]) -> None:
    assert fragments.compiled(make_policy(placement=placement)).error
