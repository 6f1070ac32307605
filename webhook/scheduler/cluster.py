"""A cluster snapshot: nodes with their bound pods, namespace labels and PodDisruptionBudgets.

This is the scheduler's ``Snapshot`` of its cache. Pods in phase Succeeded or Failed are left
out (``kube.pods.terminal``), as the scheduler's pod informer never lists them; pods without
``spec.nodeName`` are pending and not on any node (nominated pods are not modelled); pods bound
to a node the snapshot does not have are dropped, as the scheduler's cache keeps them on a
placeholder NodeInfo no filter sees.

Snapshots are values: ``bind`` and ``evict`` return a new snapshot sharing every unchanged
node. The per-pod scheduling state (``PlanState``: PreFilter/PreScore counts kept in step
with each bind, as the plugins' AddPod/RemovePod extensions keep theirs) travels with the
newest snapshot; an older snapshot used again rebuilds its own, which is correct but slower.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from webhook.kube import pods as kube_pods
from webhook.kube.objects import by_kind, flatten
from webhook.scheduler.labels import str_labels
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.podinfo import PodInfo

__all__ = ["Cluster", "Tracker"]


class Tracker(Protocol):
    """State derived from a snapshot that follows pods being bound or evicted."""

    def pod_added(self, pod: PodInfo, node: NodeInfo) -> None: ...

    def pod_removed(self, pod: PodInfo, node: NodeInfo) -> None: ...


class Cluster:
    """Nodes (in the order given) with their pods, plus what some plugins read besides."""

    __slots__ = ("namespace_labels", "nodes", "pdbs", "trackers")

    def __init__(self, nodes: Iterable[NodeInfo], namespace_labels: Mapping[str, Mapping[str, Any]] | None = None,
                 pdbs: Sequence[Mapping[str, Any]] = ()) -> None:
        self.nodes: dict[str, NodeInfo] = {n.name: n for n in nodes}
        self.namespace_labels: dict[str, dict[str, str]] = {
            ns: str_labels(labels) for ns, labels in (namespace_labels or {}).items()}
        self.pdbs: tuple[Mapping[str, Any], ...] = tuple(pdbs)
        # Keyed by pod signature; owned by this snapshot until bind/evict hands them on.
        self.trackers: dict[str, Tracker] = {}

    @classmethod
    def from_objects(cls, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] = (),
                     namespaces: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]] | None = None,
                     pdbs: Iterable[Mapping[str, Any]] = ()) -> Cluster:
        """From API objects: Node and Pod dicts, namespace labels (a mapping namespace -> labels,
        or Namespace objects) and PodDisruptionBudgets."""
        infos = {n.name: n for n in (NodeInfo(obj) for obj in nodes)}
        on_node: dict[str, list[PodInfo]] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or node not in infos or kube_pods.terminal(pod):
                continue
            on_node.setdefault(node, []).append(PodInfo(pod, strict=False))
        for name, bound in on_node.items():
            infos[name] = infos[name].with_pods(bound)
        return cls(infos.values(), _namespace_labels(namespaces), tuple(pdbs))

    @classmethod
    def from_dump(cls, objects: Iterable[Any]) -> Cluster:
        """From a mixed dump (``kubectl get nodes,pods,namespaces,pdb -A -o yaml``): Lists are
        unpacked and each object sorted by kind; other kinds are ignored."""
        groups = by_kind(flatten(objects))
        return cls.from_objects(groups.get("Node", ()), groups.get("Pod", ()), groups.get("Namespace", ()),
                                groups.get("PodDisruptionBudget", ()))

    def _successor(self, nodes: dict[str, NodeInfo]) -> Cluster:
        out = object.__new__(Cluster)
        out.nodes = nodes
        out.namespace_labels = self.namespace_labels
        out.pdbs = self.pdbs
        out.trackers = self.trackers
        self.trackers = {}
        return out

    def bind(self, pod: Mapping[str, Any] | PodInfo, node_name: str) -> Cluster:
        """A snapshot with ``pod`` bound to ``node_name`` (``spec.nodeName`` is not read)."""
        info = pod if isinstance(pod, PodInfo) else PodInfo(pod, strict=False)
        nodes = dict(self.nodes)
        node = nodes[node_name] = self.nodes[node_name].with_pod(info)
        out = self._successor(nodes)
        for tracker in out.trackers.values():
            tracker.pod_added(info, node)
        return out

    def evict(self, pods: Iterable[PodInfo]) -> Cluster:
        """A snapshot without ``pods`` (matched by identity, wherever they are bound)."""
        gone = {p.id for p in pods}
        nodes = dict(self.nodes)
        removed: list[tuple[PodInfo, NodeInfo]] = []
        for name, node in self.nodes.items():
            leaving = [p for p in node.pods if p.id in gone]
            if leaving:
                nodes[name] = node.without_pods(leaving)
                removed += [(p, nodes[name]) for p in leaving]
        out = self._successor(nodes)
        for tracker in out.trackers.values():
            for pod, node in removed:
                tracker.pod_removed(pod, node)
        return out

    def unbind(self, pod: PodInfo, node_name: str) -> Cluster:
        """A snapshot without ``pod``, which is bound to ``node_name``: only that node is copied
        (``evict`` looks for its pods on every node, which for one pod of 150,000 is the cost)."""
        nodes = dict(self.nodes)
        node = nodes[node_name] = self.nodes[node_name].without_pods((pod,))
        out = self._successor(nodes)
        for tracker in out.trackers.values():
            tracker.pod_removed(pod, node)
        return out

    def pods(self) -> Iterable[tuple[PodInfo, NodeInfo]]:
        for node in self.nodes.values():
            for pod in node.pods:
                yield pod, node

    def find_pod(self, namespace: str, name: str) -> PodInfo | None:
        return next((p for p, _ in self.pods() if p.namespace == namespace and p.name == name), None)

    def __repr__(self) -> str:
        return f"Cluster({len(self.nodes)} nodes, {sum(len(n.pods) for n in self.nodes.values())} pods)"


def _namespace_labels(namespaces: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]] | None
                      ) -> dict[str, Mapping[str, Any]]:
    if namespaces is None:
        return {}
    if isinstance(namespaces, Mapping):
        return dict(namespaces)
    return {str((ns.get("metadata") or {}).get("name", "")): (ns.get("metadata") or {}).get("labels") or {}
            for ns in namespaces}
