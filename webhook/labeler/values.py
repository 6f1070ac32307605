"""The resource labels of one node (SPEC sections 3.5 and 8), computed from plain API objects.

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

Requests are counted as the scheduler counts them: ``kube.scheduler.resources.pod_requests``
(containers summed, init containers as a running maximum, sidecars, pod-level requests,
overhead), over the pods bound to the node that are not Succeeded or Failed (terminating
pods still hold their resources).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from webhook import PREFIX
from webhook.engine.fragments import AVAILABLE_LABELS, USAGE_LABELS
from webhook.kube.scheduler.resources import pod_requests, quantity

__all__ = [
    "DEFAULT_GPU_RESOURCES",
    "LABELS",
    "PREFIX",
    "NodeLabels",
    "Steps",
    "compute",
    "node_requests",
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
_TERMINAL = ("Succeeded", "Failed")


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


def node_requests(pods: Iterable[Mapping[str, Any]]) -> dict[str, Fraction]:
    """The sum of the pods' effective requests; pods in a terminal phase hold nothing.

    Raises ``ValueError`` (naming the pod) for a quantity that does not parse: an unknown
    amount must not be counted as zero, which would promise room that is not there."""
    total: dict[str, Fraction] = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in _TERMINAL:
            continue
        try:
            requests = pod_requests(pod.get("spec") or {})
        except (ValueError, TypeError, ArithmeticError) as exc:
            meta = pod.get("metadata") or {}
            raise ValueError(f"pod {meta.get('namespace', 'default')}/{meta.get('name', '?')}: {exc}") from None
        for name, amount in requests.items():
            total[name] = total.get(name, Fraction(0)) + amount
    return total


def compute(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], *, steps: Steps = Steps(),
            gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
            usage: Mapping[str, Any] | None = None) -> NodeLabels:
    """The labels of ``node`` given the pods bound to it; ``usage`` is measured usage by
    resource (metrics.k8s.io), which replaces requests in the usage labels it names."""
    name = str((node.get("metadata") or {}).get("name") or "")
    raw = (node.get("status") or {}).get("allocatable")
    if not raw:
        # A node still registering: no labels rather than labels saying it is full or empty.
        return NodeLabels(name, problem="the node has no status.allocatable")
    try:
        allocatable = {key: quantity(value) for key, value in raw.items()}
        requested = node_requests(pods)
        measured = {key: quantity(value) for key, value in (usage or {}).items()}
    except ValueError as exc:
        return NodeLabels(name, problem=str(exc))
    labels: dict[str, str] = {}
    for resource, label in USAGE.items():
        have = allocatable.get(resource, Fraction(0))
        used = measured.get(resource, requested.get(resource, Fraction(0)))
        labels[PREFIX + label] = str(_usage_percent(used, have, steps.usage))
    for resource, (label, unit) in AVAILABLE.items():
        free = allocatable.get(resource, Fraction(0)) - requested.get(resource, Fraction(0))
        labels[PREFIX + label] = str(_floor_step(free / unit, steps.available(resource)))
    gpus = sum(max(Fraction(0), allocatable.get(r, Fraction(0)) - requested.get(r, Fraction(0)))
               for r in dict.fromkeys(gpu_resources))
    labels[PREFIX + GPU_LABEL] = str(_floor_step(Fraction(gpus), steps.gpu))
    return NodeLabels(name, labels)


def _usage_percent(used: Fraction, have: Fraction, step: int) -> int:
    if have <= 0:
        return 100  # nothing of it to use: as full as it gets
    percent = max(Fraction(0), used) * 100 / have
    return math.ceil(percent / step) * step


def _floor_step(amount: Fraction, step: int) -> int:
    if amount <= 0:
        return 0
    return math.floor(amount / step) * step
