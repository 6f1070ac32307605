"""The cluster ``explain`` simulates on, from ``kubectl get ... -o yaml`` dumps or a live read.

One pass sorts the objects by kind: Nodes and Pods become the scheduler's snapshot
(``scheduler.Cluster``), Namespaces give the labels namespace selectors read,
PriorityClasses the priority admission would give, PodDisruptionBudgets what preemption
weighs, and Deployments, StatefulSets, DaemonSets and ReplicaSets which workloads exist (an
existing Deployment is explained as an update). What the snapshot cannot hold is said, never
dropped silently: a Node without ``status.allocatable`` (the scheduler reads nothing else, so
no pod fits there), Pods without ``spec.nodeName`` (Pending: they take no room), Pods bound to
a node the state lacks, and objects of kinds the simulation does not read.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.cluster.view import StaticClusterView
from webhook.kube import pods as kube_pods
from webhook.kube.objects import by_kind, flatten
from webhook.scheduler.cluster import Cluster

__all__ = ["WORKLOAD_KINDS", "ClusterState"]

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"})
_READ = frozenset({"Node", "Pod", "Namespace", "PriorityClass", "PodDisruptionBudget"}) | WORKLOAD_KINDS


@dataclass
class ClusterState:
    """The snapshot and what the workload translation and admission read besides."""

    cluster: Cluster
    nodes: list[Mapping[str, Any]]
    priority_classes: dict[str, Mapping[str, Any]]
    workloads: dict[tuple[str, str, str], Mapping[str, Any]]  # (kind, namespace, name) -> object
    view: StaticClusterView
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_objects(cls, objects: Iterable[Any], *, match_label_keys: bool | None = None) -> ClusterState:
        groups = by_kind(flatten(objects))
        ignored = {kind or "(no kind)": len(group) for kind, group in groups.items() if kind not in _READ}
        nodes = groups.get("Node", [])
        pods = groups.get("Pod", [])
        notes = _node_notes(nodes) + _pod_notes(pods, {_name(n) for n in nodes})
        if ignored:
            shown = ", ".join(f"{count} {kind}" for kind, count in sorted(ignored.items()))
            notes.append(f"the cluster state's objects of other kinds are not read: {shown}")
        if not nodes:
            notes.append("the cluster state has no Nodes: no pod can be placed")
        cluster = Cluster.from_objects(nodes, pods, groups.get("Namespace", ()), groups.get("PodDisruptionBudget", ()))
        workloads = {(str(o.get("kind")), _namespace(o), _name(o)): o
                     for kind in WORKLOAD_KINDS for o in groups.get(kind, ())}
        view = StaticClusterView.from_objects([*nodes, *groups.get("Namespace", ()), *groups.get("PriorityClass", ())],
                                              match_label_keys=match_label_keys)
        return cls(cluster, nodes, dict(view.priority_classes), workloads, view, notes)

    def workload(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.workloads.get((kind, namespace, name))

    def of_kind(self, kind: str) -> list[Mapping[str, Any]]:
        """The workloads of one kind (ReplicaSets, say), in every namespace."""
        return [obj for (k, _, _), obj in self.workloads.items() if k == kind]


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _node_notes(nodes: list[Mapping[str, Any]]) -> list[str]:
    # NodeInfo.SetNode reads status.allocatable only; without it the node allows no pods.
    bare = [_name(n) for n in nodes if not (n.get("status") or {}).get("allocatable")]
    if not bare:
        return []
    return [f"{_count(len(bare), 'Node')} without status.allocatable ({_few(bare)}): the scheduler reads "
            "nothing else, so no pod fits there (Too many pods)"]


def _pod_notes(pods: list[Mapping[str, Any]], node_names: set[str]) -> list[str]:
    live = [p for p in pods if not kube_pods.terminal(p)]
    unbound = [f"{_namespace(p)}/{_name(p)}" for p in live if not (p.get("spec") or {}).get("nodeName")]
    elsewhere = [f"{_namespace(p)}/{_name(p)}" for p in live
                 if (p.get("spec") or {}).get("nodeName") and (p.get("spec") or {}).get("nodeName") not in node_names]
    notes = []
    if unbound:
        notes.append(f"{_count(len(unbound), 'Pod')} without spec.nodeName ({_few(unbound)}) are Pending: they take "
                     "no room and are not placed (only the workloads given with -f are)")
    if elsewhere:
        notes.append(f"{_count(len(elsewhere), 'Pod')} bound to nodes the cluster state lacks ({_few(elsewhere)}) "
                     "are left out, as the scheduler leaves them off every node it filters")
    return notes


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _few(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
