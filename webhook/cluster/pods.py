"""Pods by the node they are assigned to: one index over a cluster view's pod informer, shared by
every controller that asks which pods a node runs, as descheduler's ``GetPodsAssignedToNodeFunc``
reads one indexer on ``spec.nodeName`` over the shared pod informer instead of each strategy
scanning the pods.

A pod is on the node its ``spec.nodeName`` names (none: not assigned, not indexed). What to make
of it is the caller's: the labeler counts requests as the scheduler does, the drain evicts what
kubectl drain would. A listener hears every change once the index holds it, with the node the pod
left and the node it is on now, so that it can keep what it derives per pod beside the index.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol
from urllib.parse import urlencode

from webhook.kube import pods as kube_pods

from .informer import ChangeHandler, Projected

__all__ = ["POD_PATH", "PODS", "Changes", "Moved", "PodsByNode"]

PODS = "pods"
# newPodInformer (pkg/scheduler/scheduler.go): the scheduler never lists finished pods.
POD_PATH = "/api/v1/pods?" + urlencode({"fieldSelector": kube_pods.SCHEDULER_FIELD_SELECTOR})

# listener(key, node it left or None, node it is on or None, old, new), after the index changed.
Moved = Callable[[str, str | None, str | None, Projected | None, Projected | None], None]
_NONE: Mapping[str, Projected] = {}


class Changes(Protocol):
    """What tells of every change of the pods (an ``Informer``)."""

    def add_handler(self, handler: ChangeHandler) -> None: ...


class PodsByNode:
    """The pods ``informer`` tells of, by node, kept by its change handler; read from memory."""

    def __init__(self, informer: Changes) -> None:
        self._on: dict[str, dict[str, Projected]] = {}
        self._node_of: dict[str, str] = {}
        self._listeners: list[Moved] = []
        informer.add_handler(self._changed)

    def assigned_to(self, node: str) -> Mapping[str, Projected]:
        """The pods on ``node`` by key (``namespace/name``); empty when none are."""
        return self._on.get(node, _NONE)

    def node_of(self, key: str) -> str | None:
        """The node the pod ``key`` is on; None when it is gone or not assigned."""
        return self._node_of.get(key)

    def listen(self, moved: Moved) -> None:
        """Call ``moved`` after every change of a pod (must not block)."""
        self._listeners.append(moved)

    def _changed(self, key: str, old: Projected | None, new: Projected | None) -> None:
        before = self._node_of.pop(key, None)
        if before is not None:
            left = self._on[before]
            del left[key]
            if not left:
                del self._on[before]
        after = str(((new or {}).get("spec") or {}).get("nodeName") or "") or None
        if new is not None and after is not None:
            self._on.setdefault(after, {})[key] = new
            self._node_of[key] = after
        for moved in self._listeners:
            moved(key, before, after, old, new)
