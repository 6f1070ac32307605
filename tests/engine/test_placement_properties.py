"""Property tests over generated workloads and policies: idempotency, and that merge mode never
removes or loosens what the object had."""
from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit.engine import apply
from tests.kit.policies import policy as make_policy
from tests.kit.workloads import deployment, pod_spec_of, required_terms
from webhook.cluster.view import StaticClusterView
from webhook.engine.placement import PlacementError
from webhook.kube.nodeterms import term_contains
from webhook.policy.policyset import Policy

KEYS = st.sampled_from(["zone", "disk", "gpu", "arch", "load"])
WORDS = st.sampled_from(["a", "b", "c"])
NUMS = st.integers(min_value=0, max_value=9).map(str)


@st.composite
def requirement(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    out: dict[str, Any] = {"key": draw(KEYS), "operator": op}
    if op in ("In", "NotIn"):
        out["values"] = draw(st.lists(WORDS, min_size=1, max_size=2, unique=True))
    elif op in ("Gt", "Lt"):
        out["values"] = [draw(NUMS)]
    return out


def term(size: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    return st.lists(requirement(), min_size=1, max_size=size).map(lambda es: {"matchExpressions": es})


def preferred(size: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda w, t: {"weight": w, "preference": t}, st.integers(1, 100), term(size))


POD_TERM = st.builds(
    lambda app, key: {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key},
    WORDS, st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone"]),
)
TOLERATION = st.builds(lambda k, e: {"key": k, "operator": "Exists", "effect": e}, KEYS, st.sampled_from(["NoSchedule", "NoExecute"]))


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


@st.composite
def policy_spec(draw: st.DrawFn) -> dict[str, Any]:
    placement = {
        "nodeSelector": draw(optional(st.dictionaries(KEYS, WORDS, min_size=1, max_size=2))),
        "nodeAffinity": draw(optional(st.fixed_dictionaries({}, optional={
            "required": st.lists(term(), min_size=1, max_size=2), "preferred": st.lists(preferred(), min_size=1, max_size=2)}))),
        "nodeAntiAffinity": draw(optional(st.fixed_dictionaries({}, optional={
            "required": st.lists(term(), min_size=1, max_size=2), "preferred": st.lists(preferred(1), min_size=1, max_size=2)}))),
        "podAntiAffinity": draw(optional(st.fixed_dictionaries({"spread": st.sampled_from(["required", "preferred"])},
                                                               optional={"terms": st.fixed_dictionaries({"required": st.lists(POD_TERM, max_size=2)})}))),
        "podAffinity": draw(optional(st.fixed_dictionaries({"required": st.lists(POD_TERM, min_size=1, max_size=2)}))),
        "tolerations": draw(optional(st.lists(TOLERATION, min_size=1, max_size=2))),
        "capacity": draw(optional(st.fixed_dictionaries({}, optional={
            "prefer": st.sampled_from(["spot", "on-demand"]), "require": st.sampled_from(["spot", "on-demand"]),
            "provider": st.sampled_from(["generic", "karpenter", "eks", "gke", "aks"])}))),
        "resources": draw(optional(st.fixed_dictionaries({}, optional={
            "preferredCPU": st.builds(lambda w, t: {"weight": w, "threshold": f"{t}%"}, st.integers(1, 100), st.integers(1, 99)),
            "requiredResources": st.lists(st.builds(lambda r, q: {"resourceType": r, "minAvailable": q},
                                                    st.sampled_from(["cpu", "memory", "gpu"]), st.sampled_from(["1", "500m", "2Gi"])),
                                          max_size=2)}))),
    }
    spec: dict[str, Any] = {"placement": {k: v for k, v in placement.items() if v is not None}}
    spec["scheduling"] = draw(st.fixed_dictionaries({}, optional={
        "priorityClassName": st.sampled_from(["high", "low"]), "schedulerName": st.sampled_from(["s1", "s2"]),
        "preemptionPolicy": st.sampled_from(["Never", "PreemptLowerPriority"])}))
    spec["rollout"] = draw(optional(st.one_of(
        st.just({"mode": "safe"}),
        st.fixed_dictionaries({"mode": st.just("explicit"), "maxSurge": st.sampled_from([1, "50%"]),
                               "maxUnavailable": st.sampled_from([0, 1])}))))
    if spec["rollout"] is None:
        del spec["rollout"]
    return spec


@st.composite
def workload(draw: st.DrawFn) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if draw(st.booleans()):
        pod["nodeSelector"] = draw(st.dictionaries(KEYS, WORDS, min_size=1, max_size=2))
    node_affinity = draw(st.fixed_dictionaries({}, optional={
        "requiredDuringSchedulingIgnoredDuringExecution": st.lists(term(3), min_size=1, max_size=3).map(
            lambda ts: {"nodeSelectorTerms": ts}),
        "preferredDuringSchedulingIgnoredDuringExecution": st.lists(preferred(), max_size=2)}))
    anti = draw(st.fixed_dictionaries({}, optional={"requiredDuringSchedulingIgnoredDuringExecution": st.lists(POD_TERM, max_size=2)}))
    affinity = {k: v for k, v in (("nodeAffinity", node_affinity), ("podAntiAffinity", anti)) if v}
    if affinity:
        pod["affinity"] = affinity
    if draw(st.booleans()):
        pod["tolerations"] = draw(st.lists(TOLERATION, max_size=2))
    pod.update(draw(st.fixed_dictionaries({}, optional={
        "priority": st.integers(0, 10), "priorityClassName": st.sampled_from(["high", "mid"]),
        "schedulerName": st.sampled_from(["default-scheduler", "custom"])})))
    labels = draw(st.sampled_from([{}, {"app": "web"}, {"pod-template-hash": "abc"}]))
    strategy = draw(st.sampled_from([None, {}, {"type": "Recreate"},
                                     {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                                     {"rollingUpdate": {"maxSurge": 2}}]))
    obj = deployment(pod_labels=labels, pod_spec=pod, strategy=strategy, replicas=draw(st.sampled_from([None, 1, 3])),
                     selector={"matchLabels": labels} if labels else {})
    return obj


CLUSTERS = st.sampled_from([
    None,
    StaticClusterView(
        nodes=[{"kind": "Node", "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}", "zone": "a"}}}
               for i in range(4)],
        priority_classes={"high": {"value": 5, "preemptionPolicy": "Never"}},
        match_label_keys=True,
    ),
])


def _apply_all(obj: dict[str, Any], policies: list[Policy], cluster: StaticClusterView | None) -> bool:
    """Apply each policy as admission does: a failing policy leaves no trace."""
    changed = False
    original = copy.deepcopy(obj)  # the request's object, what its author wrote
    for policy in policies:
        work = copy.deepcopy(obj)
        try:
            changed |= apply(work, policy, cluster, original=original).changed
        except PlacementError:
            continue
        obj.clear()
        obj.update(work)
    return changed


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(obj=workload(), specs=st.lists(policy_spec(), min_size=1, max_size=3),
       modes=st.lists(st.sampled_from(["merge", "keep", "replace"]), min_size=3, max_size=3), cluster=CLUSTERS)
def test_applying_the_policies_to_their_own_output_changes_nothing(
    obj: dict[str, Any], specs: list[dict[str, Any]], modes: list[str], cluster: StaticClusterView | None
) -> None:
    # Two replace policies fighting over one field group flip it forever, so replace
    # is exercised alone (lint reports such conflicts between policies).
    if "replace" in modes[: len(specs)] and len(specs) > 1:
        modes = ["merge" if m == "replace" else m for m in modes]
    policies = [make_policy(f"p{i}", on_conflict=modes[i], **s) for i, s in enumerate(specs)]
    # Admission re-applies the set until it settles (a policy's decision may depend on what a
    # later one wrote): it must settle within one pass more than there are policies.
    passes = 0
    while _apply_all(obj, policies, cluster):
        passes += 1
        assert passes <= len(policies) + 1, "the policies never settle"
    once = copy.deepcopy(obj)
    assert _apply_all(obj, policies, cluster) is False
    assert obj == once


@SETTINGS
@given(obj=workload(), specs=st.lists(policy_spec(), min_size=1, max_size=3), cluster=CLUSTERS)
def test_merge_mode_removes_and_loosens_nothing_the_object_had(
    obj: dict[str, Any], specs: list[dict[str, Any]], cluster: StaticClusterView | None
) -> None:
    original = copy.deepcopy(obj)
    _apply_all(obj, [make_policy(f"p{i}", **s) for i, s in enumerate(specs)], cluster)
    before_terms, after_terms = required_terms(original), required_terms(obj)
    # Every new term implies an old one (only stricter), and every old one lives on in some new term.
    assert all(any(term_contains(new, old) for old in before_terms) for new in after_terms) or not before_terms
    assert all(any(term_contains(new, old) for new in after_terms) for old in before_terms)
    for path, value in _leaves(original):
        if "nodeSelectorTerms" in path:
            continue
        if path[-1] == "priority" and pod_spec_of(obj).get("priorityClassName") != pod_spec_of(original).get("priorityClassName"):
            continue  # a stale integer priority goes with the class change (docs/policies.md, "Merge modes")
        if path[-1] in ("maxSurge", "maxUnavailable") and value == "25%":
            continue  # the API defaults are not a user's choice (docs/policies.md, "Merge modes")
        if path[-1] == "schedulerName" and value == "default-scheduler":
            continue
        assert _contains(obj, path, value), path


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, path + (k,))]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [(path + ("[]",), v) for v in value]
    return [(path, value)]


def _contains(obj: Any, path: tuple[Any, ...], value: Any) -> bool:
    cur = obj
    for i, key in enumerate(path):
        if key == "[]":
            return isinstance(cur, list) and value in cur
        if not isinstance(cur, dict) or key not in cur:
            return False
        cur = cur[key]
    if value in ({}, []):  # an empty container may have been filled
        return isinstance(cur, type(value))
    return bool(cur == value)
