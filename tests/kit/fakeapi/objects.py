"""Small builders for the objects tests put into the fake server (plain dicts, kind/apiVersion set)."""
from __future__ import annotations

from typing import Any

JSON = dict[str, Any]


def node(name: str, *, unschedulable: bool = False, taints: list[JSON] | None = None, **labels: str) -> JSON:
    spec: JSON = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}, "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, namespace: str = "default", *, node_name: str = "", phase: str = "Running", ready: bool = True,
        labels: dict[str, str] | None = None, owner: JSON | None = None) -> JSON:
    meta: JSON = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node_name, "containers": [{"name": "app", "image": "app:1"}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(name: str, namespace: str = "default", *, match: dict[str, str] | None = None,
        min_available: int | str | None = None, max_unavailable: int | str | None = None,
        status: JSON | None = None, api_version: str = "policy/v1", generation: int = 1,
        unhealthy_pod_eviction_policy: str | None = None) -> JSON:
    spec: JSON = {"selector": {"matchLabels": dict(match or {})}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if unhealthy_pod_eviction_policy:
        spec["unhealthyPodEvictionPolicy"] = unhealthy_pod_eviction_policy
    out: JSON = {"apiVersion": api_version, "kind": "PodDisruptionBudget",
                 "metadata": {"name": name, "namespace": namespace, "generation": generation}, "spec": spec}
    if status is not None:
        out["status"] = status
    return out


def budget_status(allowed: int, current: int, desired: int, expected: int, observed: int = 1) -> JSON:
    return {"observedGeneration": observed, "disruptionsAllowed": allowed, "currentHealthy": current,
            "desiredHealthy": desired, "expectedPods": expected}


def lease(name: str, namespace: str = "kube-system", holder: str = "") -> JSON:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}
