"""Whether a pod may be evicted now, read from the snapshot alone: its owner, whether the owner
is busy, its PodDisruptionBudgets, its Deployment's rolling-update strategy.

Nothing here remembers an earlier pass: a pod evicted a minute ago shows as its owner's pod
terminating, or a replacement not Ready, or fewer Ready pods than replicas, so a controller that
restarts reads the same "busy" from the cluster and never evicts a second pod of one owner.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.kube.deployment import API_DEFAULT, resolve
from webhook.scheduler.labels import Selector, compile_selector, str_labels

__all__ = ["Budgets", "Owners", "Root", "controller_ref"]

# The kinds whose pods the rebalancer moves: what it can count Ready replicas of. A Job's pod
# (or a custom controller's) would lose its work or has no replica count to wait for.
_WORKLOADS = ("ReplicaSet", "StatefulSet")
_V1BETA1 = "policy/v1beta1"


def controller_ref(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``metav1.GetControllerOf``: the owner reference with ``controller: true``."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = _meta(obj)
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


@dataclass
class Root:
    """The workload that keeps a pod's replicas: a Deployment (through its ReplicaSet), a
    ReplicaSet of its own, or a StatefulSet; and what its pods in the snapshot show."""

    kind: str
    namespace: str
    name: str
    uid: str
    obj: Mapping[str, Any]
    pods: int = 0
    ready: int = 0
    unready: list[str] = field(default_factory=list)
    terminating: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def desired(self) -> int:
        # SetDefaults_Deployment / _ReplicaSet / _StatefulSet: replicas defaults to 1.
        replicas = (self.obj.get("spec") or {}).get("replicas")
        return 1 if replicas is None else int(replicas)

    def busy(self) -> str | None:
        """Why the owner is busy, or None: a pod terminating or not Ready (an earlier move's
        replacement), or fewer Ready pods than the replicas it wants. This is the disruption
        controller's arithmetic (pkg/controller/disruption: ``countHealthyPods`` counts the
        pods ``podutil.IsPodReady`` and not being deleted, ``getExpectedScale`` reads the
        controller's ``spec.replicas``) with no disruption allowed at all: a move waits until
        the owner is whole again, whatever its budget would allow."""
        waiting = f"waiting for {self.label} to be Ready"
        if self.terminating:
            return f"{waiting}: pod {self.terminating[0]} is terminating"
        if self.unready:
            return f"{waiting}: pod {self.unready[0]} is not Ready"
        if self.ready < self.desired:
            return f"{waiting}: {self.ready} of {self.desired} replicas Ready"
        return None

    def strategy(self) -> str | None:
        """Why the owner's rollout strategy allows no eviction, or None. A Deployment's
        RollingUpdate resolves maxUnavailable as the Deployment controller does
        (``MaxUnavailable`` in pkg/controller/deployment/util): when it is 0 the owner never
        accepts a replica down, and an eviction takes one down until its replacement is Ready."""
        if self.kind != "Deployment":
            return None
        strategy = (self.obj.get("spec") or {}).get("strategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return None
        rolling = strategy.get("rollingUpdate") or {}
        _, unavailable = resolve(rolling.get("maxSurge", API_DEFAULT), rolling.get("maxUnavailable", API_DEFAULT),
                                 self.desired)
        if unavailable == 0:
            said = rolling.get("maxUnavailable", API_DEFAULT)
            return (f"{self.label} allows no unavailable replica (maxUnavailable {said} of {self.desired} "
                    "replicas resolves to 0)")
        return None


class Owners:
    """Every pod's root workload, by the controller references of the snapshot's ReplicaSets,
    Deployments and StatefulSets."""

    def __init__(self, replicasets: Iterable[Mapping[str, Any]], deployments: Iterable[Mapping[str, Any]],
                 statefulsets: Iterable[Mapping[str, Any]]) -> None:
        self._objects: dict[str, dict[tuple[str, str], Mapping[str, Any]]] = {
            "ReplicaSet": {_key(o): o for o in replicasets},
            "Deployment": {_key(o): o for o in deployments},
            "StatefulSet": {_key(o): o for o in statefulsets},
        }
        self._roots: dict[tuple[str, str, str], Root | str] = {}

    def root(self, namespace: str, ref: Mapping[str, Any]) -> Root | str:
        """The root workload of a pod whose controller is ``ref``, or why there is none the
        rebalancer can wait for."""
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        cache_key = (kind, namespace, name)
        found = self._roots.get(cache_key)
        if found is None:
            found = self._roots[cache_key] = self._resolve(kind, namespace, name, str(ref.get("uid") or ""))
        return found

    def _resolve(self, kind: str, namespace: str, name: str, uid: str) -> Root | str:
        if kind not in _WORKLOADS:
            return f"owned by {kind} {name}, whose replicas the rebalancer cannot wait for"
        obj = self._objects[kind].get((namespace, name))
        if obj is None:
            return f"its {kind} {namespace}/{name} is not in the snapshot"
        parent = controller_ref(_meta(obj)) if kind == "ReplicaSet" else None
        if parent is not None and parent.get("kind") == "Deployment":
            deployment = self._objects["Deployment"].get((namespace, str(parent.get("name") or "")))
            if deployment is None:
                return f"its Deployment {namespace}/{parent.get('name')} is not in the snapshot"
            obj, kind = deployment, "Deployment"
        elif parent is not None:
            return f"its {kind} {name} is owned by {parent.get('kind')} {parent.get('name')}"
        meta = _meta(obj)
        found_uid = str(meta.get("uid") or uid or f"{kind}/{namespace}/{name}")
        return Root(kind, namespace, str(meta.get("name") or ""), found_uid, obj)

    def selector(self, namespace: str, ref: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The selector of the pod's own controller (a ReplicaSet or StatefulSet): the system
        default spread constraints count the pods it selects (``helper.DefaultSelector``)."""
        obj = self._objects.get(str(ref.get("kind") or ""), {}).get((namespace, str(ref.get("name") or "")))
        found = ((obj or {}).get("spec") or {}).get("selector")
        return found if isinstance(found, Mapping) else None


@dataclass
class _Budget:
    """A budget; ``error`` says why it cannot be read (it then blocks every pod it may select)."""

    name: str
    namespace: str
    selector: Selector | None
    allowed: int
    error: str | None = None


class Budgets:
    """PodDisruptionBudgets as the Eviction API weighs them (``checkAndDecrement`` and the
    "more than one PodDisruptionBudget" refusal in pkg/registry/core/pod/storage/eviction.go):
    the disruption controller's ``status.disruptionsAllowed`` is what an eviction may use, and a
    move planned in this pass uses one up."""

    def __init__(self, pdbs: Sequence[Mapping[str, Any]]) -> None:
        self._by_ns: dict[str, list[_Budget]] = {}
        for pdb in pdbs:
            namespace, name = _key(pdb)
            raw = (pdb.get("spec") or {}).get("selector")
            # policy/v1beta1: an empty selector selects no pod; policy/v1: every pod of the
            # namespace. A nil one selects none in both.
            if raw is not None and not raw and pdb.get("apiVersion") == _V1BETA1:
                raw = None
            try:
                # Not yet counted by the disruption controller (no status): none allowed.
                budget = _Budget(name, namespace, compile_selector(raw),
                                 int((pdb.get("status") or {}).get("disruptionsAllowed") or 0))
            except (ValueError, TypeError) as exc:
                # Which pods it selects, or how many it lets go, is unknown: it may select any.
                budget = _Budget(name, namespace, None, 0, f"PodDisruptionBudget {name} cannot be read: {exc}")
            self._by_ns.setdefault(namespace, []).append(budget)

    def _selecting(self, namespace: str, labels: Mapping[str, Any]) -> list[_Budget]:
        found = str_labels(labels)
        return [b for b in self._by_ns.get(namespace, ()) if b.selector is None or b.selector.matches(found)]

    def blocks(self, namespace: str, labels: Mapping[str, Any]) -> str | None:
        """Why the Eviction API would refuse to evict a pod with these labels now, or None."""
        budgets = self._selecting(namespace, labels)
        unread = next((b.error for b in budgets if b.error is not None), None)
        if unread is not None:
            return unread
        if len(budgets) > 1:
            names = ", ".join(sorted(b.name for b in budgets))
            return f"more than one PodDisruptionBudget selects it ({names}): the Eviction API refuses such a pod"
        if budgets and budgets[0].allowed < 1:
            return f"PodDisruptionBudget {budgets[0].name} allows no disruption now (disruptionsAllowed " \
                   f"{budgets[0].allowed})"
        return None

    def use(self, namespace: str, labels: Mapping[str, Any]) -> None:
        """A move planned: its budget has one disruption fewer for the rest of the pass."""
        for budget in self._selecting(namespace, labels):
            budget.allowed -= 1
