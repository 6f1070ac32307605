"""Builders shared by the tests in this folder: policies as the loader hands them over,
typical workloads, and a fake engine with a tiny, predictable placement."""
from __future__ import annotations

from typing import Any

from webhook.engine import placement as engine
from webhook.policy.policyset import Policy, PolicySet
from webhook.kube.kinds import BUILTIN, Target


def fake_apply(obj: dict, *, policy: Policy, target: Target, cluster: Any) -> Any:
    """Sets the policy's ``placement.nodeSelector`` keys that the pod spec lacks."""
    wanted = policy.spec.get("placement", {}).get("nodeSelector", {})
    if wanted.get("fail") == "placement":
        # Mutate first, then fail: admission must still leave no trace of this policy.
        pod = _pod_spec(obj, target)
        pod.setdefault("nodeSelector", {})["half"] = "done"
        raise engine.PlacementError("more than 64 required node selector terms")
    if wanted.get("fail") == "crash":
        raise KeyError("boom")
    pod = _pod_spec(obj, target)
    current = pod.get("nodeSelector") or {}
    missing = {k: v for k, v in wanted.items() if k not in current}
    if not missing:
        return engine.Applied(changed=False, warnings=[])
    pod["nodeSelector"] = {**current, **missing}
    return engine.Applied(changed=True, warnings=[f"{policy.name}: set nodeSelector {sorted(missing)}"])


def _pod_spec(obj: dict, target: Target) -> dict:
    cur = obj
    for key in target.pod_spec or ("spec",):
        cur = cur.setdefault(key, {})
    return cur


def policy(name: str, *, order: int = 0, targets: tuple[str, ...] | None = None, **spec: Any) -> Policy:
    """A ``Policy`` as the loader would hand it over, with the loader's defaults filled in."""
    spec = {"order": order, "onConflict": "merge", "enforcement": "patch", **spec}
    resolved = None
    if targets is not None:
        resolved = frozenset(t for ref in targets for t in BUILTIN.resolve(ref))
        spec.setdefault("match", {})["kinds"] = list(targets)
    return Policy(name=name, spec=spec, order=order, targets=resolved)


def policy_set(*policies: Policy) -> PolicySet:
    return PolicySet(tuple(policies))


def deployment(name: str = "web", *, namespace: str | None = "prod", **extra_meta: Any) -> dict:
    """A typical Deployment with a selector, pod labels and one container."""
    meta: dict[str, Any] = {"name": name, **extra_meta}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": "nginx:1.27"}]},
            },
        },
    }
