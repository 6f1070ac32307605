"""Rollouts as their controllers perform them, with every new pod placed by the scheduler model:
does the rollout finish, in how many steps, and with how many replicas available at the lowest
point? ``rolling_update`` is a Deployment's, ``ordered_update`` a StatefulSet's.

One step is one sync of the controller followed by the scheduler's cycles:

- ``RollingUpdate`` (``rolloutRolling`` in pkg/controller/deployment/rolling.go):
  ``reconcileNewReplicaSet`` scales the new ReplicaSet up while all pods stay within
  ``replicas + maxSurge`` (``NewRSNewReplicas``); then ``reconcileOldReplicaSets`` scales the
  old ones down while ``replicas - maxUnavailable`` pods stay available, new pods that are
  not yet available counted against it (``maxScaledDown``);
- ``Recreate`` (recreate.go): every old pod goes first, then the new ReplicaSet is scaled up;
- then the scheduler places each pending new pod in turn, each seeing the ones before.

What the model leaves out, and why the answer still holds: a pod is available once it is
bound (``minReadySeconds``, readiness and image pulls only make a real rollout slower, never
change whether it finishes); old pods are those of the cluster snapshot that the
Deployment's selector matches, all bound and available; the ReplicaSet controller's choice
of which old pod to delete (``getPodsToDelete``, ranked by ``ActivePodsWithRanks``) is taken
as pods on the nodes holding most of the Deployment's pods first, then by name, since a
snapshot has no readiness times to break ties with.

A step that changes nothing is a fixed point of controller and scheduler alike: the rollout
is stuck, and the verdict carries the pending pod and the scheduler's message for it.

``ordered_update`` is the StatefulSet controller's RollingUpdate (``updateStatefulSet`` in
pkg/controller/statefulset/stateful_set_control.go): pods missing below ``replicas`` are created
first; then, from the highest ordinal down to the partition, one pod at a time is deleted and
created again with the new template, and the controller waits for it to run before the next
(``maxUnavailable`` is 1 unless the MaxUnavailableStatefulSet gate is on, which is not
modelled). ``OnDelete`` replaces nothing.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.kube import selectors
from webhook.kube.deployment import API_DEFAULT, REVISION_KEY, resolve
from webhook.scheduler.cluster import Cluster
from webhook.scheduler.framework import Result, place
from webhook.scheduler.plan import Options
from webhook.scheduler.podinfo import PodInfo

__all__ = ["RolloutStep", "RolloutVerdict", "ordered_update", "rolling_update"]


@dataclass(frozen=True)
class RolloutStep:
    """One sync: what the controller created and deleted, and where the scheduler put pods."""

    number: int
    created: tuple[str, ...]
    deleted: tuple[str, ...]
    placed: tuple[tuple[str, str], ...]  # (pod, node)
    pending: tuple[str, ...]
    available: int  # after the step
    lowest: int  # the fewest available during the step (after the deletions, before placing)
    pods: int  # old and new pods after the controller's moves (maxSurge bounds this)
    scores: tuple[tuple[int, tuple[str, ...]], ...] = ()  # per placed pod: its node's score and the tied nodes


@dataclass(frozen=True)
class RolloutVerdict:
    """The rollout's outcome. ``min_available`` is the lowest count of available replicas seen."""

    completes: bool
    replicas: int
    strategy: str
    max_surge: int
    max_unavailable: int
    steps: tuple[RolloutStep, ...]
    min_available: int
    pending_pod: str | None = None
    result: Result | None = None  # the pending pod's last scheduling cycle, when stuck
    cluster: Cluster | None = None  # the snapshot after the last step

    @property
    def message(self) -> str:
        return self.result.message if self.result is not None else ""

    def summary(self) -> str:
        if self.completes:
            return (f"the rollout completes in {_steps(len(self.steps))} with at least {self.min_available} "
                    f"of {self.replicas} replicas available")
        return (f"the rollout is stuck after {_steps(len(self.steps))}: pod {self.pending_pod} stays Pending: "
                f"{self.message}")


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def rolling_update(deployment: Mapping[str, Any], cluster: Cluster, *, options: Options | None = None) -> RolloutVerdict:
    """Simulate updating the running pods of ``deployment`` in ``cluster`` to its template."""
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    template = spec.get("template") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "deployment")
    replicas = spec["replicas"] if isinstance(spec.get("replicas"), int) else 1  # the API default
    selector = spec.get("selector") or {}
    strategy = spec.get("strategy") or {}
    kind = str(strategy.get("type") or "RollingUpdate")
    ru = strategy.get("rollingUpdate") or {}
    if kind == "Recreate":
        surge, unavailable = 0, replicas
    else:
        surge, unavailable = resolve(ru.get("maxSurge", API_DEFAULT), ru.get("maxUnavailable", API_DEFAULT), replicas)
    revision = template_hash(template)
    rs_selector = _with_revision(selector, revision)

    def new_pod(index: int) -> dict[str, Any]:
        labels = {**((template.get("metadata") or {}).get("labels") or {}), REVISION_KEY: revision}
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-{revision}-{index}", "namespace": namespace, "labels": labels},
                "spec": template.get("spec") or {}}

    # Old pods with the node each runs on: pods never move, so this is read once.
    old = [(p, node.name) for p, node in cluster.pods()
           if p.namespace == namespace and selectors.matches(selector, p.labels) and p.labels.get(REVISION_KEY) != revision]
    new_replicas, bound = 0, 0
    pending: list[dict[str, Any]] = []
    steps: list[RolloutStep] = []
    lowest = len(old)
    last: Result | None = None
    # Each step either creates, deletes or binds a pod, so a rollout that moves at all ends
    # within this many steps; the bound only guards against a model bug looping.
    for number in range(1, 4 * (replicas + len(old)) + 8):
        if new_replicas == replicas and not pending and not old:
            break
        created: list[str] = []
        # reconcileNewReplicaSet
        if kind != "Recreate" or not old:
            room = replicas - new_replicas if kind == "Recreate" else replicas + surge - (len(old) + new_replicas)
            up = max(0, min(room, replicas - new_replicas))
            for index in range(new_replicas, new_replicas + up):
                pod = new_pod(index)
                pending.append(pod)
                created.append(pod["metadata"]["name"])
            new_replicas += up
        # reconcileOldReplicaSets
        min_available = replicas - unavailable
        max_scaled_down = len(old) + new_replicas - min_available - len(pending)
        down = len(old) if kind == "Recreate" else max(0, min(max_scaled_down, len(old)))
        leaving = _to_delete(old, down)
        if leaving:
            cluster = cluster.evict(leaving)
            gone = {p.id for p in leaving}
            old = [(p, node) for p, node in old if p.id not in gone]
        step_lowest = len(old) + bound
        lowest = min(lowest, step_lowest)
        # the scheduler, one pending pod at a time
        placed: list[tuple[str, str]] = []
        scores: list[tuple[int, tuple[str, ...]]] = []
        still: list[dict[str, Any]] = []
        for pod in pending:
            placement = place(pod, cluster, default_selector=rs_selector, options=options)
            if placement.node is None:
                still.append(pod)
                last = placement.result
                continue
            cluster = placement.cluster
            placed.append((pod["metadata"]["name"], placement.node))
            scores.append((placement.result.score(placement.node), placement.tied))
        pending, bound = still, bound + len(placed)
        steps.append(RolloutStep(number, tuple(created), tuple(p.name for p in leaving), tuple(placed),
                                 tuple(p["metadata"]["name"] for p in pending), len(old) + bound, step_lowest,
                                 len(old) + new_replicas, tuple(scores)))
        if not created and not leaving and not placed:
            steps.pop()  # the fixed point itself is no step
            stuck = pending[0]["metadata"]["name"] if pending else None
            return RolloutVerdict(False, replicas, kind, surge, unavailable, tuple(steps), lowest, stuck, last, cluster)
    return RolloutVerdict(True, replicas, kind, surge, unavailable, tuple(steps), lowest, cluster=cluster)


def template_hash(template: Mapping[str, Any]) -> str:
    """A stand-in for ``controller.ComputeHash``: stable for a template and different for a
    changed one, which is all the simulation needs of it (the real value is an FNV hash of the
    Go struct, not reproducible from JSON)."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _with_revision(selector: Mapping[str, Any], revision: str) -> dict[str, Any]:
    # The new ReplicaSet's selector: the Deployment's plus pod-template-hash (getNewReplicaSet).
    return {**selector, "matchLabels": {**(selector.get("matchLabels") or {}), REVISION_KEY: revision}}


def _to_delete(old: list[tuple[PodInfo, str]], count: int) -> list[PodInfo]:
    if count <= 0:
        return []
    crowd = Counter(node for _, node in old)
    ranked = sorted(old, key=lambda pair: (-crowd[pair[1]], pair[0].name))
    return [p for p, _ in ranked[:count]]


def ordered_update(statefulset: Mapping[str, Any], pods: Sequence[dict[str, Any]], running: Mapping[str, PodInfo],
                   cluster: Cluster, *, default_selector: Mapping[str, Any] | None = None,
                   options: Options | None = None) -> RolloutVerdict:
    """Replace a StatefulSet's ``running`` pods (by name) with ``pods``, its new pods named by
    ordinal, as its controller does (see the module's docstring)."""
    spec = statefulset.get("spec") or {}
    strategy = spec.get("updateStrategy") or {}
    kind = str(strategy.get("type") or "RollingUpdate")
    partition = (strategy.get("rollingUpdate") or {}).get("partition")
    partition = partition if isinstance(partition, int) and partition > 0 else 0
    running = dict(running)
    replicas = len(pods)
    steps: list[RolloutStep] = []
    available = sum(1 for pod in pods if pod["metadata"]["name"] in running)
    lowest = available
    # Missing ordinals first, lowest first (OrderedReady creates them in order), then the
    # replacements from the highest ordinal down to the partition.
    missing = [pod for pod in pods if pod["metadata"]["name"] not in running]
    replace: Sequence[dict[str, Any]] = [] if kind == "OnDelete" else [
        pod for pod in reversed(pods[partition:]) if pod["metadata"]["name"] in running]
    for pod in [*missing, *replace]:
        name = str(pod["metadata"]["name"])
        deleted: tuple[str, ...] = ()
        if name in running:
            cluster = cluster.evict([running.pop(name)])
            deleted = (name,)
            available -= 1
            lowest = min(lowest, available)
        placement = place(pod, cluster, default_selector=default_selector, options=options)
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
