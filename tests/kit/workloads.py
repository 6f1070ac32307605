"""Workloads and nodes as the API server stores them: the one Deployment builder of the tests."""
from __future__ import annotations

import copy
from typing import Any

from webhook.kube.kinds import BUILTIN, Target
from webhook.kube.pointers import get_path


def deployment(
    name: str = "web",
    *,
    namespace: str | None = "prod",
    pod_labels: dict[str, str] | None = None,
    replicas: int | None = 3,
    selector: dict[str, Any] | None = None,
    pod_spec: dict[str, Any] | None = None,
    strategy: dict[str, Any] | None = None,
    pad: int = 0,
    **metadata: Any,
) -> dict[str, Any]:
    """A Deployment whose pods are labelled ``pod_labels`` (default ``app: <name>``) and
    selected by them; ``pad`` grows the object by an env var of that many bytes; other
    keywords (``labels``, ``annotations``, ...) go into the Deployment's own ``metadata``."""
    labels = {"app": name} if pod_labels is None else pod_labels
    container: dict[str, Any] = {"name": "app", "image": "nginx"}
    if pad:
        container["env"] = [{"name": "PAD", "value": "x" * pad}]
    meta: dict[str, Any] = {"name": name, **metadata}
    if namespace is not None:
        meta["namespace"] = namespace
    spec: dict[str, Any] = {
        "selector": selector if selector is not None else {"matchLabels": dict(labels)},
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": copy.deepcopy(pod_spec) if pod_spec is not None else {"containers": [container]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if strategy is not None:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def node(name: str = "n1", **labels: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}


def target_of(obj: dict[str, Any]) -> Target:
    target = BUILTIN.for_object(obj)
    assert target is not None, obj.get("kind")
    return target


def pod_spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    spec = get_path(obj, target_of(obj).pod_spec or ())
    assert isinstance(spec, dict)
    return spec


def required_terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    na = (pod_spec_of(obj).get("affinity") or {}).get("nodeAffinity") or {}
    return list((na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])


def workload(
    target: Target, name: str = "web", *, namespace: str = "prod", owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An object of ``target``'s kind with a one-container pod spec and ``app: <name>`` pod
    labels at the kind's own paths; ``owner`` becomes its only ownerReference."""
    obj: dict[str, Any] = {"apiVersion": target.api_version, "kind": target.kind,
                           "metadata": {"name": name, "namespace": namespace}}
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner]
    if target.pod_spec is not None:
        _put(obj, target.pod_spec, {"containers": [{"name": "app", "image": "nginx"}]})
    _put(obj, target.pod_labels, {"app": name})
    return obj


def _put(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    container = obj
    for key in path[:-1]:
        container = container.setdefault(key, {})
    container[path[-1]] = value
