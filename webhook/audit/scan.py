"""The audit: every workload of a cluster held against the policies and the scheduler model.

Public API (the command and the server's background audit build on it)::

    auditor = Auditor(policies, targets=None, options=Options())
    results = auditor.full(state)              # state: audit.state.AuditState
    results = auditor.changed(state, keys)     # keys: uids or "Kind/namespace/name"
    counts = summary(results)                  # {"pass": n, "fail": n, "warn": n, "skip": n, "error": n}

The state is an ``AuditState``: explain's ``ClusterState`` (built from a ``kubectl get -o
yaml`` dump or ``cluster.snapshot.Snapshot.objects`` by ``AuditState.from_objects``), whose
one scheduler snapshot every workload's simulation shares, plus the stored objects of every
kind the targets know.

Which objects are workloads: those of the engine's kinds (``kube.kinds.Targets``, the kinds a
kinds configuration declares included) that admission does not ignore; a ReplicaSet of a
Deployment and a Deployment's pods are placed through their owner, and only the owner is
audited (``audit.verdicts``). Each workload gets its policies' verdicts (``audit.verdicts``)
and, with ``Options.scheduling``, the scheduler model's (``audit.scheduling``). Nothing about
one object can stop the audit of the others: whatever fails is an ``error`` result naming the
object and the reason.

Caching: an object's policy verdicts are kept while its uid and resourceVersion, the policy
set, its namespace's labels and the cluster view's nodes and priority classes stay the same
(an object without a resourceVersion, from a hand-written file, is never cached). ``full``
recomputes every scheduling verdict (the snapshot is new); ``changed`` recomputes only the
named workloads, policy and scheduling verdicts alike (so an incremental pass costs what those
workloads cost, not what the cluster does), and returns every workload's current results,
the others' as the last pass left them.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.audit.model import ADMISSION_POLICY, RULE_READ, SCHEDULING_POLICY, Resource, Result, Status
from webhook.audit.scheduling import scheduling_results
from webhook.audit.state import AuditState, key_of
from webhook.audit.verdicts import policy_results
from webhook.kube.kinds import Target, Targets
from webhook.kube.objects import meta
from webhook.policy.policyset import PolicySet
from webhook.scheduler.plan import Options as SchedulerOptions

__all__ = ["AuditState", "Auditor", "Options", "key_of", "resource_of", "summary"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """``scheduling``: add the scheduler model's verdicts; ``scheduler``: the model's options
    (the release its messages are worded for); ``namespace``: of objects that name none."""

    scheduling: bool = True
    scheduler: SchedulerOptions | None = None
    namespace: str = "default"


@dataclass
class _Entry:
    """One object's results, and what its policy verdicts were computed from."""

    basis: tuple[Any, ...] | None  # None: never reused (no resourceVersion)
    policy: list[Result] | None  # None: not a workload (admission ignores it)
    scheduling: list[Result] = field(default_factory=list)

    @property
    def results(self) -> list[Result]:
        return [*self.policy, *self.scheduling] if self.policy is not None else []


class Auditor:
    """Audits cluster states against one policy set, remembering each object's results."""

    def __init__(self, policies: PolicySet, targets: Targets | None = None, options: Options | None = None) -> None:
        self.policies = policies
        self.targets = targets or policies.targets
        self.options = options or Options()
        self._digest = policies.digest()
        self._entries: dict[str, _Entry] = {}
        self._uids: dict[str, str] = {}  # uid -> key

    def full(self, state: AuditState) -> list[Result]:
        """Every workload of ``state`` audited: policy verdicts from the cache where their basis
        is unchanged, scheduling verdicts all new."""
        entries: dict[str, _Entry] = {}
        self._uids = {}
        for key, obj in state.objects.items():
            entries[key] = self._audit(key, obj, state, self._entries.get(key))
            self._remember(key, obj)
        self._entries = entries
        return self._collect()

    def changed(self, state: AuditState, keys: Iterable[str]) -> list[Result]:
        """Only the workloads ``keys`` names (uids or ``Kind/namespace/name``) audited again: a
        named one ``state`` no longer holds is dropped, a new one is added (a new workload must
        be named to be seen). Returns every workload's current results, the others' as the last
        pass left them."""
        for name in keys:
            key = state.key_for(name) or self._uids.get(name, name)
            obj = state.objects.get(key)
            if obj is None:
                self._entries.pop(key, None)
                continue
            self._entries[key] = self._audit(key, obj, state, self._entries.get(key))
            self._remember(key, obj)
        return self._collect()

    def _remember(self, key: str, obj: Mapping[str, Any]) -> None:
        uid = meta(obj, "uid")
        if isinstance(uid, str) and uid:
            self._uids[uid] = key

    def _collect(self) -> list[Result]:
        return sorted((r for e in self._entries.values() if e.policy is not None for r in e.results), key=_order)

    def _audit(self, key: str, obj: Mapping[str, Any], state: AuditState, cached: _Entry | None) -> _Entry:
        target = self.targets.for_object(obj)
        assert target is not None  # AuditState.objects holds only objects of target kinds
        resource = resource_of(obj, target)
        basis = self._basis(obj, state)
        if cached is not None and basis is not None and cached.basis == basis:
            policy = cached.policy
        else:
            policy = self._guarded(resource, ADMISSION_POLICY, lambda: policy_results(
                dict(obj), target, resource, policies=self.policies, view=state.cluster.view,
                namespace=meta(obj, "namespace") or self.options.namespace))
        if policy is None or not self.options.scheduling:
            return _Entry(basis, policy)
        scheduling = self._guarded(resource, SCHEDULING_POLICY, lambda: scheduling_results(
            obj, target, resource, state, options=self.options.scheduler))
        return _Entry(basis, policy, scheduling or [])

    def _basis(self, obj: Mapping[str, Any], state: AuditState) -> tuple[Any, ...] | None:
        version = meta(obj, "resourceVersion")
        if not version:
            return None
        namespace = str(meta(obj, "namespace") or self.options.namespace)
        labels = state.cluster.view.namespace_labels(namespace)
        shown = tuple(sorted((labels or {}).items())) if labels is not None else None
        return meta(obj, "uid"), version, self._digest, shown, state.view_print()

    @staticmethod
    def _guarded(resource: Resource, policy: str, work: Any) -> Any:
        """``work()``, or an ``error`` result naming the object when it raises: one bad object
        never stops the audit."""
        try:
            return work()
        except Exception as exc:  # noqa: BLE001 - reported as the object's result, and logged
            log.exception("audit of %s failed", resource.shown())
            return [Result(resource, policy, RULE_READ, Status.ERROR, f"cannot audit it: {type(exc).__name__}: {exc}")]


def resource_of(obj: Mapping[str, Any], target: Target) -> Resource:
    """The object as a result names it."""
    namespace = meta(obj, "namespace")
    return Resource(str(obj.get("apiVersion") or target.api_version), target.kind, str(meta(obj, "name") or ""),
                    str(namespace) if namespace else None, str(meta(obj, "uid") or ""))


_SEVERITY = {Status.ERROR: 0, Status.FAIL: 1, Status.WARN: 2, Status.SKIP: 3, Status.PASS: 4}


def _order(result: Result) -> tuple[str, str, str, str, str]:
    r = result.resource
    return r.namespace or "", r.kind, r.name, result.policy, result.rule


def summary(results: Iterable[Result]) -> dict[str, int]:
    """How many results of each status, every status named (``pass``, ``fail``, ``warn``,
    ``skip``, ``error``), as a PolicyReport's ``summary`` counts them."""
    counts = Counter(r.status for r in results)
    return {status.value: counts.get(status, 0) for status in Status}


def severity(status: Status) -> int:
    """0 for the worst (error) to 4 (pass): the order problems are shown in."""
    return _SEVERITY[status]
