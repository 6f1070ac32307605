"""A Deployment's next rollout known to complete without simulating it.

``scheduler.rollouts.rolling_update`` runs a scheduling cycle over every node for every new
pod; with 10,000 Deployments on 5,000 nodes that is hours. Most Deployments need none of it:
their answer follows from the rules of the Deployment controller and of the scheduler's
filters, checked on the few nodes their pods run on. ``rollout_completes`` returns that
answer, or None when it does not follow and the simulation must decide (the audit then runs
it). It never answers "stuck": a stuck rollout is always simulated, so its message is the
scheduler's. The tests check it against the simulation on random small clusters.

The argument. The rollout replaces pods of one template, so every new pod asks what an old
one asks. When

1. the template has no required pod affinity or anti-affinity, no ``DoNotSchedule`` topology
   spread, no host port and no ``nodeName``, and no running pod's required anti-affinity
   term selects the new pods (the InterPodAffinity, PodTopologySpread and NodePorts filters
   then pass on every node, whatever the other pods do: they are the only filters that read
   other pods but for the resources);
2. the Deployment's selector picks exactly ``replicas`` bound pods, each requesting what the
   template requests (NodeResourcesFit then sees a deleted old pod free exactly what a new
   pod takes, pod slot included);
3. every old pod's node takes a new pod once that old pod is gone: it passes the node-only
   filters (cordon, taints, node affinity and nodeSelector, which may have changed since the
   old pod was bound) and fits the new pod with the old one removed (no node shrank under
   its pods);

then each deletion the controller makes opens a place a new pod fits, and the scheduler puts
it there or somewhere else that fits. With ``maxUnavailable`` of at least 1 (and with
``Recreate``, which deletes every old pod first) the controller deletes old pods in the first
sync (``reconcileOldReplicaSets``: ``maxScaledDown`` is ``maxUnavailable`` before any new pod
is available), so new pods become available, allowing more deletions, until none is left:
the rollout completes. With ``maxUnavailable`` 0 no old pod goes before a new one is
available (``replicas - maxUnavailable`` must stay available), so the first surge pod must
fit beside all the old ones:

4. some node passes every filter for a new pod as the cluster is now.

Then the first new pod binds, one old pod may go, and from there on it is the case above.

A StatefulSet's RollingUpdate (``ordered_update``) deletes one pod and creates it again with
the new template, one ordinal at a time from the highest down to the partition, waiting for
each to run: with conditions 1 to 3 for every pod it replaces, the deleted pod's node takes
its successor each time, so the rollout completes. Ordinals that do not run yet are created
first, with no deletion to make room, and are left to the simulation; ``OnDelete`` replaces
nothing.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.audit.state import AuditState
from webhook.kube.deployment import API_DEFAULT, REVISION_KEY, resolve
from webhook.scheduler.filters import NODE_FILTERS, STATIC_FILTERS
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.plan import Options, PodPlan
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.resources import Resource
from webhook.scheduler.rollouts import template_hash

__all__ = ["Completes", "ordered_update_completes", "rollout_completes"]

_DEFAULT_OPTIONS = Options()


@dataclass(frozen=True)
class Completes:
    """The rollout completes, as the simulation's ``RolloutVerdict`` would say (no steps)."""

    replicas: int
    strategy: str
    max_surge: int
    max_unavailable: int
    completes: bool = True


def rollout_completes(deployment: Mapping[str, Any], running: list[PodInfo], state: AuditState, *,
                      options: Options | None = None) -> Completes | None:
    """``Completes`` when the next rollout of ``deployment`` certainly completes on the
    snapshot (the module's conditions 1 to 4 hold); None when only the simulation can say.
    ``running`` are the bound pods its selector picks. Reads the spec as ``rolling_update``."""
    spec = deployment.get("spec") or {}
    template = spec.get("template") or {}
    replicas = spec["replicas"] if isinstance(spec.get("replicas"), int) else 1
    strategy = spec.get("strategy") or {}
    kind = str(strategy.get("type") or "RollingUpdate")
    if kind == "Recreate":
        surge, unavailable = 0, replicas
    else:
        ru = strategy.get("rollingUpdate") or {}
        surge, unavailable = resolve(ru.get("maxSurge", API_DEFAULT), ru.get("maxUnavailable", API_DEFAULT), replicas)
    done = Completes(replicas, kind, surge, unavailable)
    revision = template_hash(template)
    if len(running) != replicas or any(p.labels.get(REVISION_KEY) == revision for p in running):
        return None  # condition 2 (and no pod of the new revision, which the simulation keeps)
    if replicas == 0:
        return done
    namespace = str((deployment.get("metadata") or {}).get("namespace") or "default")
    labels = {**((template.get("metadata") or {}).get("labels") or {}), REVISION_KEY: revision}
    plan = PodPlan({"metadata": {"namespace": namespace, "labels": labels}, "spec": template.get("spec") or {}})
    options = options or _DEFAULT_OPTIONS
    if not _alone(plan, state) or not all(_replaceable(plan, p, state, options) for p in running):
        return None
    if kind == "RollingUpdate" and unavailable == 0 and not _room_somewhere(plan, state, options):
        return None
    return done


def ordered_update_completes(statefulset: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
                             running: list[PodInfo], state: AuditState, *,
                             options: Options | None = None) -> Completes | None:
    """``Completes`` when the StatefulSet's next rollout, replacing ``running`` (the bound pods
    its selector picks) with ``pods`` (its new pods, named by ordinal), certainly completes;
    None when only the simulation can say. Reads the spec as ``ordered_update``."""
    strategy = (statefulset.get("spec") or {}).get("updateStrategy") or {}
    kind = str(strategy.get("type") or "RollingUpdate")
    partition = (strategy.get("rollingUpdate") or {}).get("partition")
    partition = partition if isinstance(partition, int) and partition > 0 else 0
    by_name = {p.name: p for p in running}
    if any(str(pod["metadata"]["name"]) not in by_name for pod in pods):
        return None  # a missing ordinal is created before any deletion: the simulation places it
    done = Completes(len(pods), kind, 0, 1)
    if kind == "OnDelete":
        return done
    options = options or _DEFAULT_OPTIONS
    for pod in pods[partition:]:
        plan = PodPlan(pod)
        if not _alone(plan, state) or not _replaceable(plan, by_name[str(pod["metadata"]["name"])], state, options):
            return None
    return done


def _alone(plan: PodPlan, state: AuditState) -> bool:
    """Condition 1: no filter that reads other pods (but for resources) can reject a new pod."""
    info = plan.info
    if plan.hard_spread or info.required_affinity or info.required_anti_affinity or info.ports or plan.node_name:
        return False
    ns_labels = state.cluster.cluster.namespace_labels
    theirs = ns_labels.get(plan.namespace, {})
    return not any(term.matches(plan.namespace, plan.labels, theirs)
                   for pod in state.pods.anti_affinity for term in pod.required_anti_affinity)


def _replaceable(plan: PodPlan, old: PodInfo, state: AuditState, options: Options) -> bool:
    """Conditions 2 and 3 for one old pod: it asks what a new pod asks, and its node takes a
    new pod once it is gone."""
    if _amounts(old.requests) != _amounts(plan.info.requests):
        return False
    node = state.cluster.cluster.nodes.get(state.pods.node_of.get(old.id, ""))
    if node is None or any(check(plan, node, options) is not None for check in STATIC_FILTERS):
        return False
    return _within(node)


def _within(node: NodeInfo) -> bool:
    """The node's pods fit it (no more pods, and no more of any resource, than it allows):
    then a pod asking what one of them asks fits once that one is gone (``fitsRequest``
    compares the count plus one, and each asked amount plus what the others request, with
    allocatable). Stricter than the filter where the pod asks for none of a resource, which
    only makes the shortcut decline."""
    alloc, used = node.allocatable, node.requested
    if len(node.pods) > alloc.pods or used.cpu > alloc.cpu or used.memory > alloc.memory:
        return False
    return used.ephemeral <= alloc.ephemeral and all(v <= alloc.scalars.get(k, 0) for k, v in used.scalars.items())


def _room_somewhere(plan: PodPlan, state: AuditState, options: Options) -> bool:
    """Condition 4: a node where every filter passes for a new pod now (the first found)."""
    return any(_fits(plan, node, options) for node in state.cluster.cluster.nodes.values())


def _fits(plan: PodPlan, node: NodeInfo, options: Options) -> bool:
    return all(check(plan, node, options) is None for check in NODE_FILTERS)


def _amounts(resource: Resource) -> tuple[int, int, int, tuple[tuple[str, int], ...]]:
    return resource.cpu, resource.memory, resource.ephemeral, tuple(sorted(resource.scalars.items()))
