"""The filters that look at one node and the pod only, in the default profile's order.

Each returns None (the node passes) or the plugin's ``Failure`` with its own reason strings:
``NodeUnschedulable.Filter``, ``NodeName.Filter`` (``Fits``), ``TaintToleration.Filter``,
``NodeAffinity.Filter``, ``NodePorts.Filter`` (``fitsPorts``) and ``Fit.Filter``
(``fitsRequest``), from pkg/scheduler/framework/plugins/<plugin>. The first four read only the
node object and so are computed once per pod and node; the last two read the node's pods.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from webhook.scheduler.nodeaffinity import RequiredNodeAffinity, node_identity
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.status import UNRESOLVABLE, UNSCHEDULABLE, Failure, Reason
from webhook.scheduler.taints import (
    UNSCHEDULABLE_TAINT,
    find_untolerated,
    tolerations_tolerate,
)

if TYPE_CHECKING:
    from webhook.scheduler.plan import Options, PodPlan

__all__ = ["NODE_FILTERS", "NodeEligibility", "node_affinity", "node_name", "node_ports", "node_resources_fit",
           "node_unschedulable", "taint_toleration"]

NodeFilter = Callable[["PodPlan", NodeInfo, "Options"], "Failure | None"]


def node_unschedulable(plan: PodPlan, node: NodeInfo, options: Options) -> Failure | None:
    """A cordoned node (spec.unschedulable) takes only pods tolerating the unschedulable taint."""
    if not node.unschedulable or tolerations_tolerate(plan.tolerations, UNSCHEDULABLE_TAINT):
        return None
    return Failure("NodeUnschedulable", UNRESOLVABLE, (Reason.UNSCHEDULABLE,), ("node has spec.unschedulable: true",))


def node_name(plan: PodPlan, node: NodeInfo, options: Options) -> Failure | None:
    """A pod with spec.nodeName fits only that node."""
    if not plan.node_name or plan.node_name == node.name:
        return None
    return Failure("NodeName", UNRESOLVABLE, (Reason.node_name(options.release),),
                   (f"pod asks for node {plan.node_name}",))


def taint_toleration(plan: PodPlan, node: NodeInfo, options: Options) -> Failure | None:
    """The first NoSchedule/NoExecute taint of the node that the pod does not tolerate."""
    taint = find_untolerated(node.taints, plan.tolerations)
    if taint is None:
        return None
    key, value, effect = taint.get("key", ""), taint.get("value") or "", taint.get("effect", "")
    reason = Reason.taint(key, value, options.release)
    shown = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
    return Failure("TaintToleration", UNRESOLVABLE, (reason,), (f"untolerated taint {shown}",))


def node_affinity(plan: PodPlan, node: NodeInfo, options: Options) -> Failure | None:
    """nodeSelector and required node affinity; the details name every term that failed."""
    if plan.required.trivial or plan.required.matches(node.labels, node.name):
        return None
    details = plan.required.explain(node.labels, node.name)
    return Failure("NodeAffinity", UNRESOLVABLE, (Reason.node_affinity(options.release),), details)


def node_ports(plan: PodPlan, node: NodeInfo, options: Options) -> Failure | None:
    """A wanted host port conflicts with one a pod on the node holds (``CheckConflict``)."""
    for ip, protocol, port in plan.info.ports:
        if node.port_conflict(ip, protocol, port):
            return Failure("NodePorts", UNSCHEDULABLE, (Reason.NODE_PORTS,), (f"host port {ip}:{port}/{protocol} is taken",))
    return None


def node_resources_fit(plan: PodPlan, node: NodeInfo, options: Options) -> Failure | None:
    """``fitsRequest``: the pod count, then cpu, memory, ephemeral-storage and scalar resources
    against allocatable minus what the node's pods request. A request larger than the whole
    allocatable is UnschedulableAndUnresolvable: no preemption can make room for it. Go walks
    the scalar resources in map order; here they are sorted, so the reasons are stable."""
    want, alloc, used = plan.fit_request, node.allocatable, node.requested
    reasons: list[str] = []
    details: list[str] = []
    unresolvable = False
    if len(node.pods) + 1 > alloc.pods:
        reasons.append(Reason.TOO_MANY_PODS)
        details.append(f"{len(node.pods)} pods of {alloc.pods} allowed")
    if want.is_zero():
        return _fit_failure(reasons, details, unresolvable)
    for name, asked, have, taken in (("cpu", want.cpu, alloc.cpu, used.cpu),
                                     ("memory", want.memory, alloc.memory, used.memory),
                                     ("ephemeral-storage", want.ephemeral, alloc.ephemeral, used.ephemeral)):
        if asked > 0 and asked > have - taken:
            reasons.append(Reason.insufficient(name))
            details.append(_shortfall(name, asked, taken, have))
            unresolvable |= asked > have
    for name in sorted(want.scalars):
        asked = want.scalars[name]
        if asked == 0:
            continue
        have, taken = alloc.scalars.get(name, 0), used.scalars.get(name, 0)
        if asked > have - taken:
            reasons.append(Reason.insufficient(name))
            details.append(_shortfall(name, asked, taken, have))
            unresolvable |= asked > have
    return _fit_failure(reasons, details, unresolvable)


def _shortfall(name: str, asked: int, taken: int, have: int) -> str:
    unit = "m" if name == "cpu" else ""
    return f"{name}: requested {asked}{unit}, {taken}{unit} of {have}{unit} allocatable already requested"


def _fit_failure(reasons: list[str], details: list[str], unresolvable: bool) -> Failure | None:
    if not reasons:
        return None
    return Failure("NodeResourcesFit", UNRESOLVABLE if unresolvable else UNSCHEDULABLE, tuple(reasons), tuple(details))


# The default profile's filter order (default_plugins.go) for the node-local plugins; the
# volume plugins sit between NodeResourcesFit and PodTopologySpread and are not modelled.
STATIC_FILTERS: tuple[NodeFilter, ...] = (node_unschedulable, node_name, taint_toleration, node_affinity)
DYNAMIC_FILTERS: tuple[NodeFilter, ...] = (node_ports, node_resources_fit)
NODE_FILTERS = STATIC_FILTERS + DYNAMIC_FILTERS


class NodeEligibility:
    """Whether a pod spec passes the filters that read the Node object alone - NodeUnschedulable,
    TaintToleration and NodeAffinity (with nodeSelector), the same functions the model runs -
    for callers holding Node dicts rather than a scheduling plan: the engine's rollout rules
    count the topology domains the scheduler would consider with this.

    NodeName is left out: a pod that names its node is not scheduled at all.
    """

    __slots__ = ("required", "tolerations")

    def __init__(self, pod_spec: Mapping[str, Any]) -> None:
        self.required = RequiredNodeAffinity.of(pod_spec)
        self.tolerations: tuple[Mapping[str, Any], ...] = tuple(
            t for t in pod_spec.get("tolerations") or () if isinstance(t, Mapping))

    def admits(self, node: Mapping[str, Any]) -> bool:
        spec = node.get("spec") or {}
        if spec.get("unschedulable") and not tolerations_tolerate(self.tolerations, UNSCHEDULABLE_TAINT):
            return False
        if find_untolerated(tuple(spec.get("taints") or ()), self.tolerations) is not None:
            return False
        return self.required.trivial or self.required.matches(*node_identity(node))
