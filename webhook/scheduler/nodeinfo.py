"""``framework.NodeInfo``: a node and the aggregates of the pods bound to it.

Kept as the scheduler keeps them (``NodeInfo.update``, ``updateUsedPorts``): ``requested`` is
the sum of ``PodRequests`` of its pods, ``non0_cpu``/``non0_mem`` the same with the non-zero
defaults, ``used_ports`` the ``HostPortInfo`` (ip -> {(protocol, port)}), and the pods with
(anti-)affinity listed apart so the InterPodAffinity plugin can skip the others.

A NodeInfo is never changed in place: ``with_pod``/``without_pods`` return a new one that
shares what did not change, so a cluster snapshot can be copied cheaply when a pod is placed.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from webhook.scheduler.nodeaffinity import node_identity
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.resources import Resource, to_resource

__all__ = ["NodeInfo"]

_ANY_IP = "0.0.0.0"


class NodeInfo:
    """One node: its labels, taints and allocatable, and what its pods hold."""

    __slots__ = (
        "_by_namespace",
        "allocatable",
        "labels",
        "name",
        "non0_cpu",
        "non0_mem",
        "obj",
        "pods",
        "requested",
        "taints",
        "unschedulable",
        "used_ports",
        "with_affinity",
        "with_required_anti_affinity",
    )

    def __init__(self, node: Mapping[str, Any]) -> None:
        spec = node.get("spec") or {}
        self.obj = node
        self.labels, self.name = node_identity(node)
        self.taints: tuple[Mapping[str, Any], ...] = tuple(spec.get("taints") or ())
        self.unschedulable = bool(spec.get("unschedulable"))
        # NodeInfo.SetNode: Allocatable = NewResource(node.Status.Allocatable) - capacity is not read.
        self.allocatable: Resource = to_resource((node.get("status") or {}).get("allocatable") or {})
        self.pods: tuple[PodInfo, ...] = ()
        self.requested = Resource()
        self.non0_cpu = 0
        self.non0_mem = 0
        self.used_ports: dict[str, frozenset[tuple[str, int]]] = {}
        self.with_affinity: tuple[PodInfo, ...] = ()
        self.with_required_anti_affinity: tuple[PodInfo, ...] = ()
        self._by_namespace: dict[str, tuple[PodInfo, ...]] | None = None

    def _copy(self) -> NodeInfo:
        clone = object.__new__(NodeInfo)
        for slot in NodeInfo.__slots__:
            object.__setattr__(clone, slot, getattr(self, slot))
        clone.requested = self.requested.copy()
        clone._by_namespace = None  # every copy changes the pods
        return clone

    def with_pods(self, pods: Collection[PodInfo]) -> NodeInfo:
        """A copy with ``pods`` added (``NodeInfo.AddPodInfo``)."""
        clone = self._copy()
        clone.pods = self.pods + tuple(pods)
        ports = dict(self.used_ports)
        for pod in pods:
            clone._count(pod, 1)
            for ip, protocol, port in pod.ports:
                ports[ip] = ports.get(ip, frozenset()) | {(protocol, port)}
        clone.used_ports = ports
        clone.with_affinity = self.with_affinity + tuple(p for p in pods if p.has_affinity)
        clone.with_required_anti_affinity = self.with_required_anti_affinity + tuple(
            p for p in pods if p.required_anti_affinity)
        return clone

    def with_pod(self, pod: PodInfo) -> NodeInfo:
        return self.with_pods((pod,))

    def without_pods(self, pods: Collection[PodInfo]) -> NodeInfo:
        """A copy with ``pods`` removed (``NodeInfo.RemovePod``)."""
        gone = {p.id for p in pods}
        clone = self._copy()
        clone.pods = tuple(p for p in self.pods if p.id not in gone)
        ports = {ip: set(pairs) for ip, pairs in self.used_ports.items()}
        for pod in pods:
            if pod.id in gone:
                clone._count(pod, -1)
                for ip, protocol, port in pod.ports:
                    # HostPortInfo.Remove deletes the entry even if another pod also holds it.
                    ports.get(ip, set()).discard((protocol, port))
        clone.used_ports = {ip: frozenset(pairs) for ip, pairs in ports.items() if pairs}
        clone.with_affinity = tuple(p for p in self.with_affinity if p.id not in gone)
        clone.with_required_anti_affinity = tuple(p for p in self.with_required_anti_affinity if p.id not in gone)
        return clone

    def in_namespace(self, namespace: str) -> tuple[PodInfo, ...]:
        """The node's pods of one namespace, grouped on first use: PodTopologySpread counts the
        pods of the incoming pod's namespace on every node, and a node of 30 pods from 40
        namespaces holds one or two of them (the NodeInfo never changes, so neither does this)."""
        if self._by_namespace is None:
            grouped: dict[str, list[PodInfo]] = {}
            for pod in self.pods:
                grouped.setdefault(pod.namespace, []).append(pod)
            self._by_namespace = {ns: tuple(pods) for ns, pods in grouped.items()}
        return self._by_namespace.get(namespace, ())

    def _count(self, pod: PodInfo, sign: int) -> None:
        self.requested.add(pod.requests, sign)
        self.non0_cpu += sign * pod.non0_cpu
        self.non0_mem += sign * pod.non0_mem

    def port_conflict(self, ip: str, protocol: str, port: int) -> bool:
        """``HostPortInfo.CheckConflict``: 0.0.0.0 conflicts with the port on any IP, and any
        IP conflicts with the same port on 0.0.0.0."""
        pair = (protocol, port)
        if ip == _ANY_IP:
            return any(pair in pairs for pairs in self.used_ports.values())
        return pair in self.used_ports.get(_ANY_IP, ()) or pair in self.used_ports.get(ip, ())

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, {len(self.pods)} pods)"
