"""A pod plan against a cluster snapshot: the scheduler's CycleState, kept across cycles.

The kube-scheduler recomputes its PreFilter/PreScore state for every pod it schedules. Here
one ``PlanState`` per pod template follows the snapshot: built once (a scan of the nodes and
their pods), then updated as pods are bound or evicted - the plugins' own AddPod/RemovePod
arithmetic - so the next replica's cycle starts from exactly what a fresh PreFilter would
compute. Verdicts that depend on one node only are cached: the node-object filters and
scores per node name, the pod-dependent ones (ports, resources) per NodeInfo version.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.scheduler.cluster import Cluster
from webhook.scheduler.filters import (
    STATIC_FILTERS,
    node_ports,
    node_resources_fit,
)
from webhook.scheduler.interpod import InterPodFilterState, InterPodScoreState
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.plan import Options, PodPlan, signature
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.release import V1_24
from webhook.scheduler.scores import (
    balanced_allocation,
    least_allocated,
    node_affinity_raw,
    taint_raw,
)
from webhook.scheduler.spreadstate import SpreadFilterState, SpreadScoreState
from webhook.scheduler.status import UNRESOLVABLE, Failure, Reason

__all__ = ["PlanState", "plan_state"]

_MAX_PLANS = 8  # distinct pod templates whose state a snapshot keeps up to date


class _NodeVerdict:
    """What one NodeInfo version means for the pod: NodePorts, NodeResourcesFit, resource scores."""

    __slots__ = ("balanced", "fit", "least", "node", "ports")

    def __init__(self, plan: PodPlan, node: NodeInfo, options: Options) -> None:
        self.node = node
        self.ports = node_ports(plan, node, options)
        self.fit = node_resources_fit(plan, node, options)
        self.least: int | None = None
        self.balanced: int | None = None


class PlanState:
    """The pod's PreFilter/PreScore states over one snapshot, and per-node caches."""

    def __init__(self, plan: PodPlan, cluster: Cluster, options: Options) -> None:
        nodes = list(cluster.nodes.values())
        labels = cluster.namespace_labels
        self.plan = plan
        self.options = options
        # NodeAffinity's PreFilterResult exists since v1.24: before, every node is filtered.
        self.prefilter_nodes = plan.prefilter_nodes if options.since(V1_24) else None
        self.prefilter = self._prefilter(self.prefilter_nodes)
        self.spread = SpreadFilterState(plan, nodes)
        self.spread_score = SpreadScoreState(plan, nodes)
        self.interpod = InterPodFilterState(plan, nodes, labels, options.release)
        self.interpod_score = InterPodScoreState(plan, nodes, labels, options.hard_pod_affinity_weight)
        self._static: dict[str, tuple[Failure, ...]] = {}
        self._static_scores: dict[str, tuple[int, int]] = {}
        self._verdicts: dict[str, _NodeVerdict] = {}

    @staticmethod
    def _prefilter(names: frozenset[str] | None) -> Failure | None:
        """A PreFilter rejection of the pod as a whole (NodeAffinity's conflicting names)."""
        if names is not None and not names:
            return Failure("NodeAffinity", UNRESOLVABLE, (Reason.NODE_AFFINITY_CONFLICT,),
                           ("every required term pins metadata.name, and no name is in all of a term's requirements",))
        return None

    # Tracker: the plugins' AddPod/RemovePod, and the PreScore counts a fresh cycle would see.
    def pod_added(self, pod: PodInfo, node: NodeInfo) -> None:
        for state in (self.spread, self.spread_score, self.interpod, self.interpod_score):
            state.update(pod, node, 1)

    def pod_removed(self, pod: PodInfo, node: NodeInfo) -> None:
        for state in (self.spread, self.spread_score, self.interpod, self.interpod_score):
            state.update(pod, node, -1)

    def static_failures(self, node: NodeInfo) -> tuple[Failure, ...]:
        """Every failing filter among those that read only the node object (cached)."""
        found = self._static.get(node.name)
        if found is None:
            found = self._static[node.name] = tuple(
                f for f in (check(self.plan, node, self.options) for check in STATIC_FILTERS) if f is not None)
        return found

    def verdict(self, node: NodeInfo) -> _NodeVerdict:
        cached = self._verdicts.get(node.name)
        if cached is None or cached.node is not node:
            cached = self._verdicts[node.name] = _NodeVerdict(self.plan, node, self.options)
        return cached

    def failures(self, node: NodeInfo) -> tuple[Failure, ...]:
        """Every filter that rejects the node, in the profile's order; the first is the status
        ``RunFilterPlugins`` records (it stops there)."""
        static = self.static_failures(node)
        verdict = self.verdict(node)
        spread = self.spread.filter(node) if self.spread.constraints else None
        interpod = None if self.interpod.idle else self.interpod.filter(node)
        if verdict.ports is None and verdict.fit is None and spread is None and interpod is None:
            return static
        return static + tuple(f for f in (verdict.ports, verdict.fit, spread, interpod) if f is not None)

    def first_failure(self, node: NodeInfo) -> Failure | None:
        """``RunFilterPlugins`` on a node that is not in the snapshot (a preemption dry run):
        nothing is cached for it."""
        static = self.static_failures(node)
        if static:
            return static[0]
        return (node_ports(self.plan, node, self.options) or node_resources_fit(self.plan, node, self.options)
                or self.spread.filter(node) or self.interpod.filter(node))

    def node_scores(self, node: NodeInfo) -> tuple[int, int, int, int]:
        """Raw TaintToleration and NodeAffinity, and the LeastAllocated and BalancedAllocation scores."""
        static = self._static_scores.get(node.name)
        if static is None:
            static = self._static_scores[node.name] = (taint_raw(self.plan, node), node_affinity_raw(self.plan, node))
        verdict = self.verdict(node)
        if verdict.least is None:
            verdict.least = least_allocated(self.plan, node)
            verdict.balanced = balanced_allocation(self.plan, node)
        assert verdict.balanced is not None
        return static[0], static[1], verdict.least, verdict.balanced


def plan_state(pod: Mapping[str, Any], cluster: Cluster, default_selector: Mapping[str, Any] | None,
               options: Options) -> PlanState:
    """The snapshot's state for this pod template, built on first use and kept up to date."""
    key = signature(pod, default_selector) + repr(options)
    state = cluster.trackers.get(key)
    if isinstance(state, PlanState):
        return state
    state = PlanState(PodPlan(pod, default_selector), cluster, options)
    if len(cluster.trackers) >= _MAX_PLANS:
        cluster.trackers.pop(next(iter(cluster.trackers)))
    cluster.trackers[key] = state
    return state
