"""The scheduler model's verdicts on one stored workload, on the audit's one shared snapshot:
are all its replicas placed (``RULE_REPLICAS``), and would its next rollout finish
(``RULE_ROLLOUT``, Deployments and StatefulSets)?

Replicas: the workload's bound pods are counted (its selector's for the apps kinds, as their
controllers adopt pods; by controller reference for the others; a bare Pod is its own). When
fewer run than it wants, the missing ones are placed by the model, as ``explain`` places a
workload's pods (``explain.simulate.place_all``): ``pass`` when they would place, ``warn`` with
the scheduler's message when they would not.

Rollout: the next rollout of the stored template (a restart, or a change that keeps the
placement) simulated as its controller performs it (``scheduler.rollouts``): ``warn`` when it
would stop, with the new pods placed by then and the scheduler's message for the one left
Pending. A Deployment or StatefulSet whose answer is known without the simulation gets it
from ``audit.shortcut`` instead (the reasons are there, each checked against the simulation).

The stored object is simulated as it is, not as today's policies would mutate it: what runs
in the cluster is what its next restart rolls out; the policies' changes are their own
verdicts.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.audit import shortcut
from webhook.audit.model import RULE_READ, RULE_REPLICAS, RULE_ROLLOUT, SCHEDULING_POLICY, Resource, Result, Status
from webhook.audit.state import AuditState
from webhook.explain.simulate import place_all
from webhook.explain.workloads import Workload, WorkloadError, build
from webhook.kube.kinds import Target
from webhook.kube.pointers import get_path
from webhook.scheduler.plan import Options
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.rollouts import RolloutVerdict, ordered_update, rolling_update

__all__ = ["scheduling_results"]

_BY_SELECTOR = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")  # apps kinds: adopted by selector


def scheduling_results(obj: Mapping[str, Any], target: Target, resource: Resource, state: AuditState, *,
                       options: Options | None = None) -> list[Result]:
    """The ``RULE_REPLICAS`` result and, for a Deployment or StatefulSet, the ``RULE_ROLLOUT``
    one; a single ``error`` when the model cannot read the workload."""
    try:
        running = _running(obj, target, state)
        out = [_replicas(obj, target, resource, state, running, options)]
        if target.group == "apps" and target.kind in ("Deployment", "StatefulSet"):
            out.append(_rollout(obj, target, resource, state, running, options))
        return out
    except (WorkloadError, ValueError, TypeError, KeyError) as exc:
        # A spec the API server would refuse (a selector it cannot parse, a pod spec that is no
        # mapping): said for this workload, the others still audited.
        return [Result(resource, SCHEDULING_POLICY, RULE_READ, Status.ERROR,
                       f"the scheduler model cannot read it: {type(exc).__name__}: {exc}")]


def _apps(target: Target) -> bool:
    return target.group == "apps" and target.kind in _BY_SELECTOR


def _running(obj: Mapping[str, Any], target: Target, state: AuditState) -> list[PodInfo]:
    """The workload's bound pods in the snapshot."""
    namespace, name = _namespace(obj), str(get_path(obj, ("metadata", "name")) or "")
    if _apps(target):
        selector = get_path(obj, target.selector or ("spec", "selector"))
        if not isinstance(selector, Mapping):
            raise WorkloadError(f"{target.kind} has no spec.selector")
        return state.pods.selected(namespace, selector)
    if target.pod_spec == ("spec",) and target.group == "":  # a bare Pod: itself, once bound
        found = state.cluster.cluster.find_pod(namespace, name)
        return [found] if found is not None else []
    # A VirtualMachine's pod is its VirtualMachineInstance's, of the same name.
    owner = "VirtualMachineInstance" if target.kind == "VirtualMachine" and target.group == "kubevirt.io" else target.kind
    return state.pods.owned(namespace, owner, name)


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(get_path(obj, ("metadata", "namespace")) or "default")


def _wanted(obj: Mapping[str, Any], target: Target) -> int | None:
    """``spec.replicas`` of the replicated apps kinds (the API's default 1); None: count the
    pods the model would make."""
    if not _apps(target) or target.kind == "DaemonSet":
        return None
    replicas = get_path(obj, ("spec", "replicas"))
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 0 else 1


def _workload(obj: Mapping[str, Any], target: Target, state: AuditState, replicas: int | None = None) -> Workload:
    return build(obj, target, namespace=_namespace(obj), priority_classes=state.cluster.priority_classes,
                 nodes=state.cluster.nodes, replicas=replicas)


def _replicas(obj: Mapping[str, Any], target: Target, resource: Resource, state: AuditState,
              running: list[PodInfo], options: Options | None) -> Result:
    wanted = _wanted(obj, target)
    workload = _workload(obj, target, state) if wanted is None else None
    total = len(workload.pods) if workload is not None else wanted or 0
    if len(running) >= total:
        return _result(resource, RULE_REPLICAS, Status.PASS, f"{total} of {total} replica(s) placed")
    if workload is None:
        workload = _workload(obj, target, state, replicas=total - len(running))
    else:
        workload.pods = _missing(workload, running, state, target)
    verdict = place_all(workload, state.cluster.cluster, options=options)
    missing = len(workload.pods)
    if verdict.completes:
        return _result(resource, RULE_REPLICAS, Status.PASS,
                       f"{total - missing} of {total} replica(s) placed; the scheduler would place the other {missing}")
    pending = sum(1 for r in verdict.items if r.node is None)
    message = verdict.result.message if verdict.result is not None else ""
    return _result(resource, RULE_REPLICAS, Status.WARN,
                   f"{pending} of {total} replica(s) cannot be placed: {message}")


def _missing(workload: Workload, running: list[PodInfo], state: AuditState, target: Target) -> list[dict[str, Any]]:
    """The pods of ``workload`` not yet running: a DaemonSet's for the nodes without one of
    its pods (each model pod is named ``<daemonset>-<node>``), the others' beyond the count."""
    if target.kind == "DaemonSet":
        covered = {f"{workload.name}-{state.pods.node_of[p.id]}" for p in running}
        return [p for p in workload.pods if p["metadata"]["name"] not in covered]
    return workload.pods[len(running):]


def _rollout(obj: Mapping[str, Any], target: Target, resource: Resource, state: AuditState,
             running: list[PodInfo], options: Options | None) -> Result:
    cluster = state.cluster.cluster
    if target.kind == "Deployment":
        known = shortcut.rollout_completes(obj, running, state, options=options)
        if known is not None:
            return _rollout_result(resource, known)
        return _rollout_result(resource, rolling_update(obj, cluster, options=options))
    workload = _workload(obj, target, state)
    known = shortcut.ordered_update_completes(obj, workload.pods, running, state, options=options)
    if known is not None:
        return _rollout_result(resource, known)
    by_name = {p.name: p for p in running}
    verdict = ordered_update(obj, workload.pods, by_name, cluster, default_selector=workload.default_selector,
                             options=options)
    return _rollout_result(resource, verdict)


def _rollout_result(resource: Resource, verdict: RolloutVerdict | shortcut.Completes) -> Result:
    head = (f"{verdict.replicas} replica(s), {verdict.strategy}, maxSurge {verdict.max_surge}, "
            f"maxUnavailable {verdict.max_unavailable}")
    if verdict.completes:
        return _result(resource, RULE_ROLLOUT, Status.PASS, f"the next rollout completes: {head}")
    assert isinstance(verdict, RolloutVerdict)
    placed = sum(len(step.placed) for step in verdict.steps)
    return _result(resource, RULE_ROLLOUT, Status.WARN,
                   f"rollout would stop at {placed} of {verdict.replicas} ({head}): {verdict.message}")


def _result(resource: Resource, rule: str, status: Status, message: str) -> Result:
    return Result(resource, SCHEDULING_POLICY, rule, status, message)
