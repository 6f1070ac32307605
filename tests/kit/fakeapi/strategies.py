"""Per-kind registry strategies: what PrepareForCreate / PrepareForUpdate do for each type, and
the status subresource strategies. Sources (kubernetes/kubernetes):

  pkg/registry/core/pod/strategy.go        create: status reset to {phase: Pending, qosClass};
                                           generation=1 and bumped on spec change (1.33+ pods);
                                           update keeps status; status update keeps spec,
                                           deletionTimestamp and ownerReferences.
  pkg/registry/core/node/strategy.go       create keeps status; update keeps status; status
                                           update keeps spec.
  pkg/registry/core/namespace/strategy.go  create: status.phase Active, spec.finalizers
                                           [kubernetes], label kubernetes.io/metadata.name (1.21+);
                                           update keeps spec.finalizers and status.
  pkg/registry/policy/poddisruptionbudget/strategy.go, apps/{deployment,replicaset}/strategy.go
                                           create: status reset, generation=1; update keeps status,
                                           generation+1 when spec changes; status update keeps spec
                                           and metav1.ResetObjectMetaForStatus.
  plugin/pkg/admission/priority/admission.go   pods get spec.priority from their PriorityClass
                                           (403 "no PriorityClass with name %s was found").
"""
from __future__ import annotations

import copy
from typing import Any

from .errors import JSON, forbidden

# metav1.ResetObjectMetaForStatus
_STATUS_META_KEEP = ("deletionTimestamp", "generation", "labels", "annotations", "finalizers", "ownerReferences")
SYSTEM_PRIORITY = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


def pod_generation(minor: int) -> bool:
    return minor >= 33


# Custom resources with a status subresource (apiextensions-apiserver customResourceStrategy):
# create drops the status; update keeps the old status and bumps the generation when anything
# but metadata and status changed; a status update changes the status alone.
CUSTOM_WITH_STATUS = ("PlacementPolicy",)


def has_generation(kind: str, minor: int) -> bool:
    return (kind in ("PodDisruptionBudget", "Deployment", "ReplicaSet", *CUSTOM_WITH_STATUS)
            or (kind == "Pod" and pod_generation(minor)))


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def qos_class(pod: JSON) -> str:
    """pkg/apis/core/helper/qos GetPodQOS, for requests/limits of cpu and memory."""
    containers = list((pod.get("spec") or {}).get("containers") or []) + list(
        (pod.get("spec") or {}).get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in containers:
        res = _dict(c.get("resources") if isinstance(c, dict) else None)
        req, lim = _dict(res.get("requests")), _dict(res.get("limits"))
        for name in ("cpu", "memory"):
            if name in req or name in lim:
                any_set = True
            if name not in lim or (name in req and req[name] != lim[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def prepare_for_create(kind: str, obj: JSON, minor: int, lookup_priority: Any = None) -> None:
    meta = obj.setdefault("metadata", {})
    if has_generation(kind, minor):
        meta["generation"] = 1
    if kind == "Pod":
        spec = obj.setdefault("spec", {})
        for key, value in (("restartPolicy", "Always"), ("dnsPolicy", "ClusterFirst"),
                           ("schedulerName", "default-scheduler"), ("terminationGracePeriodSeconds", 30)):
            spec.setdefault(key, value)
        if lookup_priority is not None:
            _admit_priority(obj, lookup_priority)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}
    elif kind == "Namespace":
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
        if minor >= 21:
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
    elif kind == "PodDisruptionBudget":
        # the zero PodDisruptionBudgetStatus: its int32 counters have no omitempty
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    elif kind in ("Deployment", "ReplicaSet"):
        obj["status"] = {}
    elif kind in CUSTOM_WITH_STATUS:
        obj.pop("status", None)


def _admit_priority(pod: JSON, lookup: Any) -> None:
    """plugin/pkg/admission/priority admitPod, for creates."""
    spec, name = pod["spec"], pod["metadata"].get("name", "")
    class_name = spec.get("priorityClassName")
    if class_name:
        pc = lookup(class_name)
        if pc is None and class_name not in SYSTEM_PRIORITY:
            raise forbidden("", "pods", name, f"no PriorityClass with name {class_name} was found")
        priority = pc.get("value", 0) if pc is not None else SYSTEM_PRIORITY[class_name]
        policy = pc.get("preemptionPolicy") if pc is not None else "PreemptLowerPriority"
    else:  # getDefaultPriority: the globalDefault class, else 0 and PreemptLowerPriority
        default = lookup(None)
        priority = default.get("value", 0) if default is not None else 0
        policy = default.get("preemptionPolicy") if default is not None else "PreemptLowerPriority"
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
    if spec.get("priority") is not None and spec["priority"] != priority:
        raise forbidden("", "pods", name, f"the integer value of priority ({spec['priority']}) must not be provided "
                        f"in pod spec; priority admission controller computed {priority} from the given "
                        "PriorityClass name")
    spec["priority"] = priority
    if policy:
        if spec.get("preemptionPolicy") not in (None, policy):
            raise forbidden("", "pods", name, f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) "
                            f"must not be provided in pod spec; priority admission controller computed {policy} "
                            "from the given PriorityClass name")
        spec["preemptionPolicy"] = policy


def prepare_for_update(kind: str, new: JSON, old: JSON, minor: int) -> None:
    """The main resource: status changes are ignored, generation follows spec changes."""
    meta, old_meta = new.setdefault("metadata", {}), old.get("metadata") or {}
    if "generation" in old_meta:
        meta["generation"] = old_meta["generation"]
    else:
        meta.pop("generation", None)
    if kind in ("Pod", "Node", "Namespace", "PodDisruptionBudget", "Deployment", "ReplicaSet", *CUSTOM_WITH_STATUS):
        _keep(new, old, "status")
    if kind == "Namespace":
        spec = new.setdefault("spec", {})
        old_final = (old.get("spec") or {}).get("finalizers")
        if old_final is None:
            spec.pop("finalizers", None)
        else:
            spec["finalizers"] = old_final
        if minor >= 21:
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
    if kind in CUSTOM_WITH_STATUS:
        content = {k: v for k, v in new.items() if k not in ("metadata", "status")}
        if content != {k: v for k, v in old.items() if k not in ("metadata", "status")}:
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
    elif has_generation(kind, minor) and new.get("spec") != old.get("spec"):
        meta["generation"] = int(old_meta.get("generation") or 0) + 1


def prepare_for_status_update(kind: str, new: JSON, old: JSON) -> None:
    """The status subresource: only status (and, for pods/nodes, the metadata they allow) changes."""
    meta, old_meta = new.setdefault("metadata", {}), old.get("metadata") or {}
    if kind in CUSTOM_WITH_STATUS:  # customResourceStatusStrategy: the old object, the new status
        status, managed_fields = new.get("status"), meta.get("managedFields")
        new.clear()
        new.update(copy.deepcopy(old))
        _set_or_drop(new, "status", status)
        _set_or_drop(new["metadata"], "managedFields", managed_fields)
        return
    _keep(new, old, "spec")
    if kind == "Pod":
        for key in ("deletionTimestamp", "ownerReferences"):
            _keep(meta, old_meta, key)
        status = new.get("status")
        if isinstance(status, dict) and not status.get("qosClass") and (old.get("status") or {}).get("qosClass"):
            status["qosClass"] = old["status"]["qosClass"]
    elif kind != "Node":
        for key in _STATUS_META_KEEP:
            _keep(meta, old_meta, key)
    if "generation" in old_meta:
        meta["generation"] = old_meta["generation"]


def _set_or_drop(obj: JSON, key: str, value: Any) -> None:
    if value is None:
        obj.pop(key, None)
    else:
        obj[key] = value


def _keep(new: JSON, old: JSON, key: str) -> None:
    if key in old:
        new[key] = copy.deepcopy(old[key])
    else:
        new.pop(key, None)


def is_pod_ready(pod: JSON) -> bool:
    """podutil.IsPodReady: the Ready condition is True."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_phase(pod: JSON) -> str:
    phase = (pod.get("status") or {}).get("phase")
    return phase if isinstance(phase, str) else ""
