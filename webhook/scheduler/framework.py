"""One scheduling cycle of the default profile, and placing replicas one after another.

``schedule`` is ``schedulePod`` (pkg/scheduler/schedule_one.go): PreFilter, Filter on every
node (``findNodesThatPassFilters``), and when no node passes, the FitError message and the
PostFilter (DefaultPreemption); else PreScore/Score/NormalizeScore with the default weights
(``prioritizeNodes``) and every node with the top score (``selectHost`` picks one of them at
random). Differences from the real scheduler, on purpose:

* every node is filtered and scored: percentageOfNodesToScore (which lets a cluster of more
  than 100 nodes stop after finding enough feasible nodes) is not modelled;
* ImageLocality and the volume plugins are not modelled, nor nominated pods or extenders;
* with a single feasible node the scheduler skips scoring; the scores are still reported.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webhook.scheduler.cluster import Cluster
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.plan import Options
from webhook.scheduler.podinfo import pod_key
from webhook.scheduler.scores import best_effort, default_normalize
from webhook.scheduler.state import PlanState, plan_state
from webhook.scheduler.status import (
    UNRESOLVABLE,
    Failure,
    Reason,
    fit_error_message,
)

if TYPE_CHECKING:
    from webhook.scheduler.preemption import Preemption

__all__ = ["Placement", "PluginScore", "Result", "place", "prioritize", "schedule"]

_DEFAULT_OPTIONS = Options()
# genericScheduler.Schedule (v1.20 core/generic_scheduler.go; schedulePod since v1.26) returns
# ErrNoNodesAvailable before any plugin runs when the snapshot holds no node at all: no
# FitError, no preemption, and the pod's condition carries this text.
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
# The status findNodesThatFitPod records for each node NodeAffinity's PreFilterResult leaves
# out (SetAbsentNodesStatus): they are counted in the message like filtered nodes.
_ABSENT = Failure("NodeAffinity", UNRESOLVABLE, (Reason.PREFILTER_NODES.format(plugins="NodeAffinity"),),
                  ("the pod's required node affinity names other nodes (matchFields metadata.name)",))
# The order in which the default profile runs its score plugins.
SCORE_PLUGINS = ("TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                 "NodeResourcesBalancedAllocation")


@dataclass(frozen=True, slots=True)
class PluginScore:
    """One plugin's score for one node: as returned by Score, after NormalizeScore, and its weight."""

    raw: int
    normalized: int
    weight: int

    @property
    def weighted(self) -> int:
        return self.normalized * self.weight


@dataclass(frozen=True, eq=False)
class Result:
    """One scheduling cycle. ``filtered`` is the status the scheduler records per node (its
    first failing filter); ``failures`` lists every failing filter of those nodes."""

    pod: str
    num_nodes: int
    feasible: tuple[str, ...]
    totals: tuple[int, ...]
    plugin_scores: Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]]
    weights: Mapping[str, int]
    chosen: tuple[str, ...]
    filtered: Mapping[str, Failure]
    failures: Mapping[str, tuple[Failure, ...]]
    message: str
    preemption: Preemption | None = None
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def schedulable(self) -> bool:
        return bool(self.chosen)

    def score(self, node: str) -> int:
        """A feasible node's total: the weighted sum of its normalized plugin scores."""
        return self.totals[self._position(node)]

    def breakdown(self, node: str) -> dict[str, PluginScore]:
        """A feasible node's score, plugin by plugin."""
        i = self._position(node)
        return {name: PluginScore(raw[i], norm[i], self.weights.get(name, 0))
                for name, (raw, norm) in self.plugin_scores.items()}

    def ranking(self) -> list[tuple[str, int]]:
        """Feasible nodes by total score, best first (ties by name)."""
        return sorted(zip(self.feasible, self.totals, strict=True), key=lambda pair: (-pair[1], pair[0]))

    def _position(self, node: str) -> int:
        if not self._index:
            self._index.update((name, i) for i, name in enumerate(self.feasible))
        return self._index[node]


@dataclass(frozen=True, eq=False)
class Placement:
    """A replica placed: the cycle's result, the node chosen (the first by name when several
    tie, as ``tied`` reports) and the snapshot with the pod bound there."""

    result: Result
    node: str | None
    cluster: Cluster
    tied: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()


def schedule(pod: Mapping[str, Any], cluster: Cluster, *, default_selector: Mapping[str, Any] | None = None,
             options: Options | None = None, nodes: Sequence[str] | None = None, preempt: bool = True) -> Result:
    """Schedule ``pod`` (a Pod dict, or a pod template wrapped as one) on ``cluster``.

    ``default_selector``: the selector of the Service/ReplicaSet/StatefulSet/ReplicationController
    owning the pod, which the system default spread constraints need (None: none apply).
    ``nodes``: only consider these nodes (an extender's candidate list). ``preempt``: run
    DefaultPreemption when nothing fits.
    """
    state = plan_state(pod, cluster, default_selector, options or _DEFAULT_OPTIONS)
    if not cluster.nodes:
        return _empty_result(state, pod, 0, {}, {}, NO_NODES_AVAILABLE, None)
    pool = _pool(cluster, nodes)
    if state.prefilter is not None:
        return _rejected(state, cluster, pod, pool, preempt)
    wanted = state.prefilter_nodes
    feasible: list[NodeInfo] = []
    filtered: dict[str, Failure] = {}
    failures: dict[str, tuple[Failure, ...]] = {}
    for node in pool:
        found = state.failures(node) if wanted is None or node.name in wanted else (_ABSENT,)
        if found:
            filtered[node.name] = found[0]
            failures[node.name] = found
        else:
            feasible.append(node)
    if not feasible:
        return _unschedulable(state, cluster, pod, len(pool), filtered, failures, preempt)
    return _scored(state, pod, len(pool), feasible, filtered, failures)


def _pool(cluster: Cluster, nodes: Sequence[str] | None) -> list[NodeInfo]:
    """The nodes the cycle considers: all of the snapshot's, or only ``nodes``."""
    if nodes is None:
        return list(cluster.nodes.values())
    allowed = set(nodes)
    return [n for n in cluster.nodes.values() if n.name in allowed]


def _rejected(state: PlanState, cluster: Cluster, pod: Mapping[str, Any], pool: Sequence[NodeInfo],
              preempt: bool) -> Result:
    """PreFilter rejected the pod: every node gets its status (findNodesThatFitPod records it
    for all of them, so preemption sees it too) and the message is PreFilter's own."""
    assert state.prefilter is not None
    filtered = {n.name: state.prefilter for n in pool}
    failures = {name: (failure,) for name, failure in filtered.items()}
    preemption = _preempt(state, cluster, filtered, len(pool)) if preempt else None
    postfilter = preemption.message if preemption is not None else ""
    message = fit_error_message(len(pool), filtered.values(), prefilter=", ".join(state.prefilter.reasons),
                                postfilter=postfilter, release=state.options.release)
    return _empty_result(state, pod, len(pool), filtered, failures, message, preemption)


def _unschedulable(state: PlanState, cluster: Cluster, pod: Mapping[str, Any], num_nodes: int,
                   filtered: dict[str, Failure], failures: dict[str, tuple[Failure, ...]], preempt: bool) -> Result:
    preemption = _preempt(state, cluster, filtered, num_nodes) if preempt else None
    postfilter = preemption.message if preemption is not None else ""
    message = fit_error_message(num_nodes, filtered.values(), postfilter=postfilter, release=state.options.release)
    return _empty_result(state, pod, num_nodes, filtered, failures, message, preemption)


def _preempt(state: PlanState, cluster: Cluster, filtered: Mapping[str, Failure], num_nodes: int) -> Preemption:
    from webhook.scheduler.preemption import (
        preempt,  # preemption runs the filters of this module's state
    )

    return preempt(state, cluster, filtered, num_nodes)


def _empty_result(state: PlanState, pod: Mapping[str, Any], num_nodes: int, filtered: Mapping[str, Failure],
                  failures: Mapping[str, tuple[Failure, ...]], message: str, preemption: Preemption | None) -> Result:
    return Result(pod_key(pod), num_nodes, (), (), {}, dict(state.options.weights), (), filtered, failures, message,
                  preemption)


def _scored(state: PlanState, pod: Mapping[str, Any], num_nodes: int, feasible: list[NodeInfo],
            filtered: dict[str, Failure], failures: dict[str, tuple[Failure, ...]]) -> Result:
    """``prioritizeNodes``: each plugin's scores normalized, weighted and summed."""
    per_node = [state.node_scores(n) for n in feasible]
    taint = [s[0] for s in per_node]
    plan = state.plan
    affinity = [s[1] for s in per_node]
    plugin_scores: dict[str, tuple[list[int], list[int]]] = {
        "TaintToleration": (taint, default_normalize(taint, reverse=True)),
        # NodeAffinity's PreScore skips a pod without preferred terms: 0 everywhere.
        "NodeAffinity": (affinity, default_normalize(affinity, reverse=False) if plan.preferred else [0] * len(feasible)),
        "NodeResourcesFit": ([s[2] for s in per_node], [s[2] for s in per_node]),
        "PodTopologySpread": state.spread_score.scores(feasible),
        "InterPodAffinity": state.interpod_score.scores_for(feasible),
        "NodeResourcesBalancedAllocation": ([0] * len(feasible), [0] * len(feasible)) if best_effort(plan)
        else ([s[3] for s in per_node], [s[3] for s in per_node]),
    }
    weights = state.options.weights
    totals = [0] * len(feasible)
    for name in SCORE_PLUGINS:
        weight = weights.get(name, 0)
        for i, value in enumerate(plugin_scores[name][1]):
            totals[i] += value * weight
    best = max(totals)
    names = tuple(n.name for n in feasible)
    chosen = tuple(sorted(name for name, total in zip(names, totals, strict=True) if total == best))
    frozen = {name: (tuple(raw), tuple(norm)) for name, (raw, norm) in plugin_scores.items()}
    return Result(pod_key(pod), num_nodes, names, tuple(totals), frozen, dict(weights), chosen, filtered, failures, "")


def prioritize(pod: Mapping[str, Any], cluster: Cluster, nodes: Sequence[str], *,
               default_selector: Mapping[str, Any] | None = None, options: Options | None = None) -> Result:
    """Score ``nodes`` as the feasible nodes of a cycle, without filtering them (an
    extender's prioritize verb): PreScore still counts pods on every node of the cluster."""
    state = plan_state(pod, cluster, default_selector, options or _DEFAULT_OPTIONS)
    feasible = [cluster.nodes[name] for name in nodes]
    if not feasible:
        return _empty_result(state, pod, len(cluster.nodes), {}, {}, "", None)
    return _scored(state, pod, len(cluster.nodes), feasible, {}, {})


def place(pod: Mapping[str, Any], cluster: Cluster, *, default_selector: Mapping[str, Any] | None = None,
          options: Options | None = None, apply_preemption: bool = False) -> Placement:
    """Schedule ``pod`` and bind it in a new snapshot, so the next replica sees it.

    Among tied nodes the first by name is taken (the scheduler picks one at random); ``tied``
    lists them all. With ``apply_preemption``, an unschedulable pod whose preemption nominates
    a node has its victims evicted and is bound there when it then fits (a later cycle tries
    the nominated node first). Use the returned snapshot from then on: the pod's scheduling
    state moves to it.
    """
    options = options or _DEFAULT_OPTIONS
    result = schedule(pod, cluster, default_selector=default_selector, options=options)
    state = plan_state(pod, cluster, default_selector, options)
    if result.chosen:
        node = result.chosen[0]
        return Placement(result, node, cluster.bind(state.plan.info.renamed(pod), node), result.chosen)
    nominated = result.preemption.nominated if result.preemption is not None else None
    if not apply_preemption or nominated is None or result.preemption is None:
        return Placement(result, None, cluster)
    after = cluster.evict(result.preemption.victim_infos)
    state = plan_state(pod, after, default_selector, options)
    if state.failures(after.nodes[nominated]):
        return Placement(result, None, after, evicted=result.preemption.victims)
    bound = after.bind(state.plan.info.renamed(pod), nominated)
    return Placement(result, nominated, bound, (nominated,), result.preemption.victims)
