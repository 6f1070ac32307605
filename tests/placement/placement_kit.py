"""Builders for the placement tests: policies as the loader hands them over, workloads,
and a scheduler-faithful scoring of preferred node terms."""
from __future__ import annotations

import copy
from typing import Any

from webhook.cluster.view import ClusterView, term_matches
from webhook.engine.placement import Applied, apply_policy
from webhook.policy.policyset import Policy
from webhook.kube.kinds import BUILTIN, Target, get_path


def make_policy(name: str = "p", *, on_conflict: str = "merge", **spec: Any) -> Policy:
    """A Policy with the defaults the loader fills in (see docs: "Policy spec as plain data")."""
    spec = copy.deepcopy(spec)
    spec.setdefault("order", 0)
    spec["onConflict"] = on_conflict
    spec.setdefault("enforcement", "patch")
    placement = spec.get("placement") or {}
    anti = placement.get("podAntiAffinity")
    if anti and anti.get("spread"):
        anti.setdefault("topologyKey", "kubernetes.io/hostname")
        anti.setdefault("weight", 100)
    capacity = placement.get("capacity")
    if capacity:
        capacity.setdefault("weight", 50)
        capacity.setdefault("provider", "generic")
    if spec.get("rollout"):
        spec["rollout"].setdefault("mode", "safe")
    return Policy(name=name, spec=spec, order=spec["order"])


def deployment(
    *,
    name: str = "web",
    labels: dict[str, str] | None = None,
    pod_spec: dict[str, Any] | None = None,
    replicas: int | None = 3,
    strategy: dict[str, Any] | None = None,
    selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    labels = {"app": name} if labels is None else labels
    spec: dict[str, Any] = {
        "selector": selector if selector is not None else {"matchLabels": dict(labels)},
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": pod_spec if pod_spec is not None else {"containers": [{"name": "app", "image": "nginx"}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if strategy is not None:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "prod"}, "spec": spec}


def target_of(obj: dict[str, Any]) -> Target:
    target = BUILTIN.for_object(obj)
    assert target is not None, obj.get("kind")
    return target


def apply(obj: dict[str, Any], policy: Policy, cluster: ClusterView | None = None) -> Applied:
    return apply_policy(obj, policy=policy, target=target_of(obj), cluster=cluster)



def preferred_score(prefs: list[dict[str, Any]], node: dict[str, Any]) -> int:
    """The NodeAffinity score plugin's raw score: the weights of the matching preferred terms."""
    return sum(p["weight"] for p in prefs if term_matches(p["preference"], node))


def node(name: str = "n1", **labels: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}


def pod_spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    spec = get_path(obj, target_of(obj).pod_spec or ())
    assert isinstance(spec, dict)
    return spec


def required_terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    na = (pod_spec_of(obj).get("affinity") or {}).get("nodeAffinity") or {}
    return list((na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
