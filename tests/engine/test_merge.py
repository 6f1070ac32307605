"""onConflict merge / keep / replace on every field group, and the AND of required terms (docs/policies.md, "Merge modes")."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kit.engine import apply
from tests.kit.policies import policy as make_policy
from tests.kit.workloads import deployment, node, pod_spec_of, required_terms
from webhook.engine import merge
from webhook.engine.placement import PlacementError
from webhook.scheduler.nodeaffinity import terms_match

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def term(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(exprs)}


USER_TOL = {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
POLICY_TOL = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
USER_POD_TERM = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
POLICY_POD_TERM = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}

# group: (policy spec, the object's pod spec fields, merge result, replace result)
GROUPS: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "nodeSelector": (
        {"placement": {"nodeSelector": {"disk": "ssd"}}},
        {"nodeSelector": {"team": "a"}},
        {"nodeSelector": {"team": "a", "disk": "ssd"}},
        {"nodeSelector": {"disk": "ssd"}},
    ),
    "nodeAffinity": (
        {"placement": {"nodeAffinity": {"required": [term(expr("zone", "In", "a"))]}}},
        {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [term(expr("disk", "Exists"))]}}}},
        {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [term(expr("disk", "Exists"), expr("zone", "In", "a"))]}}}},
        {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [term(expr("zone", "In", "a"))]}}}},
    ),
    "podAntiAffinity": (
        {"placement": {"podAntiAffinity": {"terms": {"required": [POLICY_POD_TERM]}}}},
        {"affinity": {"podAntiAffinity": {REQ: [USER_POD_TERM]}}},
        {"affinity": {"podAntiAffinity": {REQ: [USER_POD_TERM, POLICY_POD_TERM]}}},
        {"affinity": {"podAntiAffinity": {REQ: [POLICY_POD_TERM]}}},
    ),
    "podAffinity": (
        {"placement": {"podAffinity": {"preferred": [{"weight": 5, "podAffinityTerm": POLICY_POD_TERM}]}}},
        {"affinity": {"podAffinity": {PREF: [{"weight": 7, "podAffinityTerm": USER_POD_TERM}]}}},
        {"affinity": {"podAffinity": {PREF: [{"weight": 7, "podAffinityTerm": USER_POD_TERM},
                                             {"weight": 5, "podAffinityTerm": POLICY_POD_TERM}]}}},
        {"affinity": {"podAffinity": {PREF: [{"weight": 5, "podAffinityTerm": POLICY_POD_TERM}]}}},
    ),
    "tolerations": (
        {"placement": {"tolerations": [POLICY_TOL]}},
        {"tolerations": [USER_TOL]},
        {"tolerations": [USER_TOL, POLICY_TOL]},
        {"tolerations": [POLICY_TOL]},
    ),
    "priorityClassName": (
        {"scheduling": {"priorityClassName": "high"}},
        {"priorityClassName": "low"},
        {"priorityClassName": "low"},
        {"priorityClassName": "high"},
    ),
    "schedulerName": (
        {"scheduling": {"schedulerName": "bin-packer"}},
        {"schedulerName": "my-scheduler"},
        {"schedulerName": "my-scheduler"},
        {"schedulerName": "bin-packer"},
    ),
}


def _with(fields: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "nginx"}], **copy.deepcopy(fields)}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_merge_adds_to_what_the_object_has(group: str) -> None:
    spec, existing, merged, _ = GROUPS[group]
    obj = deployment(pod_spec=_with(existing))
    apply(obj, make_policy(**spec))
    assert pod_spec_of(obj) == _with(merged)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_keep_leaves_a_group_the_object_sets_untouched(group: str) -> None:
    spec, existing, _, _ = GROUPS[group]
    obj = deployment(pod_spec=_with(existing))
    result = apply(obj, make_policy(on_conflict="keep", **spec))
    assert pod_spec_of(obj) == _with(existing)
    assert result.changed is False


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_keep_still_fills_a_group_the_object_lacks(group: str) -> None:
    spec, _, _, replaced = GROUPS[group]
    obj = deployment()
    apply(obj, make_policy(on_conflict="keep", **spec))
    assert pod_spec_of(obj) == _with(replaced)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_replace_puts_the_policy_value_in_place_of_the_objects(group: str) -> None:
    spec, existing, _, replaced = GROUPS[group]
    obj = deployment(pod_spec=_with(existing))
    assert apply(obj, make_policy(on_conflict="replace", **spec)).changed
    assert pod_spec_of(obj) == _with(replaced)


@pytest.mark.parametrize("mode", ["merge", "keep", "replace"])
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_mode_is_idempotent_on_every_group(group: str, mode: str) -> None:
    spec, existing, _, _ = GROUPS[group]
    obj = deployment(pod_spec=_with(existing))
    policy = make_policy(on_conflict=mode, **spec)
    apply(obj, policy)
    once = copy.deepcopy(obj)
    assert apply(obj, policy).changed is False
    assert obj == once


def test_existing_multi_term_required_affinity_is_anded_not_replaced() -> None:
    existing = [term(expr("disk", "In", "ssd")), term(expr("gpu", "Exists")), term(expr("arch", "In", "arm64"))]
    obj = deployment(pod_spec=_with({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": copy.deepcopy(existing)}}}}))
    policy = make_policy(placement={"nodeAffinity": {"required": [term(expr("zone", "In", "a")), term(expr("zone", "In", "b"))]}})
    apply(obj, policy)
    terms = required_terms(obj)
    assert len(terms) == 6  # cross product: 3 existing x 2 policy terms
    for user_term in existing:
        for zone in ("a", "b"):
            assert term(*user_term["matchExpressions"], expr("zone", "In", zone)) in terms
    assert terms_match(terms, node(disk="ssd", zone="a"))
    assert not terms_match(terms, node(disk="ssd", zone="c"))
    assert not terms_match(terms, node(zone="a"))


def test_a_term_that_already_contains_the_policy_requirements_is_unchanged() -> None:
    mine = term(expr("zone", "In", "a"), expr("disk", "Exists"))
    obj = deployment(pod_spec=_with({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [copy.deepcopy(mine)]}}}}))
    policy = make_policy(placement={"nodeAffinity": {"required": [term(expr("zone", "In", "a"))]}})
    assert apply(obj, policy).changed is False
    assert required_terms(obj) == [mine]


def test_values_order_does_not_make_a_requirement_new() -> None:
    obj = deployment(pod_spec=_with({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [term(expr("zone", "In", "b", "a"))]}}}}))
    policy = make_policy(placement={"nodeAffinity": {"required": [term(expr("zone", "In", "a", "b"))]}})
    assert apply(obj, policy).changed is False


def test_an_empty_existing_term_matches_nothing_and_stays_so() -> None:
    obj = deployment(pod_spec=_with({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{}, term(expr("a", "Exists"))]}}}}))
    apply(obj, make_policy(placement={"nodeSelector": {}, "nodeAffinity": {"required": [term(expr("b", "Exists"))]}}))
    assert required_terms(obj) == [{}, term(expr("a", "Exists"), expr("b", "Exists"))]


def test_more_than_64_anded_terms_is_an_error_for_that_object() -> None:
    existing = [term(expr(f"k{i}", "Exists")) for i in range(33)]
    obj = deployment(pod_spec=_with({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": existing}}}}))
    policy = make_policy(placement={"nodeAffinity": {"required": [term(expr("z", "In", "a")), term(expr("z", "In", "b"))]}})
    with pytest.raises(PlacementError, match="64"):
        apply(obj, policy)


def test_exactly_64_anded_terms_is_allowed() -> None:
    existing = [term(expr(f"k{i}", "Exists")) for i in range(32)]
    obj = deployment(pod_spec=_with({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": existing}}}}))
    policy = make_policy(placement={"nodeAffinity": {"required": [term(expr("z", "In", "a")), term(expr("z", "In", "b"))]}})
    apply(obj, policy)
    assert len(required_terms(obj)) == 64


def test_a_different_node_selector_value_is_kept_with_a_warning() -> None:
    obj = deployment(pod_spec=_with({"nodeSelector": {"disk": "hdd"}}))
    result = apply(obj, make_policy(placement={"nodeSelector": {"disk": "ssd"}}))
    assert pod_spec_of(obj)["nodeSelector"] == {"disk": "hdd"}
    assert result.changed is False
    assert result.warnings == ["p: nodeSelector disk=hdd kept (policy wants ssd)"]


def test_preferred_terms_are_appended_unless_an_equal_one_exists() -> None:
    same = {"preference": {"matchExpressions": [{"operator": "In", "values": ["ssd"], "key": "disk"}]}, "weight": 10}
    obj = deployment(pod_spec=_with({"affinity": {"nodeAffinity": {PREF: [same]}}}))
    pref = {"weight": 10, "preference": term(expr("disk", "In", "ssd"))}
    other = {"weight": 20, "preference": term(expr("zone", "In", "a"))}
    apply(obj, make_policy(placement={"nodeAffinity": {"preferred": [pref, other]}}))
    assert pod_spec_of(obj)["affinity"]["nodeAffinity"][PREF] == [same, other]


def test_pod_terms_compare_semantically_ignoring_key_order_and_missing_lists() -> None:
    user = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}, "namespaces": []}
    obj = deployment(pod_spec=_with({"affinity": {"podAffinity": {REQ: [user]}}}))
    policy_term = {"labelSelector": {"matchLabels": {"app": "db"}, "matchExpressions": []}, "topologyKey": "kubernetes.io/hostname"}
    result = apply(obj, make_policy(placement={"podAffinity": {"required": [policy_term]}}))
    assert result.changed is False
    assert pod_spec_of(obj)["affinity"]["podAffinity"][REQ] == [user]


def test_tolerations_compare_with_api_defaults_filled_in() -> None:
    user = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}  # operator defaults to Equal
    obj = deployment(pod_spec=_with({"tolerations": [user]}))
    result = apply(obj, make_policy(placement={"tolerations": [{**user, "operator": "Equal"}]}))
    assert result.changed is False


def test_the_default_scheduler_name_is_not_a_users_choice() -> None:
    obj = deployment(pod_spec=_with({"schedulerName": "default-scheduler"}))
    apply(obj, make_policy(scheduling={"schedulerName": "bin-packer"}))
    assert pod_spec_of(obj)["schedulerName"] == "bin-packer"


def test_nothing_is_created_when_nothing_is_added() -> None:
    obj = deployment()
    before = copy.deepcopy(obj)
    result = apply(obj, make_policy(placement={"nodeAffinity": {}, "tolerations": []}, scheduling={}))
    assert obj == before
    assert result.changed is False


def test_null_containers_are_treated_as_absent() -> None:
    obj = deployment(pod_spec=_with({"affinity": None, "tolerations": None, "nodeSelector": None}))
    apply(obj, make_policy(placement={"nodeSelector": {"a": "b"}, "tolerations": [POLICY_TOL]}))
    assert pod_spec_of(obj)["nodeSelector"] == {"a": "b"}
    assert pod_spec_of(obj)["tolerations"] == [POLICY_TOL]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"nodeSelector": ["disk=ssd"]}, "nodeSelector is not a mapping"),
        ({"tolerations": {"key": "a"}}, "tolerations is not a list"),
        ({"affinity": "any"}, "affinity is not a mapping"),
    ],
)
def test_malformed_object_fields_are_placement_errors(fields: dict[str, Any], message: str) -> None:
    obj = deployment(pod_spec=_with(fields))
    spec = {"placement": {"nodeSelector": {"a": "b"}, "tolerations": [POLICY_TOL], "nodeAffinity": {"preferred": [
        {"weight": 1, "preference": term(expr("a", "Exists"))}]}}}
    with pytest.raises(PlacementError, match=message):
        apply(obj, make_policy(**spec))


def test_and_into_reports_no_change_when_every_term_implies_the_policy() -> None:
    existing = [term(expr("a", "Exists"), expr("z", "In", "1")), term(expr("z", "In", "2"))]
    assert merge.and_into(existing, [term(expr("z", "In", "1")), term(expr("z", "In", "2"))]) is None
