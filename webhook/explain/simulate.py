"""Placing a workload's pods one after another, and updating a running StatefulSet.

``place_all`` is what the scheduler does with the pods a controller creates at once: each
scheduling cycle sees the pods bound before it. A pod that fits only once lower-priority
pods are preempted is placed on the nominated node and lists its victims (the scheduler
binds it there in a later cycle, after the victims are gone).

``statefulset_update`` is the StatefulSet controller's RollingUpdate
(``updateStatefulSet`` in pkg/controller/statefulset/stateful_set_control.go): pods missing
below ``replicas`` are created first; then, from the highest ordinal down to the partition,
one pod at a time is deleted and created again with the new template, and the controller
waits for it to run before the next (``maxUnavailable`` is 1 unless the
MaxUnavailableStatefulSet gate is on, which is not modelled). ``OnDelete`` replaces nothing.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.explain.workloads import Workload
from webhook.kube import selectors
from webhook.kube.scheduler.cluster import Cluster
from webhook.kube.scheduler.framework import Result, place
from webhook.kube.scheduler.plan import Options
from webhook.kube.scheduler.podinfo import PodInfo
from webhook.kube.scheduler.rollingupdate import RolloutStep, RolloutVerdict

__all__ = ["PlacementVerdict", "Replica", "own_pods", "place_all", "statefulset_update"]


@dataclass(frozen=True)
class Replica:
    """One pod's scheduling cycle: the node chosen (None: Pending), its score, the nodes tied
    with it, the pods it would preempt, and the cycle itself."""

    index: int
    pod: str
    node: str | None
    score: int | None
    tied: tuple[str, ...]
    victims: tuple[str, ...]
    result: Result

    @property
    def message(self) -> str:
        return self.result.message if self.node is None else ""


@dataclass(frozen=True)
class PlacementVerdict:
    """Every replica's cycle and the snapshot after the last one."""

    items: tuple[Replica, ...]
    cluster: Cluster

    @property
    def completes(self) -> bool:
        return all(r.node is not None for r in self.items)

    @property
    def replicas(self) -> int:
        return len(self.items)

    @property
    def placed(self) -> int:
        return sum(1 for r in self.items if r.node is not None)

    @property
    def pending(self) -> int:
        return len(self.items) - self.placed

    @property
    def result(self) -> Result | None:
        """The first Pending replica's cycle (None when every replica placed)."""
        return next((r.result for r in self.items if r.node is None), None)


def place_all(workload: Workload, cluster: Cluster, *, options: Options | None = None) -> PlacementVerdict:
    """Schedule ``workload.pods`` in order, each seeing the ones placed before it."""
    items: list[Replica] = []
    for index, pod in enumerate(workload.pods):
        placement = place(pod, cluster, default_selector=workload.default_selector, options=options,
                          apply_preemption=True)
        cluster = placement.cluster
        node = placement.node
        result = placement.result
        score = result.score(node) if node is not None and node in result.feasible else None
        tied = tuple(n for n in placement.tied if n != node)
        items.append(Replica(index, str(pod["metadata"]["name"]), node, score, tied, placement.evicted, result))
    return PlacementVerdict(tuple(items), cluster)


def own_pods(workload: Workload, cluster: Cluster) -> list[PodInfo]:
    """The running pods of ``workload``: its namespace, its selector."""
    if workload.own_selector is None:
        return []
    return [p for p, _ in cluster.pods()
            if p.namespace == workload.namespace and selectors.matches(workload.own_selector, p.labels)]


def statefulset_update(statefulset: Mapping[str, Any], workload: Workload, cluster: Cluster, *,
                       options: Options | None = None) -> RolloutVerdict:
    """Replace the running pods of a StatefulSet with ``workload.pods`` (named by ordinal)."""
    spec = statefulset.get("spec") or {}
    strategy = spec.get("updateStrategy") or {}
    kind = str(strategy.get("type") or "RollingUpdate")
    partition = (strategy.get("rollingUpdate") or {}).get("partition")
    partition = partition if isinstance(partition, int) and partition > 0 else 0
    running = {p.name: p for p in own_pods(workload, cluster)}
    replicas = len(workload.pods)
    steps: list[RolloutStep] = []
    available = sum(1 for pod in workload.pods if pod["metadata"]["name"] in running)
    lowest = available
    # Missing ordinals first, lowest first (OrderedReady creates them in order), then the
    # replacements from the highest ordinal down to the partition.
    missing = [pod for pod in workload.pods if pod["metadata"]["name"] not in running]
    replace: Sequence[dict[str, Any]] = [] if kind == "OnDelete" else [
        pod for pod in reversed(workload.pods[partition:]) if pod["metadata"]["name"] in running]
    for pod in [*missing, *replace]:
        name = str(pod["metadata"]["name"])
        deleted: tuple[str, ...] = ()
        if name in running:
            cluster = cluster.evict([running.pop(name)])
            deleted = (name,)
            available -= 1
            lowest = min(lowest, available)
        placement = place(pod, cluster, default_selector=workload.default_selector, options=options)
        step_lowest = available
        if placement.node is None:
            steps.append(RolloutStep(len(steps) + 1, (name,), deleted, (), (name,), available, step_lowest,
                                     available + 1))
            return RolloutVerdict(False, replicas, kind, 0, 1, tuple(steps), lowest, name, placement.result, cluster)
        cluster = placement.cluster
        available += 1
        score = placement.result.score(placement.node)
        steps.append(RolloutStep(len(steps) + 1, (name,), deleted, ((name, placement.node),), (), available,
                                 step_lowest, available, ((score, placement.tied),)))
    return RolloutVerdict(True, replicas, kind, 0, 1, tuple(steps), lowest, cluster=cluster)
