"""The policy and the workloads the end-to-end tier sends through the API server, and how to tell
whether an object carries the policy's placement. ``test_offline_expectations`` checks these
expectations against ``admission.admit`` without any API server, so the tier cannot drift.
"""
from __future__ import annotations

from typing import Any

from webhook import ANNOTATION_APPLIED, ANNOTATION_SKIP

POLICY_NAME = "e2e-placement"
POOL_LABEL = "e2e.novasphere.dev/pool"
POLICY_YAML = f"""\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: {POLICY_NAME}
spec:
  description: End-to-end tier - a node pool and one replica per node where possible.
  match:
    kinds: [Deployment, StatefulSet, kubevirt.io/v1/VirtualMachine]
  placement:
    nodeSelector:
      {POOL_LABEL}: general
    podAntiAffinity:
      spread: preferred
"""

# A policy added while the tier runs, to change the policy set between a CREATE and an UPDATE.
LATER_POLICY_NAME = "e2e-later"
LATER_TOLERATION = {"key": "e2e.novasphere.dev/later", "operator": "Exists", "effect": "NoSchedule"}
LATER_POLICY_YAML = f"""\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: {LATER_POLICY_NAME}
spec:
  description: End-to-end tier - a policy that arrives after the workloads were created.
  match:
    kinds: [Deployment]
  placement:
    tolerations:
    - {{key: {LATER_TOLERATION["key"]}, operator: Exists, effect: NoSchedule}}
"""

# The pod-template annotation ``kubectl rollout restart`` sets: a change of the template.
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"

# kind -> (API group, version, plural) as the API server serves them.
RESOURCES: dict[str, tuple[str, str, str]] = {
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "VirtualMachine": ("kubevirt.io", "v1", "virtualmachines"),
}


def _pod_template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
    }


def workload(kind: str, name: str, *, skip: bool = False) -> dict[str, Any]:
    """A small valid object of ``kind``; ``skip`` adds the opt-out annotation."""
    metadata: dict[str, Any] = {"name": name, "labels": {"app": name}}
    if skip:
        metadata["annotations"] = {ANNOTATION_SKIP: "true"}
    group, version, _plural = RESOURCES[kind]
    obj: dict[str, Any] = {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": metadata}
    if kind == "Deployment":
        obj["spec"] = {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": _pod_template(name)}
    elif kind == "StatefulSet":
        obj["spec"] = {"replicas": 2, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                       "template": _pod_template(name)}
    else:
        obj["spec"] = {
            "runStrategy": "Halted",
            "template": {
                "metadata": {"labels": {"kubevirt.io/vm": name, "app": name}},
                "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}},
            },
        }
    return obj


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def placed(obj: dict[str, Any]) -> bool:
    """The object carries the policy's placement and names the policy as applied."""
    spec = pod_spec(obj)
    annotations = obj.get("metadata", {}).get("annotations") or {}
    spread = (spec.get("affinity") or {}).get("podAntiAffinity", {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    )
    return (
        (spec.get("nodeSelector") or {}).get(POOL_LABEL) == "general"
        and bool(spread)
        and POLICY_NAME in annotations.get(ANNOTATION_APPLIED, "").split(",")
    )


def untouched(obj: dict[str, Any]) -> bool:
    """Nothing of the policy is on the object."""
    spec = pod_spec(obj)
    annotations = obj.get("metadata", {}).get("annotations") or {}
    return POOL_LABEL not in (spec.get("nodeSelector") or {}) and ANNOTATION_APPLIED not in annotations


def tolerates_later(obj: dict[str, Any]) -> bool:
    """The later policy's toleration is on the object's pods."""
    return LATER_TOLERATION in (pod_spec(obj).get("tolerations") or [])
