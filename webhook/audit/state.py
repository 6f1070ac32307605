"""The cluster an audit reads: explain's ``ClusterState`` (one scheduler snapshot for every
workload's simulation) and the stored objects of every workload kind, with the indexes that
keep 10,000 workloads over 150,000 pods from scanning every pod once per workload.

``AuditState.from_objects`` takes what ``ClusterState.from_objects`` takes (a
``kubectl get -o yaml`` dump, or ``cluster.snapshot.Snapshot.objects``); ``replaced`` swaps
changed workload objects in, sharing the snapshot, for an incremental pass.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.explain.state import ClusterState
from webhook.kube import selectors
from webhook.kube.kinds import Targets
from webhook.kube.objects import controller_of, flatten, meta
from webhook.scheduler.podinfo import PodInfo

__all__ = ["AuditState", "Pods", "key_of"]


def key_of(obj: Mapping[str, Any]) -> str:
    """``Kind/namespace/name`` (``Kind/name`` cluster-scoped): how results and ``changed`` name
    an object besides its uid."""
    kind, namespace, name = str(obj.get("kind") or ""), meta(obj, "namespace"), meta(obj, "name")
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


@dataclass
class AuditState:
    """The snapshot (``cluster``: explain's ``ClusterState``) and the workload objects by key.
    ``objects`` holds every object of a kind the targets know, owned ones included (admission
    decides which are placed through their owner)."""

    cluster: ClusterState
    objects: dict[str, Mapping[str, Any]]
    _pods: Pods | None = field(default=None, repr=False)
    _view_print: str | None = field(default=None, repr=False)
    _by_uid: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def from_objects(cls, items: Iterable[Any], *, targets: Targets,
                     match_label_keys: bool | None = None) -> AuditState:
        flat = list(flatten(items))
        workloads = {key_of(o): o for o in flat if targets.for_object(o) is not None}
        return cls(ClusterState.from_objects(flat, match_label_keys=match_label_keys), workloads)

    def replaced(self, objects: Iterable[Mapping[str, Any]], removed: Iterable[str] = ()) -> AuditState:
        """The same snapshot with ``objects`` stored in place of their namesakes and the keys
        ``removed`` gone: a workload's spec changed, its pods have not moved yet."""
        kept = dict(self.objects)
        for key in removed:
            kept.pop(key, None)
        kept.update((key_of(o), o) for o in objects)
        return AuditState(self.cluster, kept, self._pods, self._view_print)

    def key_for(self, name: str) -> str | None:
        """The key of the object ``name`` names: its key, or its uid; None when none here."""
        if name in self.objects:
            return name
        if self._by_uid is None:
            self._by_uid = {str(uid): key for key, obj in self.objects.items() if (uid := meta(obj, "uid"))}
        return self._by_uid.get(name)

    @property
    def pods(self) -> Pods:
        if self._pods is None:
            self._pods = Pods.of(self.cluster)
        return self._pods

    def view_print(self) -> str:
        """A digest of what admission's cluster view holds besides namespaces (nodes' names,
        labels, taints and cordons, the priority classes): a policy verdict read it."""
        if self._view_print is None:
            digest = hashlib.sha256()
            for node in self.cluster.nodes:
                spec = node.get("spec") or {}
                digest.update(json.dumps([meta(node, "name"), meta(node, "labels"), spec.get("taints"),
                                          spec.get("unschedulable")], sort_keys=True, default=str).encode())
            digest.update(json.dumps(self.cluster.priority_classes, sort_keys=True, default=str).encode())
            self._view_print = digest.hexdigest()
        return self._view_print


@dataclass
class Pods:
    """The snapshot's bound pods indexed by namespace, by label and by controller, with the node
    of each: a selector looks at the pods of its rarest label, not at every pod."""

    node_of: dict[int, str]  # PodInfo.id -> node name
    by_namespace: dict[str, list[PodInfo]]
    by_label: dict[tuple[str, str, str], list[PodInfo]]  # (namespace, key, value)
    by_owner: dict[tuple[str, str, str], list[PodInfo]]  # (namespace, controller kind, controller name)
    anti_affinity: list[PodInfo]  # pods with required pod anti-affinity (they constrain every newcomer)

    @classmethod
    def of(cls, state: ClusterState) -> Pods:
        pods = cls({}, {}, {}, {}, [])
        for info, node in state.cluster.pods():
            pods.node_of[info.id] = node.name
            pods.by_namespace.setdefault(info.namespace, []).append(info)
            for key, value in info.labels.items():
                pods.by_label.setdefault((info.namespace, key, value), []).append(info)
            ref = controller_of(info.obj)
            if ref is not None:
                pods.by_owner.setdefault((info.namespace, str(ref.get("kind")), str(ref.get("name"))), []).append(info)
            if info.required_anti_affinity:
                pods.anti_affinity.append(info)
        return pods

    def selected(self, namespace: str, selector: Mapping[str, Any]) -> list[PodInfo]:
        """The bound pods of ``namespace`` that ``selector`` matches (``selectors.matches``)."""
        labels = selector.get("matchLabels") if isinstance(selector.get("matchLabels"), Mapping) else {}
        pools = [self.by_label.get((namespace, str(k), str(v)), []) for k, v in (labels or {}).items()]
        pool = min(pools, key=len) if pools else self.by_namespace.get(namespace, [])
        return [p for p in pool if selectors.matches(selector, p.labels)]

    def owned(self, namespace: str, kind: str, name: str) -> list[PodInfo]:
        return self.by_owner.get((namespace, kind, name), [])

