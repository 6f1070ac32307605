"""The resource labels of one node (resource-aware placement, docs/policies.md), computed from plain API objects.

Each label is an integer, rounded conservatively into steps so that it changes only when a
step is crossed and never promises more than there is: usage is rounded **up**, availability
**down**, availability never below 0.

- ``cpu-usage``, ``memory-usage``, ``storage-usage``: percent of the node's allocatable
  (``cpu``, ``memory``, ``ephemeral-storage``) requested by its pods, or measured
  (``usage``: metrics.k8s.io's NodeMetrics ``usage``) when given for that resource. A
  resource the node has none of reads 100%: nothing more fits.
- ``cpu-available`` (millicores), ``memory-available`` and ``storage-available`` (MiB):
  allocatable minus requested; the scheduler places by requests, so this is what
  ``requiredResources`` needs whatever the usage source.
- ``gpu-available``: per GPU extended resource (``nvidia.com/gpu``, ``amd.com/gpu`` and the
  configured ones), allocatable minus requested, never below 0, summed; 0 on a node without.

Requests are counted as the scheduler counts them: each pod's ``PodRequests`` (containers
summed, init containers as a running maximum, sidecars, pod-level requests, overhead) turned
into whole millicores and bytes as ``framework.Resource`` holds them, summed over the pods
bound to the node that are not Succeeded or Failed (terminating pods still hold their
resources), exactly as ``NodeInfo.Requested`` adds them.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from webhook import PREFIX
from webhook.kube import pods as kube_pods
from webhook.kube.resourcelabels import AVAILABLE_LABELS, USAGE_LABELS
from webhook.scheduler.resources import Resource, pod_requests, to_resource

__all__ = [
    "DEFAULT_GPU_RESOURCES",
    "LABELS",
    "PREFIX",
    "NodeLabels",
    "Steps",
    "compute",
    "node_requests",
    "RequestsMemo",
    "pod_resource",
]

# Node resource -> label, from the tables the policy compiler reads the same labels with.
USAGE = {"cpu": USAGE_LABELS["preferredCPU"], "memory": USAGE_LABELS["preferredMemory"],
         "ephemeral-storage": USAGE_LABELS["preferredStorage"]}
AVAILABLE = {"cpu": AVAILABLE_LABELS["cpu"], "memory": AVAILABLE_LABELS["memory"],
             "ephemeral-storage": AVAILABLE_LABELS["storage"]}  # (label, the unit it counts in)
GPU_LABEL = AVAILABLE_LABELS["gpu"][0]
# Every label the labeler owns, full keys: the only ones it ever writes.
LABELS: tuple[str, ...] = tuple(PREFIX + name for name in (*USAGE.values(), *(a for a, _ in AVAILABLE.values()),
                                                            GPU_LABEL))
DEFAULT_GPU_RESOURCES: tuple[str, ...] = ("nvidia.com/gpu", "amd.com/gpu")


@dataclass(frozen=True)
class Steps:
    """Step sizes: usage in percent, cpu in millicores, memory and storage in MiB, GPUs in devices."""

    usage: int = 5
    cpu: int = 100
    memory: int = 256
    storage: int = 1024
    gpu: int = 1

    def __post_init__(self) -> None:
        for name in ("usage", "cpu", "memory", "storage", "gpu"):
            if getattr(self, name) < 1:
                raise ValueError(f"the {name} step must be a whole number of at least 1")

    def available(self, resource: str) -> int:
        return {"cpu": self.cpu, "memory": self.memory, "ephemeral-storage": self.storage}[resource]


@dataclass(frozen=True)
class NodeLabels:
    """The labels computed for one node (full keys), or why none could be."""

    node: str
    labels: dict[str, str] = field(default_factory=dict)
    problem: str = ""  # non-empty: nothing is written for this node this pass


def pod_resource(pod: Mapping[str, Any]) -> Resource:
    """What one pod holds on its node (nothing once Succeeded or Failed).

    Raises ``ValueError`` (naming the pod) for a quantity that does not parse: an unknown
    amount must not be counted as zero, which would promise room that is not there."""
    if kube_pods.terminal(pod):
        return Resource()
    try:
        return to_resource(pod_requests(pod.get("spec") or {}))
    except (ValueError, TypeError, ArithmeticError, AttributeError) as exc:
        meta = pod.get("metadata") or {}
        raise ValueError(f"pod {meta.get('namespace', 'default')}/{meta.get('name', '?')}: {exc}") from None


class RequestsMemo:
    """``pod_resource`` remembered by the identity of the subtrees it reads.

    The cluster view's pod projections share equal subtrees (``cluster.snapshot.SharedValues``:
    the replicas of one workload carry the very same ``containers`` list), so a workload's
    pods are computed once; the memo keeps those subtrees alive while it remembers them (an
    id is only meaningful for a living object) and forgets the oldest past ``size``."""

    _FIELDS = ("containers", "initContainers", "overhead", "resources")

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._memo: dict[tuple[int, ...], tuple[tuple[Any, ...], Resource]] = {}

    def __call__(self, pod: Mapping[str, Any]) -> Resource:
        if kube_pods.terminal(pod):
            return Resource()
        spec = pod.get("spec") or {}
        parts = tuple(spec.get(f) for f in self._FIELDS)
        key = tuple(id(p) for p in parts)
        hit = self._memo.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], parts, strict=True)):
            return hit[1]
        held = pod_resource(pod)  # raises for a quantity that does not parse: never remembered
        if len(self._memo) >= self.size:
            self._memo.pop(next(iter(self._memo)))
        self._memo[key] = (parts, held)
        return held


def node_requests(pods: Iterable[Mapping[str, Any]]) -> Resource:
    """``NodeInfo.Requested``: the sum of the pods' requests."""
    total = Resource()
    for pod in pods:
        total.add(pod_resource(pod))
    return total


def compute(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] = (), *, steps: Steps = Steps(),
            gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES, usage: Mapping[str, Any] | None = None,
            requested: Resource | None = None) -> NodeLabels:
    """The labels of ``node`` given the pods bound to it (or their summed ``requested``, which
    a caller keeping per-pod requests passes instead); ``usage`` is measured usage by resource
    (metrics.k8s.io), which replaces requests in the usage labels it names."""
    name = str((node.get("metadata") or {}).get("name") or "")
    raw = (node.get("status") or {}).get("allocatable")
    if not raw:
        # A node still registering: no labels rather than labels saying it is full or empty.
        return NodeLabels(name, problem="the node has no status.allocatable")
    try:
        allocatable = to_resource(raw)
        held = requested if requested is not None else node_requests(pods)
        measured = to_resource(usage or {})
    except ValueError as exc:
        return NodeLabels(name, problem=str(exc))
    labels: dict[str, str] = {}
    for resource, label in USAGE.items():
        used = _amount(measured, resource) if resource in (usage or {}) else _amount(held, resource)
        labels[PREFIX + label] = str(_usage_percent(used, _amount(allocatable, resource), steps.usage))
    for resource, (label, unit) in AVAILABLE.items():
        free = _amount(allocatable, resource) - _amount(held, resource)
        labels[PREFIX + label] = str(_floor_step(free / unit, steps.available(resource)))
    gpus = sum(max(0, allocatable.scalars.get(r, 0) - held.scalars.get(r, 0)) for r in dict.fromkeys(gpu_resources))
    labels[PREFIX + GPU_LABEL] = str(_floor_step(Fraction(gpus), steps.gpu))
    return NodeLabels(name, labels)


def _amount(res: Resource, resource: str) -> Fraction:
    """cpu in cores, memory and ephemeral-storage in bytes (the units of AVAILABLE_LABELS)."""
    if resource == "cpu":
        return Fraction(res.cpu, 1000)
    return Fraction(res.memory if resource == "memory" else res.ephemeral)


def _usage_percent(used: Fraction, have: Fraction, step: int) -> int:
    if have <= 0:
        return 100  # nothing of it to use: as full as it gets
    percent = max(Fraction(0), used) * 100 / have
    return math.ceil(percent / step) * step


def _floor_step(amount: Fraction, step: int) -> int:
    if amount <= 0:
        return 0
    return math.floor(amount / step) * step
