"""Placing a workload's pods one after another, and which running pods are its own.

``place_all`` is what the scheduler does with the pods a controller creates at once: each
scheduling cycle sees the pods bound before it. A pod that fits only once lower-priority
pods are preempted is placed on the nominated node and lists its victims (the scheduler
binds it there in a later cycle, after the victims are gone).

``statefulset_update`` hands a StatefulSet's pods and its running ones to the StatefulSet
controller's model, ``scheduler.rollouts.ordered_update``, beside the Deployment's.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.explain.workloads import Workload
from webhook.kube import selectors
from webhook.kube.deployment import REVISION_KEY
from webhook.scheduler.cluster import Cluster
from webhook.scheduler.framework import Result, place
from webhook.scheduler.plan import Options
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.rollouts import RolloutVerdict, ordered_update

__all__ = ["PlacementVerdict", "Replica", "owned_pods", "place_all", "selected_pods", "statefulset_update"]


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


def selected_pods(workload: Workload, cluster: Cluster) -> list[PodInfo]:
    """The running pods ``workload``'s selector picks in its namespace: what its update
    replaces (the Deployment and StatefulSet controllers adopt the pods their selector
    matches)."""
    if workload.own_selector is None:
        return []
    return [p for p, _ in cluster.pods()
            if p.namespace == workload.namespace and selectors.matches(workload.own_selector, p.labels)]


def owned_pods(workload: Workload, cluster: Cluster, replica_sets: Iterable[Mapping[str, Any]] = ()) -> list[PodInfo]:
    """The running pods ``workload``'s controller made, by each pod's controller reference
    (``metav1.GetControllerOf``: the ownerReference with ``controller: true``).

    A Deployment's pods are controlled by its ReplicaSets: those of ``replica_sets`` that it
    controls, or, when the state lacks them, the one named ``<deployment>-<pod-template-hash>``
    as the Deployment controller names them (``getNewReplicaSet``, pkg/controller/deployment/
    sync.go). A KubeVirt VirtualMachine's launcher pod is controlled by the VirtualMachineInstance
    of the same name. Labels say nothing here: a bare Pod has no selector and no replicas, and
    a pod that merely carries a workload's labels is someone else's.
    """
    ns = workload.namespace
    if workload.kind == "Deployment" and workload.group == "apps":
        ours = {_name(rs) for rs in replica_sets if _namespace(rs) == ns and _controlled_by(rs, workload)}

        def made(pod: PodInfo) -> bool:
            ref = _controller_ref(pod.obj)
            if ref is None or ref.get("kind") != "ReplicaSet" or _group(ref) != "apps":
                return False
            return ref.get("name") in ours or ref.get("name") == f"{workload.name}-{pod.labels.get(REVISION_KEY)}"
    elif workload.kind == "VirtualMachine" and workload.group == "kubevirt.io":
        instance = Workload("VirtualMachineInstance", ns, workload.name, [], None, None, group="kubevirt.io")

        def made(pod: PodInfo) -> bool:
            return _controlled_by(pod.obj, instance)
    else:
        def made(pod: PodInfo) -> bool:
            return _controlled_by(pod.obj, workload)
    return [p for p, _ in cluster.pods() if p.namespace == ns and made(p)]


def _controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return next((r for r in refs if isinstance(r, Mapping) and r.get("controller") is True), None)


def _controlled_by(obj: Mapping[str, Any], owner: Workload) -> bool:
    """``obj``'s controller reference names ``owner`` (its uid too, where both are known)."""
    ref = _controller_ref(obj)
    if ref is None or ref.get("kind") != owner.kind or ref.get("name") != owner.name or _group(ref) != owner.group:
        return False
    return owner.uid is None or not ref.get("uid") or ref.get("uid") == owner.uid


def _group(ref: Mapping[str, Any]) -> str:
    api_version = str(ref.get("apiVersion") or "")
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def statefulset_update(statefulset: Mapping[str, Any], workload: Workload, cluster: Cluster, *,
                       options: Options | None = None) -> RolloutVerdict:
    """Replace the running pods of a StatefulSet with ``workload.pods`` (named by ordinal), as
    ``scheduler.rollouts.ordered_update`` does; the running pods are those its selector picks."""
    running = {p.name: p for p in selected_pods(workload, cluster)}
    return ordered_update(statefulset, workload.pods, running, cluster, default_selector=workload.default_selector,
                          options=options)
