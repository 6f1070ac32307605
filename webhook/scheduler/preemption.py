"""DefaultPreemption: which lower-priority pods to evict, and on which node.

Sources: ``Evaluator.Preempt``/``findCandidates``/``DryRunPreemption``/``SelectCandidate``/
``pickOneNodeForPreemption`` (pkg/scheduler/framework/preemption/preemption.go) and
``SelectVictimsOnNode``/``PodEligibleToPreemptOthers``/``filterPodsWithPDBViolation``
(plugins/defaultpreemption/default_preemption.go), ``util.MoreImportantPod``.

Only nodes whose filter status is Unschedulable are tried. On each, every pod of lower
priority is removed; if the pod then passes every filter, the removed pods are reprieved one
by one - PDB-violating ones first, each group most important first - keeping out those
without which it no longer fits. Differences from the real scheduler, on purpose: every
candidate node is dry-run (the scheduler stops after max(10%, 100) candidates from a random
offset, so with more it may settle for a worse node); nominated pods and a pending
preemption's terminating victims are not modelled; ties left after every criterion go to the
first node by name (the scheduler takes the first of a map's random order).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webhook.scheduler.labels import compile_selector
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.status import (
    ERROR,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    Failure,
    Reason,
    fit_error_message,
)

if TYPE_CHECKING:
    from webhook.scheduler.cluster import Cluster
    from webhook.scheduler.state import PlanState

__all__ = ["Candidate", "Preemption", "preempt"]

PLUGIN = "DefaultPreemption"
_NOW = math.inf  # GetPodStartTime: a pod that has not started counts as starting now


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where the pod would fit once ``victims`` (most important first) are gone."""

    node: str
    victims: tuple[PodInfo, ...]
    pdb_violations: int

    @property
    def victim_keys(self) -> tuple[str, ...]:
        return tuple(v.key for v in self.victims)


@dataclass(frozen=True, eq=False)
class Preemption:
    """The PostFilter outcome: the nominated node and its victims, every candidate, the status
    of each node tried without success, and the message added to the FitError."""

    eligible: bool
    nominated: str | None
    candidates: tuple[Candidate, ...]
    statuses: Mapping[str, Failure]
    message: str
    tied: tuple[str, ...] = ()
    chosen: Candidate | None = field(default=None)

    @property
    def victims(self) -> tuple[str, ...]:
        return self.chosen.victim_keys if self.chosen else ()

    @property
    def victim_infos(self) -> tuple[PodInfo, ...]:
        return self.chosen.victims if self.chosen else ()


def _importance(pod: PodInfo) -> tuple[int, float]:
    """``MoreImportantPod`` as a sort key: higher priority first, then the earlier start."""
    return -pod.priority, pod.start_time if pod.start_time is not None else _NOW


def _pdb_split(pods: Sequence[PodInfo], pdbs: Sequence[Mapping[str, Any]]) -> tuple[list[PodInfo], list[PodInfo]]:
    """``filterPodsWithPDBViolation``: the pods whose eviction would take a matching PDB's
    disruptionsAllowed below zero (stable: keeps the given order in both groups)."""
    allowed = [int((pdb.get("status") or {}).get("disruptionsAllowed") or 0) for pdb in pdbs]
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    for pod in pods:
        violated = False
        for i, pdb in enumerate(pdbs if pod.labels else ()):  # a pod without labels matches no PDB
            meta, spec = pdb.get("metadata") or {}, pdb.get("spec") or {}
            if (meta.get("namespace") or "default") != pod.namespace:
                continue
            try:
                selector = compile_selector(spec.get("selector"))
            except ValueError:
                continue  # an invalid selector matches nothing
            # A nil or empty selector matches nothing here.
            if selector.empty or not selector.matches(pod.labels):
                continue
            if pod.name in ((pdb.get("status") or {}).get("disruptedPods") or {}):
                continue  # already counted by the API server
            allowed[i] -= 1
            violated = violated or allowed[i] < 0
        (violating if violated else fine).append(pod)
    return violating, fine


class _Undo:
    """The filter states' AddPod/RemovePod during one node's dry run, undone afterwards (the
    scheduler works on a clone of its CycleState; undoing is cheaper than copying counts)."""

    def __init__(self, state: PlanState) -> None:
        self.state = state
        self.log: list[tuple[PodInfo, NodeInfo, int]] = []

    def apply(self, pod: PodInfo, node: NodeInfo, sign: int) -> None:
        self.state.spread.update(pod, node, sign)
        self.state.interpod.update(pod, node, sign)
        self.log.append((pod, node, sign))

    def revert(self) -> None:
        for pod, node, sign in reversed(self.log):
            self.state.spread.update(pod, node, -sign)
            self.state.interpod.update(pod, node, -sign)
        self.log.clear()


def select_victims(state: PlanState, node: NodeInfo, pdbs: Sequence[Mapping[str, Any]]
                   ) -> tuple[tuple[PodInfo, ...], int] | Failure:
    """``SelectVictimsOnNode``: the fewest, least important pods whose removal lets the pod fit."""
    priority = state.plan.info.priority
    potential = sorted((p for p in node.pods if p.priority < priority), key=_importance)
    if not potential:
        return Failure(PLUGIN, UNRESOLVABLE, (Reason.NO_VICTIMS,))
    undo = _Undo(state)
    try:
        for pod in potential:
            undo.apply(pod, node, -1)
        current = node.without_pods(potential)
        failure = state.first_failure(current)
        if failure is not None:
            return failure
        victims, violations = _reprieve_all(state, undo, current, potential, pdbs)
    finally:
        undo.revert()
    if not victims:
        return Failure(PLUGIN, ERROR, (f"expected at least one victim pod on node {node.name!r}",))
    return victims, violations


def _reprieve_all(state: PlanState, undo: _Undo, current: NodeInfo, potential: Sequence[PodInfo],
                  pdbs: Sequence[Mapping[str, Any]]) -> tuple[tuple[PodInfo, ...], int]:
    """Put each pod back (PDB-violating ones first, each group most important first) and keep
    it unless the preemptor then fails a filter; those are the victims."""
    violating, fine = _pdb_split(potential, pdbs)
    victims: list[PodInfo] = []
    violations = 0
    for group, counts in ((violating, 1), (fine, 0)):
        for pod in group:
            with_pod = current.with_pod(pod)
            undo.apply(pod, with_pod, 1)
            if state.first_failure(with_pod) is None:
                current = with_pod
            else:
                undo.apply(pod, with_pod, -1)
                victims.append(pod)
                violations += counts
    if violating and fine:
        victims.sort(key=_importance)
    return tuple(victims), violations


def _pick(candidates: Sequence[Candidate]) -> tuple[Candidate, tuple[str, ...]]:
    """``pickOneNodeForPreemption``: fewest PDB violations, then the lowest highest-priority
    victim, the smallest sum of priorities (each + MaxInt32 + 1), the fewest victims, and the
    latest start among the highest-priority victims."""
    def earliest_top(c: Candidate) -> float:
        top = c.victims[0].priority
        return min(v.start_time if v.start_time is not None else _NOW for v in c.victims if v.priority == top)

    criteria = (
        lambda c: -c.pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + 2**31 for v in c.victims),
        lambda c: -len(c.victims),
        earliest_top,
    )
    remaining = sorted(candidates, key=lambda c: c.node)
    for criterion in criteria:
        best = max(criterion(c) for c in remaining)
        remaining = [c for c in remaining if criterion(c) == best]
        if len(remaining) == 1:
            break
    return remaining[0], tuple(c.node for c in remaining)


def preempt(state: PlanState, cluster: Cluster, filtered: Mapping[str, Failure], num_nodes: int) -> Preemption:
    """``DefaultPreemption.PostFilter``; ``message`` is "" when a candidate was found."""
    if state.plan.preempt_never:
        return Preemption(False, None, (), {}, f"preemption: {Reason.PREEMPTION_NEVER}")
    candidates: list[Candidate] = []
    statuses: dict[str, Failure] = {}
    for name in sorted(n for n, failure in filtered.items() if failure.code == UNSCHEDULABLE):
        outcome = select_victims(state, cluster.nodes[name], cluster.pdbs)
        if isinstance(outcome, Failure):
            statuses[name] = outcome
        else:
            candidates.append(Candidate(name, outcome[0], outcome[1]))
    if not candidates:
        absent = Failure(PLUGIN, UNRESOLVABLE, (Reason.NOT_HELPFUL,))
        inner = fit_error_message(num_nodes, statuses.values(), absent, num_nodes - len(statuses))
        return Preemption(True, None, (), statuses, f"preemption: {inner}")
    chosen, tied = _pick(candidates)
    return Preemption(True, chosen.node, tuple(candidates), statuses, "", tied, chosen)
