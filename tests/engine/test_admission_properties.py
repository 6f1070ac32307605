"""Properties of admission with the real engine and loader, over generated workloads and policies.

For every generated policy set and workload:
- the patch applied to the original gives exactly the mutated object;
- a second pass over the output gives an empty patch (idempotency, docs/policies.md);
- under ``onConflict: merge`` nothing the author wrote is removed or rewritten: every leaf of
  the input is still in the output with the same value, except the documented ones (a stale
  integer ``priority`` when a priority class is set; the API-default ``25%`` rollout values);
  existing required node-selector terms survive as subsets of the ANDed terms;
- the request's own object is never modified, and neither is what a policy compiled;
- outputs validate against the official Kubernetes schemas (strict) for the built-in kinds.
"""
from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cluster.view import StaticClusterView
from webhook.engine import admission, fragments, review, shapes
from webhook.files import documents
from webhook.kube.deployment import resolve
from webhook.kube.kinds import BUILTIN
from webhook.kube.warnings import clip_all
from webhook.policy import loader
from webhook.policy.policyset import PolicySet

KEYS = ["zone", "disk", "example.com/pool", "maintenance", "gpu-count"]
VALUES = ["a", "b", "true", "ssd"]
LABEL_SETS = [{}, {"app": "web"}, {"app": "web", "tier": "db"}, {"pod-template-hash": "abc123"}]

# ---------------------------------------------------------------- generated policies


def _expression(key: str, op: str, values: list[str]) -> dict[str, Any]:
    if op in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": op}
    if op in ("Gt", "Lt"):
        return {"key": "gpu-count", "operator": op, "values": [str(len(values) + 1)]}
    return {"key": key, "operator": op, "values": values}


expressions = st.builds(
    _expression,
    st.sampled_from(KEYS),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
)
terms = st.lists(expressions, min_size=1, max_size=2).map(lambda e: {"matchExpressions": e})
preferred = st.builds(lambda w, t: {"weight": w, "preference": t}, st.integers(1, 100), terms)
single_preferred = st.builds(
    lambda w, e: {"weight": w, "preference": {"matchExpressions": [e]}}, st.integers(1, 100), expressions
)
tolerations = st.lists(
    st.fixed_dictionaries(
        {"key": st.sampled_from(["dedicated", "gpu"]), "operator": st.just("Equal"), "value": st.sampled_from(VALUES)},
        optional={"effect": st.sampled_from(["NoSchedule", "NoExecute"])},
    ),
    min_size=1,
    max_size=2,
)

placements = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": st.dictionaries(st.sampled_from(KEYS[:3]), st.sampled_from(VALUES), min_size=1, max_size=2),
        "nodeAffinity": st.fixed_dictionaries(
            {}, optional={"required": st.lists(terms, min_size=1, max_size=2), "preferred": st.lists(preferred, min_size=1, max_size=2)}
        ).filter(bool),
        "nodeAntiAffinity": st.fixed_dictionaries(
            {}, optional={"required": st.lists(terms, min_size=1, max_size=2), "preferred": st.lists(single_preferred, min_size=1, max_size=1)}
        ).filter(bool),
        "podAntiAffinity": st.fixed_dictionaries({"spread": st.sampled_from(["required", "preferred"])}),
        "tolerations": tolerations,
        "capacity": st.fixed_dictionaries(
            {"provider": st.sampled_from(["generic", "karpenter", "eks", "gke", "aks"]), "prefer": st.sampled_from(["spot", "on-demand"])}
        ),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "preferredCPU": st.just({"weight": 80, "threshold": "70%"}),
                "requiredResources": st.just([{"resourceType": "memory", "minAvailable": "4Gi"}]),
            },
        ).filter(bool),
    },
)

policy_specs = st.fixed_dictionaries(
    {"placement": placements},
    optional={
        "onConflict": st.sampled_from(["merge", "keep", "replace"]),
        "order": st.integers(0, 3),
        "scheduling": st.fixed_dictionaries(
            {},
            optional={
                "priorityClassName": st.sampled_from(["high", "low"]),
                "schedulerName": st.just("custom"),
                "preemptionPolicy": st.sampled_from(["Never", "PreemptLowerPriority"]),
            },
        ).filter(bool),
        "rollout": st.sampled_from(
            [{"mode": "safe"}, {"mode": "safe", "maxUnavailable": 1}, {"mode": "explicit", "maxSurge": 2}]
        ),
        "match": st.fixed_dictionaries(
            {},
            optional={
                "kinds": st.just(["Deployment", "StatefulSet", "Pod", "Job"]),
                # Pod labels the engine itself may write (the group label) make matching
                # depend on other policies' output: admission must still settle.
                "podSelector": st.sampled_from(
                    [{"matchLabels": {"placement.novasphere.dev/group": "w"}}, {"matchLabels": {"app": "w"}}]
                ),
            },
        ),
    },
)


def load_policies(specs: list[dict[str, Any]]) -> PolicySet:
    docs = [
        {"apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy", "metadata": {"name": f"p{i}"}, "spec": spec}
        for i, spec in enumerate(specs)
    ]
    return loader.load_documents(documents.load_text(yaml.safe_dump_all(docs), file="<generated>"))


# ---------------------------------------------------------------- generated workloads


def _pod_spec(extra: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "registry.example.com/app:1.0"}], **extra}


pod_extras = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": st.dictionaries(st.sampled_from(KEYS[:3]), st.sampled_from(VALUES), min_size=1, max_size=2),
        "tolerations": tolerations,
        "priority": st.integers(0, 1000),
        "priorityClassName": st.just("user-class"),
        "affinity": st.fixed_dictionaries(
            {},
            optional={
                "nodeAffinity": st.fixed_dictionaries(
                    {},
                    optional={
                        "requiredDuringSchedulingIgnoredDuringExecution": st.lists(terms, min_size=1, max_size=3).map(
                            lambda t: {"nodeSelectorTerms": t}
                        ),
                        "preferredDuringSchedulingIgnoredDuringExecution": st.lists(preferred, min_size=1, max_size=2),
                    },
                ),
                "podAntiAffinity": st.just(
                    {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "other"}}, "topologyKey": "topology.kubernetes.io/zone"}]}
                ),
            },
        ),
    },
)
strategies = st.sampled_from(
    [None, {}, {"type": "Recreate"}, {"type": "RollingUpdate"}, {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
     {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}}]
)


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["Deployment", "StatefulSet", "Pod", "Job", "DaemonSet"]))
    labels = draw(st.sampled_from(LABEL_SETS))
    meta: dict[str, Any] = {"name": "w"}
    if draw(st.booleans()):
        meta["labels"] = dict(labels)
    if draw(st.booleans()):
        meta["annotations"] = {"team.example.com/owner": "x", "placement.novasphere.dev/applied": "earlier"}
    pod = _pod_spec(draw(pod_extras))
    if kind == "Pod":
        meta["labels"] = dict(labels)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod}
    if kind == "Job":
        pod["restartPolicy"] = "Never"
    template: dict[str, Any] = {"spec": pod}
    if labels:
        template["metadata"] = {"labels": dict(labels)}
    spec: dict[str, Any] = {"template": template}
    if kind != "Job" and labels:
        spec["selector"] = {"matchLabels": dict(labels)}
    if kind in ("Deployment", "StatefulSet", "DaemonSet") and not labels:
        template["metadata"] = {"labels": {"app": "w"}}
        spec["selector"] = {"matchLabels": {"app": "w"}}
    if kind == "Deployment":
        spec["replicas"] = draw(st.integers(0, 5))
        strategy = draw(strategies)
        if strategy is not None:
            spec["strategy"] = copy.deepcopy(strategy)
    if kind == "StatefulSet":
        spec["serviceName"] = "w"
    group = "batch/v1" if kind == "Job" else "apps/v1"
    return {"apiVersion": group, "kind": kind, "metadata": meta, "spec": spec}


# ---------------------------------------------------------------- checks


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))
    else:
        yield path, value


def at(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def documented_change(path: tuple[Any, ...], value: Any) -> bool:
    """Leaves that merge mode may change (docs/policies.md, "Merge modes")."""
    if path and path[-1] == "priority":  # stale integer priority dropped for priorityClassName
        return True
    if "rollingUpdate" in path and value == "25%":  # API defaults may be replaced by rollout rules
        return True
    if "strategy" in path and path[-1] == "type":
        return False
    return "nodeSelectorTerms" in path  # ANDed terms, checked separately as subsets


def _terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]
    required = spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
    return required.get("nodeSelectorTerms", [])


def assert_nothing_removed(before: dict[str, Any], after: dict[str, Any]) -> None:
    for path, value in leaves(before):
        if documented_change(path, value):
            continue
        try:
            found = at(after, path)
        except (KeyError, IndexError, TypeError):
            raise AssertionError(f"{'/'.join(map(str, path))} was removed") from None
        if value == {} or value == []:  # an empty container may be filled, never replaced
            assert type(found) is type(value), f"{'/'.join(map(str, path))} changed type"
            continue
        if path[:3] == ("metadata", "annotations", "placement.novasphere.dev/applied"):
            assert set(value.split(",")) <= set(found.split(",")), "applied names dropped"
            continue
        assert found == value, f"{'/'.join(map(str, path))} changed from {value!r} to {found!r}"
    out_terms = _terms(after)
    for term in _terms(before):
        expressions = term.get("matchExpressions", [])
        assert any(all(e in t.get("matchExpressions", []) for e in expressions) for t in out_terms), f"term {term} lost"


# A cluster with three schedulable nodes, two known priority classes: safe rollouts count
# eligible nodes (rule 2) and preemptionPolicy is written only for a class that carries it.
CLUSTER = StaticClusterView(
    nodes=[
        {"kind": "Node", "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}", "zone": "a"}}}
        for i in range(3)
    ],
    priority_classes={"high": {"value": 1000, "preemptionPolicy": "Never"}, "low": {"value": 10}},
)


def _admit(obj: dict[str, Any], policies: PolicySet, cluster: StaticClusterView | None = None) -> admission.Outcome:
    return admission.admit(review.request_for_object(obj, namespace="prod"), policies=policies, cluster=cluster)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Any workload, one to three policies, with and without a view of the cluster.
ANY_ADMISSION = given(obj=workloads(), specs=st.lists(policy_specs, min_size=1, max_size=3),
                      cluster=st.sampled_from([None, CLUSTER]))


@SETTINGS
@ANY_ADMISSION
def test_patch_reproduces_output_and_a_second_pass_changes_nothing(
    obj: dict[str, Any], specs: list[dict[str, Any]], cluster: StaticClusterView | None
) -> None:
    policies = load_policies(specs)
    before = copy.deepcopy(obj)
    out = _admit(obj, policies, cluster)
    assert out.result in ("patched", "unchanged"), out.warnings
    assert obj == before, "the request's object was modified"
    assert jsonpatch.apply_patch(before, out.patch) == out.object
    again = _admit(copy.deepcopy(out.object), policies, cluster)
    assert again.patch == [], f"second pass changed {again.patch}"
    # Clipped and without repeats: the server sends them as they are (``review.encoded_answer``).
    assert all(len(w) < 120 for w in out.warnings) and out.warnings == clip_all(out.warnings)


@SETTINGS
@ANY_ADMISSION
def test_admission_never_edits_what_a_policy_compiled(
    obj: dict[str, Any], specs: list[dict[str, Any]], cluster: StaticClusterView | None
) -> None:
    # A policy's compiled entries go into every object it places as they are (engine.working):
    # an edit of one in place would change the policy for every later object.
    policies = load_policies(specs)
    compiled = [copy.deepcopy(fragments.compiled(p)) for p in policies.policies]
    out = _admit(obj, policies, cluster)
    assert out.object is not None
    _admit(out.object, policies, cluster)  # the output, which holds those very entries, admitted again
    assert [fragments.compiled(p) for p in policies.policies] == compiled


@SETTINGS
@given(obj=workloads(), specs=st.lists(policy_specs, min_size=1, max_size=3))
def test_merge_policies_never_remove_what_the_author_wrote(obj: dict[str, Any], specs: list[dict[str, Any]]) -> None:
    policies = load_policies([{**s, "onConflict": "merge"} for s in specs])
    out = _admit(copy.deepcopy(obj), policies)
    assert out.object is not None
    before = copy.deepcopy(obj)
    if _replaced_as_never_finishing(obj, out):
        before["spec"]["strategy"].pop("rollingUpdate")  # checked by the helper instead
    assert_nothing_removed(before, out.object)


def _replaced_as_never_finishing(obj: dict[str, Any], out: admission.Outcome) -> bool:
    """Safe rollouts replace an author's rolling-update values only when, with the required self
    anti-affinity the policies added and no spare domain known, they can never finish: they
    resolve (as the Deployment controller resolves them) to no unavailable replica. The output
    then says so, and holds rule 3's values."""
    ru = ((obj.get("spec") or {}).get("strategy") or {}).get("rollingUpdate")
    if not ru or not any("could never finish" in w for w in out.warnings):
        return False
    replicas = obj["spec"].get("replicas", 1)
    _, unavailable = resolve(ru.get("maxSurge", "25%"), ru.get("maxUnavailable", "25%"), replicas)
    assert unavailable == 0, f"the author's {ru} could finish, yet were replaced"
    assert out.object is not None
    assert out.object["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=workloads(), specs=st.lists(policy_specs, min_size=1, max_size=2))
def test_outputs_validate_against_the_kubernetes_schemas(obj: dict[str, Any], specs: list[dict[str, Any]]) -> None:
    kubernetes_validate.validate(obj, "1.31", strict=True)  # the generator's own input is valid
    out = _admit(obj, load_policies(specs))
    assert out.object is not None
    kubernetes_validate.validate(out.object, "1.31", strict=True)


@pytest.mark.parametrize(
    "spec",
    [
        {"placement": {"nodeAffinity": {"required": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        {"placement": {"podAntiAffinity": {"spread": "required"}}, "rollout": {"mode": "safe"}},
        {"placement": {"capacity": {"prefer": "spot", "provider": "aks"}}, "scheduling": {"priorityClassName": "high"}},
    ],
)
def test_objects_without_any_labels_or_annotations_are_mutated_validly(spec: dict[str, Any]) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}, "spec": _pod_spec({})}
    out = _admit(copy.deepcopy(obj), load_policies([spec]))
    assert out.result == "patched"
    assert jsonpatch.apply_patch(obj, out.patch) == out.object
    kubernetes_validate.validate(out.object, "1.31", strict=True)
    assert _admit(copy.deepcopy(out.object), load_policies([spec])).patch == []


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=workloads(), specs=st.lists(policy_specs, min_size=1, max_size=3), cluster=st.sampled_from([None, CLUSTER]))
def test_what_policies_write_keeps_the_shapes_the_engine_reads(
    obj: dict[str, Any], specs: list[dict[str, Any]], cluster: StaticClusterView | None
) -> None:
    # Admission checks the object's shapes once and no policy application checks again: that
    # is sound only if no policy writes a field of another shape.
    target = BUILTIN.for_object(obj)
    assert target is not None
    shapes.check(obj, target)
    out = _admit(obj, load_policies(specs), cluster)
    assert out.object is not None
    shapes.check(out.object, target)
