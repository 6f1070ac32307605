"""A workload of any kind as the pods its controller would create for the scheduler.

Each kind of docs/policies.md's table becomes a pod and a replica count, the way its
controller makes pods:

- Deployment: the template, labelled with its ``pod-template-hash``, owned by the new
  ReplicaSet (whose selector, the Deployment's plus the hash, is the system default spread
  constraints' selector: ``DefaultSelector`` in pkg/scheduler/framework/plugins/helper/spread.go
  reads the owning ReplicaSet's or StatefulSet's selector); ReplicaSet and StatefulSet: the
  template, their own selector; ``spec.replicas`` (default 1) pods.
- DaemonSet: one pod per node the controller decides should run one (``NodeShouldRunDaemonPod``
  in pkg/controller/daemon: the node name, the required node affinity with the nodeSelector,
  and NoSchedule/NoExecute taints against the pod's tolerations), each with the tolerations
  ``AddOrUpdateDaemonPodTolerations`` adds and its required node affinity replaced by
  ``matchFields metadata.name In [node]`` (``ReplaceDaemonSetPodNodeNameNodeAffinity``).
- Job (and a CronJob's next Job): ``min(parallelism, completions)`` pods running at once
  (``parallelism`` defaults to 1); a suspended Job creates none.
- Pod, VirtualMachineInstance, VirtualMachine, Wukong: one.
- KubeVirt kinds: the virt-launcher pod carries the VMI spec's nodeSelector, affinity,
  tolerations, topology spread, priority class and scheduler; it requests
  ``domain.resources.requests`` (memory defaulting to ``domain.memory.guest``), without the
  launcher's own overhead, which KubeVirt computes from the VM's devices.
- Wukong: the pod spec its scheduling API stands for (``wukong_pod_spec``).

The pod's priority is what the Priority admission plugin would give it
(plugin/pkg/admission/priority: the named class's value, else the globalDefault class's, else
0); an unknown class is a note, as the API server would refuse the pod.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.engine.placement import workload_selector
from webhook.kube import nodeterms, resourcelabels
from webhook.kube.affinity import PREFERRED, REQUIRED
from webhook.kube.deployment import REVISION_KEY
from webhook.kube.kinds import Target
from webhook.kube.pointers import get_path
from webhook.scheduler.nodeaffinity import RequiredNodeAffinity, node_identity
from webhook.scheduler.rollouts import template_hash
from webhook.scheduler.taints import find_untolerated

__all__ = ["BUILTIN_PRIORITY_CLASSES", "Workload", "WorkloadError", "build", "wukong_pod_spec"]

HOSTNAME = "kubernetes.io/hostname"
# pkg/apis/scheduling: the classes every API server creates (SystemCriticalPriority = 2e9).
BUILTIN_PRIORITY_CLASSES: Mapping[str, int] = {"system-node-critical": 2000001000,
                                               "system-cluster-critical": 2000000000}
# The scheduling fields of a KubeVirt VMI spec that the virt-launcher pod carries over.
_VMI_POD_FIELDS = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "priorityClassName",
                   "schedulerName")
# pkg/controller/daemon/util.AddOrUpdateDaemonPodTolerations.
_DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
_HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                            "effect": "NoSchedule"}


class WorkloadError(ValueError):
    """The object cannot be turned into pods (no pod spec, a pod spec that is not a mapping)."""


@dataclass
class Workload:
    """The pods to place, in order, and what the simulation needs besides.

    ``own_selector`` is the workload's selector over pods in its namespace (None: it has no
    usable one): what an update replaces. ``group`` is the kind's API group, which a pod's
    controller reference names. ``notes`` are the assumptions the translation made.
    """

    kind: str
    namespace: str
    name: str
    pods: list[dict[str, Any]]
    default_selector: dict[str, Any] | None
    own_selector: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    group: str = ""
    uid: str | None = None


def build(obj: Mapping[str, Any], target: Target, *, namespace: str = "default",
          priority_classes: Mapping[str, Mapping[str, Any]] | None = None,
          nodes: Sequence[Mapping[str, Any]] = (), replicas: int | None = None) -> Workload:
    """The pods ``obj`` (of kind ``target``) would get, ``replicas`` overriding its count."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or target.kind.lower())
    ns = str(meta.get("namespace") or namespace)
    notes: list[str] = []
    spec, labels = _pod_spec(obj, target, notes)
    selector = workload_selector(dict(obj), target)
    default_selector: dict[str, Any] | None = None
    labels = dict(labels)
    if target.kind == "Deployment" and target.group == "apps":
        revision = template_hash(get_path(obj, ("spec", "template")) or {})
        labels[REVISION_KEY] = revision
        raw = get_path(obj, ("spec", "selector"))
        if isinstance(raw, Mapping):
            default_selector = {**raw, "matchLabels": {**(raw.get("matchLabels") or {}), REVISION_KEY: revision}}
    elif target.kind in ("ReplicaSet", "StatefulSet") and target.group == "apps":
        raw = get_path(obj, ("spec", "selector"))
        default_selector = dict(raw) if isinstance(raw, Mapping) else None
    _admit_priority(spec, priority_classes or {}, notes)
    template = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": ns, "labels": labels}, "spec": spec}
    if target.kind == "DaemonSet" and target.group == "apps":
        if replicas is not None:
            notes.append("--replicas does not apply to a DaemonSet: it runs one pod per eligible node")
        pods = _daemon_pods(template, name, nodes)
    else:
        count = _count(obj, target, notes) if replicas is None else replicas
        single = count == 1 and _one_pod(target)
        pods = [_named(template, name if single else f"{name}-{i}") for i in range(count)]
    uid = meta.get("uid")
    return Workload(target.kind, ns, name, pods, default_selector, selector, notes, target.group,
                    str(uid) if uid else None)


def _named(template: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {**template, "metadata": {**template["metadata"], "name": name}}


def _pod_spec(obj: Mapping[str, Any], target: Target, notes: list[str]) -> tuple[dict[str, Any], Mapping[str, Any]]:
    labels = get_path(obj, target.pod_labels)
    labels = labels if isinstance(labels, Mapping) else {}
    if target.native == "wukong":
        return wukong_pod_spec(obj, notes), labels
    assert target.pod_spec is not None  # only native kinds have none
    spec = get_path(obj, target.pod_spec)
    if spec is None:
        raise WorkloadError(f"{target.kind} has no pod spec at /{'/'.join(target.pod_spec)}")
    if not isinstance(spec, Mapping):
        raise WorkloadError(f"/{'/'.join(target.pod_spec)} is a {type(spec).__name__}, not a pod spec")
    if target.kubevirt:
        return _launcher_spec(spec, notes), labels
    return copy.deepcopy(dict(spec)), labels


def _count(obj: Mapping[str, Any], target: Target, notes: list[str]) -> int:
    spec = obj.get("spec") or {}
    if target.kind in ("Job", "CronJob") and target.group == "batch":
        job = spec if target.kind == "Job" else get_path(obj, ("spec", "jobTemplate", "spec")) or {}
        if job.get("suspend") is True:
            notes.append(f"the {target.kind} is suspended: it creates no pods until resumed")
            return 0
        parallelism = _int(job.get("parallelism"), 1)
        completions = job.get("completions")
        # Job controller: active pods wanted = min(parallelism, completions - succeeded).
        return min(parallelism, _int(completions, parallelism)) if completions is not None else parallelism
    if _one_pod(target):
        return 1
    return _int(spec.get("replicas"), 1)


def _one_pod(target: Target) -> bool:
    """The object is one pod (Pod, VirtualMachineInstance) or runs one (VirtualMachine, Wukong)."""
    return target.pod_spec == ("spec",) or target.native is not None or (
        target.kind == "VirtualMachine" and target.group == "kubevirt.io")


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _admit_priority(spec: dict[str, Any], classes: Mapping[str, Mapping[str, Any]], notes: list[str]) -> None:
    """What the Priority admission plugin writes on CREATE (``admitPod``): the class's value
    and preemptionPolicy, the globalDefault class's when none is named, else priority 0."""
    name = spec.get("priorityClassName")
    if not name:
        default = next((c for c in classes.values() if c.get("globalDefault")), None)
        if default is not None:
            spec["priority"] = int(default.get("value") or 0)
            if default.get("preemptionPolicy"):
                spec["preemptionPolicy"] = default["preemptionPolicy"]
        return
    if name in classes:
        spec["priority"] = int(classes[name].get("value") or 0)
        if classes[name].get("preemptionPolicy"):
            spec["preemptionPolicy"] = classes[name]["preemptionPolicy"]
    elif name in BUILTIN_PRIORITY_CLASSES:
        spec["priority"] = BUILTIN_PRIORITY_CLASSES[name]
    else:
        spec["priority"] = 0
        notes.append(f"PriorityClass {name} is not in the cluster state: the API server would refuse the pod "
                     f"(no PriorityClass with name {name} was found); it is placed with priority 0")


def _daemon_pods(template: Mapping[str, Any], name: str, nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One pod per node that should run one (``NodeShouldRunDaemonPod``), pinned to it."""
    spec = template["spec"]
    tolerations = list(spec.get("tolerations") or ())
    extra = [*_DAEMON_TOLERATIONS, *([_HOST_NETWORK_TOLERATION] if spec.get("hostNetwork") else [])]
    tolerations += [t for t in extra if not any(_same_toleration(t, mine) for mine in tolerations)]
    required = RequiredNodeAffinity.of(spec)
    pods: list[dict[str, Any]] = []
    for node in nodes:
        node_name = str((node.get("metadata") or {}).get("name") or "")
        taints = tuple((node.get("spec") or {}).get("taints") or ())
        if spec.get("nodeName") and spec["nodeName"] != node_name:
            continue
        if not required.matches(*node_identity(node)) or find_untolerated(taints, tolerations) is not None:
            continue
        pod_spec = {**spec, "tolerations": tolerations, "affinity": _pinned(spec.get("affinity"), node_name)}
        pods.append({**template, "metadata": {**template["metadata"], "name": f"{name}-{node_name}"},
                     "spec": pod_spec})
    return pods


def _same_toleration(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    # AddOrUpdateTolerationInPodSpec replaces a toleration with the same key, effect and operator.
    return all(a.get(k) == b.get(k) for k in ("key", "effect", "operator"))


def _pinned(affinity: Any, node_name: str) -> dict[str, Any]:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: the required node affinity becomes the one
    term ``metadata.name In [node]``; preferred terms and pod (anti-)affinity stay."""
    out = copy.deepcopy(dict(affinity)) if isinstance(affinity, Mapping) else {}
    node_affinity = dict(out.get("nodeAffinity") or {})
    node_affinity[REQUIRED] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    out["nodeAffinity"] = node_affinity
    return out


def _launcher_spec(vmi: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """The scheduling side of the virt-launcher pod KubeVirt makes for a VMI spec."""
    spec: dict[str, Any] = {k: copy.deepcopy(vmi[k]) for k in _VMI_POD_FIELDS if k in vmi}
    domain = vmi.get("domain") or {}
    requests = dict(((domain.get("resources") or {}).get("requests")) or {})
    guest = (domain.get("memory") or {}).get("guest")
    if "memory" not in requests and guest is not None:
        requests["memory"] = guest
    spec["containers"] = [{"name": "compute", "resources": {"requests": requests}}]
    notes.append("the virt-launcher pod is modelled with the VM's requests, without KubeVirt's memory overhead")
    return spec


def wukong_pod_spec(obj: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """The pod spec Wukong's scheduling API stands for (docs/policies.md, "Wukong VMs").

    ``nodeAffinity`` is node affinity; ``nodeAntiAffinity`` avoids every node a term matches,
    read as admission writes it for a pod (``kube.nodeterms``): each required term's negation
    is ANDed into the required terms, each preferred one's becomes preferred terms;
    ``resourceAffinity`` is the node-label terms of the resource labeler
    (``kube.resourcelabels``); the legacy ``highAvailability.nodeSelector`` is a nodeSelector
    and ``antiAffinity: true`` required hostname anti-affinity against pods with the VM's
    labels; ``schedulingPolicy`` gives priority and preemptionPolicy; ``spec.cpu``/
    ``spec.memory`` are the requests.
    """
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    scheduling = spec.get("scheduling") or {}
    affinity = scheduling.get("nodeAffinity") or {}
    anti = scheduling.get("nodeAntiAffinity") or {}
    resources = scheduling.get("resourceAffinity") or {}
    ha = spec.get("highAvailability") or {}
    policy = scheduling.get("schedulingPolicy") or {}
    terms: list[dict[str, Any]] = [copy.deepcopy(dict(t)) for t in affinity.get("required") or ()] or [{}]
    for group in (resourcelabels.resource_required(resources),
                  *(_avoid(term, notes) for term in anti.get("required") or ())):
        if group:  # no term: nothing required (no resource, or an anti term that avoids no node)
            terms = nodeterms.and_terms(terms, group)
    preferred = [copy.deepcopy(dict(p)) for p in affinity.get("preferred") or ()]
    preferred += resourcelabels.resource_preferred(resources)
    for entry in anti.get("preferred") or ():
        preferred += _avoid_preferred(entry or {}, notes)
    # Admission writes each preferred term once (fragments compiles them so): an equal term the
    # VM repeats, or one an anti term's negation repeats, is not scored twice.
    preferred = nodeterms.dedupe(preferred, nodeterms.preferred_key)
    pod: dict[str, Any] = {"containers": [{"name": "vm", "resources": {"requests": {
        k: str(spec[k]) for k in ("cpu", "memory") if spec.get(k) is not None}}}]}
    node_affinity: dict[str, Any] = {}
    if terms != [{}]:
        node_affinity[REQUIRED] = {"nodeSelectorTerms": terms}
    if preferred:
        node_affinity[PREFERRED] = preferred
    if node_affinity:
        pod["affinity"] = {"nodeAffinity": node_affinity}
    if isinstance(ha.get("nodeSelector"), Mapping) and ha["nodeSelector"]:
        pod["nodeSelector"] = {str(k): str(v) for k, v in ha["nodeSelector"].items()}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if ha.get("antiAffinity") is True and labels:
        pod.setdefault("affinity", {})["podAntiAffinity"] = {REQUIRED: [
            {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": HOSTNAME}]}
    for key in ("priority", "preemptionPolicy"):
        if policy.get(key) is not None:
            pod[key] = policy[key]
    if policy.get("schedulerName"):
        notes.append(f"Wukong's schedulingPolicy names the scheduler {policy['schedulerName']}: "
                     "placement is modelled as the kube-scheduler's default profile would do it")
    if spec.get("gpus"):
        notes.append("spec.gpus is not an extended resource of the model; requiredResources of type gpu are "
                     "(the gpu-available node label)")
    return pod


def _avoid(term: Mapping[str, Any], notes: list[str]) -> list[nodeterms.Term]:
    """The terms whose OR admits exactly the nodes a required anti term does not match
    (``nodeterms.negate_term``, what admission writes for a policy's nodeAntiAffinity); no
    term when it matches no node, so avoids none."""
    try:
        negated = nodeterms.negate_term(term)
    except nodeterms.NodeTermError as refused:
        notes.append(f"a nodeAntiAffinity term matches no node, so avoids none: {refused}")
        return []
    if negated is None:
        notes.append(f"a nodeAntiAffinity term matches no node, so avoids none: {_shown(term)}")
        return []
    _note_ordered(term, notes)
    return negated


def _avoid_preferred(entry: Mapping[str, Any], notes: list[str]) -> list[nodeterms.Term]:
    """A preferred anti term as the preferred terms admission would write for it
    (``nodeterms.negate_preferred``); none, with a note, where no weighted term can say it."""
    try:
        negated = nodeterms.negate_preferred(entry)
    except nodeterms.NodeTermError as refused:
        notes.append(f"a preferred nodeAntiAffinity term is not scored: {refused}")
        return []
    if negated:
        _note_ordered(entry.get("preference") or {}, notes)
    return negated


def _note_ordered(term: Mapping[str, Any], notes: list[str]) -> None:
    for req in term.get("matchExpressions") or ():
        if req.get("operator") in ("Gt", "Lt"):
            notes.append(f"nodeAntiAffinity {req.get('key')} {req.get('operator')} {(req.get('values') or [''])[0]} "
                         "is modelled as avoiding nodes whose label is an integer on that side; a non-integer value "
                         "is treated as avoided too")


def _shown(term: Mapping[str, Any]) -> str:
    return " and ".join(f"{r.get('key')} {r.get('operator')} {r.get('values') or []}"
                        for part in ("matchExpressions", "matchFields") for r in term.get(part) or ())
