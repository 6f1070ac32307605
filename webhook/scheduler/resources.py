"""Resource amounts as the kube-scheduler counts them: a pod's requests and a node's allocatable.

Quantities are parsed by ``webhook.kube.quantity.parse_quantity`` (exact ``Fraction``s) and
then treated as ``resource.ParseQuantity`` stores them: a non-zero amount is rounded up, away
from zero, to the next nano unit and capped at MaxInt64. The scheduler reads cpu as
``MilliValue()`` and everything else as ``Value()``; both round up (``Quantity.ScaledValue``).

``pod_requests`` is ``resource.PodRequests`` of k8s.io/component-helpers/resource/helpers.go
(containers summed, init containers as a running maximum, sidecars - init containers with
``restartPolicy: Always`` - added to both, pod-level requests overriding, overhead added).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any

from webhook.kube.names import qualified_name_error
from webhook.kube.quantity import parse_quantity

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "Resource",
    "is_scalar_resource",
    "pod_level_requests_set",
    "pod_requests",
    "quantity",
    "to_resource",
]

ResourceList = dict[str, Fraction]

# schedutil.DefaultMilliCPURequest / DefaultMemoryRequest (pkg/scheduler/util/pod_resources.go):
# what a container without a cpu or memory request counts as in the "non-zero" tallies.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_NON_ZERO: ResourceList = {"cpu": Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000), "memory": Fraction(DEFAULT_MEMORY_REQUEST)}

_NANO = 10**9
_MAX_INT64 = 2**63 - 1


@lru_cache(maxsize=8192)
def _parsed(text: str) -> Fraction:
    value = parse_quantity(text)
    magnitude = abs(value)
    # resource.ParseQuantity: "rounds non-zero values up to the minimum representable value"
    # (inf.RoundUp at Nano scale), then caps the magnitude at MaxInt64.
    if (magnitude * _NANO).denominator != 1:
        magnitude = Fraction(math.ceil(magnitude * _NANO), _NANO)
    magnitude = min(magnitude, Fraction(_MAX_INT64))
    return magnitude if value >= 0 else -magnitude


def quantity(value: Any) -> Fraction:
    """A quantity from the API (a string, or a number YAML typed), exactly as stored."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    return _parsed(value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value))


def is_scalar_resource(name: str) -> bool:
    """``schedutil.IsScalarResourceName``: extended, hugepages-, *kubernetes.io/ prefixed or
    attachable-volumes- resources, the ones kept in ``Resource.ScalarResources``."""
    if name.startswith(("hugepages-", "attachable-volumes-")) or "kubernetes.io/" in name:
        return True
    # v1helper.IsExtendedResourceName: not native (has a "/", no kubernetes.io/ prefix),
    # no "requests." prefix, and "requests.<name>" is a qualified name.
    if "/" not in name or name.startswith("requests."):
        return False
    return qualified_name_error("requests." + name) is None


class Resource:
    """``framework.Resource``: cpu in millicores, memory and ephemeral-storage in bytes, the
    pod count a node allows, and scalar resources by name. Integers, as the scheduler adds."""

    __slots__ = ("cpu", "ephemeral", "memory", "pods", "scalars")

    def __init__(self, cpu: int = 0, memory: int = 0, ephemeral: int = 0, pods: int = 0,
                 scalars: dict[str, int] | None = None) -> None:
        self.cpu, self.memory, self.ephemeral, self.pods = cpu, memory, ephemeral, pods
        self.scalars: dict[str, int] = scalars if scalars is not None else {}

    def copy(self) -> Resource:
        return Resource(self.cpu, self.memory, self.ephemeral, self.pods, dict(self.scalars))

    def add(self, other: Resource, sign: int = 1) -> None:
        """``NodeInfo.update``'s arithmetic: add (or with ``sign=-1`` subtract) another amount."""
        self.cpu += sign * other.cpu
        self.memory += sign * other.memory
        self.ephemeral += sign * other.ephemeral
        for name, amount in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0) + sign * amount

    def is_zero(self) -> bool:
        return not (self.cpu or self.memory or self.ephemeral or self.scalars)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resource) and (self.cpu, self.memory, self.ephemeral, self.pods, self.scalars) == (
            other.cpu, other.memory, other.ephemeral, other.pods, other.scalars)

    def __repr__(self) -> str:
        return f"Resource(cpu={self.cpu}m, memory={self.memory}, ephemeral={self.ephemeral}, pods={self.pods}, {self.scalars})"


def to_resource(resources: Mapping[str, Any], *, at_least_zero: bool = False) -> Resource:
    """``Resource.Add`` over a ResourceList (a node's allocatable, a pod's requests), or
    ``SetMaxResource`` on an empty Resource when ``at_least_zero`` (the NodeResourcesFit
    PreFilter's ``computePodResourceRequest``, which never goes below zero)."""
    out = Resource()
    for name, raw in resources.items():
        amount = raw if isinstance(raw, Fraction) else quantity(raw)
        scaled = math.ceil(amount * 1000) if name == "cpu" else math.ceil(amount)
        if at_least_zero:
            scaled = max(scaled, 0)
        if name == "cpu":
            out.cpu += scaled
        elif name == "memory":
            out.memory += scaled
        elif name == "ephemeral-storage":
            out.ephemeral += scaled
        elif name == "pods":
            out.pods += scaled
        elif is_scalar_resource(name):
            out.scalars[name] = out.scalars.get(name, 0) + scaled
    if at_least_zero:
        out.pods = 0  # SetMaxResource ignores "pods"
    return out


def _add(into: ResourceList, more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, Fraction(0)) + amount


def _max(into: ResourceList, more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        if name not in into or amount > into[name]:
            into[name] = amount


def _container_requests(container: Mapping[str, Any], non_missing: Mapping[str, Fraction] | None) -> ResourceList:
    requests = (container.get("resources") or {}).get("requests") or {}
    out = {name: quantity(value) for name, value in requests.items()}
    if non_missing:
        # applyNonMissing: only a request that is absent is replaced; an explicit 0 stays 0.
        for name, amount in non_missing.items():
            if name not in out:
                out[name] = amount
    return out


def _aggregate_containers(spec: Mapping[str, Any], non_missing: Mapping[str, Fraction] | None) -> ResourceList:
    """``aggregateContainerResourcesByFn`` with the spec requests (``containerSpecRequests``)."""
    result: ResourceList = {}
    for container in spec.get("containers") or ():
        _add(result, _container_requests(container, non_missing))
    sidecars: ResourceList = {}
    init_max: ResourceList = {}
    for container in spec.get("initContainers") or ():
        own = _container_requests(container, non_missing)
        if container.get("restartPolicy") == "Always":
            # A sidecar runs beside the app containers: it adds to the pod's total and to
            # every later init container's footprint (KEP-753 "resources calculation").
            _add(result, own)
            _add(sidecars, own)
            footprint = dict(sidecars)
        else:
            footprint = dict(own)
            _add(footprint, sidecars)
        _max(init_max, footprint)
    _max(result, init_max)
    return result


def _pod_level_requests(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return (spec.get("resources") or {}).get("requests") or {}


def _pod_level_supported(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_level_requests_set(spec: Mapping[str, Any]) -> bool:
    """``resource.IsPodLevelRequestsSet``: pod-level requests name cpu, memory or hugepages."""
    return any(_pod_level_supported(name) for name in _pod_level_requests(spec))


def pod_requests(spec: Mapping[str, Any], non_missing: Mapping[str, Fraction] | None = None) -> ResourceList:
    """``resource.PodRequests`` with the scheduler's options: spec requests (a pod being
    scheduled has no resize status), pod-level requests honoured (PodLevelResources, beta and
    on by default since v1.34; older releases ignore them), overhead added."""
    requests = _aggregate_containers(spec, non_missing)
    for name, value in _pod_level_requests(spec).items():
        if _pod_level_supported(name):
            requests[name] = quantity(value)
    _add(requests, {name: quantity(value) for name, value in (spec.get("overhead") or {}).items()})
    return requests


def non_zero_defaults(requests: Mapping[str, Fraction], spec: Mapping[str, Any]) -> ResourceList:
    """``getNonMissingContainerRequests`` (pkg/scheduler/framework/types.go): the defaults a
    container without a cpu/memory request counts as; with pod-level requests set, only for
    a resource requested neither per container nor per pod."""
    if not pod_level_requests_set(spec):
        return dict(_NON_ZERO)
    return {name: amount for name, amount in _NON_ZERO.items() if name not in requests}


def non_zero_requests(spec: Mapping[str, Any], requests: Mapping[str, Fraction]) -> tuple[int, int]:
    """``PodInfo.calculateResource``'s non0CPU (millicores) and non0Mem (bytes)."""
    defaults = non_zero_defaults(requests, spec)
    counted = pod_requests(spec, defaults) if defaults else requests
    return _milli(counted.get("cpu")), _units(counted.get("memory"))


def scorer_requests(spec: Mapping[str, Any], names: Iterable[str], *, non_zero: bool) -> tuple[int, ...]:
    """``resourceAllocationScorer.calculatePodResourceRequest`` for each resource: with
    ``non_zero`` (LeastAllocated) every container missing a cpu/memory request counts the
    defaults; BalancedAllocation (``useRequested``) takes the requests as they are."""
    requests = pod_requests(spec, dict(_NON_ZERO) if non_zero else None)
    return tuple(_milli(requests.get(n)) if n == "cpu" else _units(requests.get(n)) for n in names)


def _milli(amount: Fraction | None) -> int:
    return math.ceil(amount * 1000) if amount is not None else 0


def _units(amount: Fraction | None) -> int:
    return math.ceil(amount) if amount is not None else 0
