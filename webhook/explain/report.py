"""One workload explained: where each replica lands, whether the rollout finishes, why not,
and the verified changes that would make it (docs/explain.md), as data and as text.

``explain`` chooses the simulation: a Deployment or StatefulSet that already runs in the
cluster state is updated (``--update`` is the default for it), anything else is placed as on
creation, without pods of its own that may already run (the workload is being created, so
they would not exist). ``Explanation.to_dict`` is the machine form; ``render`` the report a
person reads: a summary line, each replica, each reason with its node count and the nodes
and rules behind it, the rollout, the suggestions (likeliest wanted first, each with why),
then the assumptions made.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.explain.simulate import PlacementVerdict, owned_pods, place_all, selected_pods, statefulset_update
from webhook.explain.state import ClusterState
from webhook.explain.suggest import Suggestion, suggest
from webhook.explain.workloads import Workload, build
from webhook.kube import pointers
from webhook.kube.kinds import Target
from webhook.scheduler.cluster import Cluster
from webhook.scheduler.framework import Result
from webhook.scheduler.plan import Options
from webhook.scheduler.rollouts import RolloutVerdict, rolling_update

__all__ = ["Explanation", "Progress", "ReplicaRow", "explain", "render"]

Progress = Callable[[str], None]

UPDATABLE = ("Deployment", "StatefulSet")
NODES_SHOWN = 10  # per reason in the text report; the machine form lists every node


@dataclass(frozen=True)
class ReplicaRow:
    index: int
    pod: str
    node: str | None
    score: int | None = None
    tied: tuple[str, ...] = ()
    message: str = ""
    victims: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"index": self.index, "pod": self.pod, "node": self.node}
        if self.node is not None:
            row["score"] = self.score
            row["tiedWith"] = list(self.tied)
            if self.victims:
                row["preempts"] = list(self.victims)
        else:
            row["message"] = self.message
        return row


@dataclass
class Explanation:
    """What ``explain`` found for one workload."""

    kind: str
    namespace: str
    name: str
    rows: list[ReplicaRow]
    diagnosis: Result | None  # the first Pending pod's scheduling cycle
    rollout: RolloutVerdict | None = None
    suggestions: list[Suggestion] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def placed(self) -> int:
        return sum(1 for r in self.rows if r.node is not None)

    @property
    def pending(self) -> int:
        return len(self.rows) - self.placed

    @property
    def ok(self) -> bool:
        return self.pending == 0 and (self.rollout is None or self.rollout.completes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "namespace": self.namespace, "name": self.name,
                               "placed": self.placed, "pending": self.pending,
                               "replicas": [r.to_dict() for r in self.rows]}
        if self.rollout is not None:
            verdict = self.rollout
            out["rollout"] = {"completes": verdict.completes, "replicas": verdict.replicas, "steps": len(verdict.steps),
                              "minAvailable": verdict.min_available, "maxSurge": verdict.max_surge,
                              "maxUnavailable": verdict.max_unavailable, "strategy": verdict.strategy,
                              "stuck": None if verdict.completes else verdict.message}
        if self.diagnosis is not None:
            out["diagnosis"] = _diagnosis(self.diagnosis)
        out["suggestions"] = [_suggestion(s) for s in self.suggestions]
        out["notes"] = list(self.notes)
        return out


def explain(obj: Mapping[str, Any], target: Target, state: ClusterState, *, namespace: str = "default",
            replicas: int | None = None, update: bool | None = None, options: Options | None = None,
            suggestions: bool = True, progress: Progress | None = None) -> Explanation:
    """Explain ``obj`` (already mutated by the policies, when they apply) on ``state``;
    ``progress`` is told what is being simulated, for a progress line."""
    def workload_of(o: Mapping[str, Any]) -> Workload:
        return build(o, target, namespace=namespace, priority_classes=state.priority_classes, nodes=state.nodes,
                     replicas=replicas)

    if replicas is not None and isinstance(obj.get("spec"), Mapping) and target.kind in UPDATABLE:
        obj = {**obj, "spec": {**obj["spec"], "replicas": replicas}}  # an update rolls out spec.replicas
    workload = workload_of(obj)
    notes = list(workload.notes)
    updatable = target.kind in UPDATABLE and target.group == "apps"
    selected = selected_pods(workload, state.cluster) if updatable else []
    exists = state.workload(target.kind, workload.namespace, workload.name) is not None
    if update is None:
        update = updatable and (exists or bool(selected))
        if update and not exists:
            notes.append(f"{len(selected)} running pod(s) match the {target.kind}'s selector: its update is "
                         "simulated (--no-update places it as new)")
    elif update and not updatable:
        notes.append(f"an update of a {target.kind} is not simulated: its pods are placed as on creation")
        update = False
    pod_path = pointers.pointer(target.pod_spec) if target.pod_spec is not None else None
    search = functools.partial(suggest, match_label_keys=state.view.supports_match_label_keys(), options=options,
                               pod_path=pod_path, add_nodes=target.kind != "DaemonSet", progress=progress)
    say = progress or _quiet
    if update and target.kind == "Deployment":
        say(f"simulating the update of {workload.name}")
        verdict = rolling_update(obj, state.cluster, options=options)
        found = search(obj, state.cluster) if suggestions and not verdict.completes else []
        return Explanation(target.kind, workload.namespace, workload.name, _rollout_rows(verdict),
                           verdict.result, verdict, found, notes)
    if update:
        say(f"simulating the update of {workload.name}")
        verdict = statefulset_update(obj, workload, state.cluster, options=options)

        def simulate_update(o: Mapping[str, Any], cluster: Cluster) -> RolloutVerdict:
            return statefulset_update(o, workload_of(o), cluster, options=options)

        found = search(obj, state.cluster, simulate=simulate_update, rollout=False) \
            if suggestions and not verdict.completes else []
        return Explanation(target.kind, workload.namespace, workload.name, _rollout_rows(verdict),
                           verdict.result, verdict, found, notes)
    # Only the pods the workload's own controller made are its replicas, by their controller
    # reference: pods that merely carry its labels stay (a bare Pod has no replicas at all).
    replica_sets = state.of_kind("ReplicaSet")
    running = owned_pods(workload, state.cluster, replica_sets)
    if running:
        notes.append(f"the {len(running)} running pod(s) of {workload.name} are left out: its replicas are placed "
                     "as on creation")

    def simulate_fresh(o: Mapping[str, Any], cluster: Cluster) -> PlacementVerdict:
        changed = workload_of(o)
        return place_all(changed, cluster.evict(owned_pods(changed, cluster, replica_sets)), options=options)

    say(f"placing the {len(workload.pods)} replica(s) of {workload.name}")
    placement = simulate_fresh(obj, state.cluster)
    found = search(obj, state.cluster, simulate=simulate_fresh, rollout=False) \
        if suggestions and not placement.completes else []
    rows = [ReplicaRow(r.index, r.pod, r.node, r.score, r.tied, r.message, r.victims) for r in placement.items]
    return Explanation(target.kind, workload.namespace, workload.name, rows, placement.result, None, found, notes)


def _quiet(_: str) -> None:
    pass


def _rollout_rows(verdict: RolloutVerdict) -> list[ReplicaRow]:
    """The new pods of a rollout: where each was placed, then those left Pending."""
    rows: list[ReplicaRow] = []
    for step in verdict.steps:
        for i, (pod, node) in enumerate(step.placed):
            score, tied = step.scores[i] if i < len(step.scores) else (None, ())
            rows.append(ReplicaRow(len(rows), pod, node, score, tuple(n for n in tied if n != node)))
    pending = verdict.steps[-1].pending if verdict.steps else ()
    if verdict.pending_pod and verdict.pending_pod not in pending:
        pending = (verdict.pending_pod, *pending)
    rows += [ReplicaRow(len(rows) + i, pod, None, message=verdict.message) for i, pod in enumerate(pending)]
    return rows


def _by_reason(result: Result) -> list[tuple[str, list[str]]]:
    """Each reason with the nodes counted under it (each node under its first failing filter,
    as the scheduler's message counts them), most nodes first, then by reason. The nodes a
    PreFilter turned away are among them, with its status, as the message counts them too."""
    reasons: dict[str, list[str]] = {}
    for node, failure in result.filtered.items():
        for reason in failure.reasons:
            reasons.setdefault(reason, []).append(node)
    return sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _diagnosis(result: Result) -> dict[str, Any]:
    """Per reason the nodes counted under it, and per node every filter that rejects it,
    with the rule."""
    out: dict[str, Any] = {
        "message": result.message,
        "reasons": [{"reason": reason, "nodes": len(nodes), "nodeNames": nodes}
                    for reason, nodes in _by_reason(result)],
        "nodes": {node: [{"filter": f.plugin, "code": f.code, "reasons": list(f.reasons), "details": list(f.details)}
                         for f in failures] for node, failures in result.failures.items()},
    }
    if result.preemption is not None and result.preemption.nominated:
        out["preemption"] = {"node": result.preemption.nominated, "victims": list(result.preemption.victims)}
    return out


def _suggestion(s: Suggestion) -> dict[str, Any]:
    out: dict[str, Any] = {"change": s.change, "why": s.why, "path": s.patch[0]["path"] if s.patch else None,
                           "patch": s.patch, "verified": s.verdict.completes}
    if s.nodes:
        out["addNodes"] = s.nodes
    return out


def render(explanation: Explanation) -> str:
    """The text report."""
    e = explanation
    lines = [_summary(e)]
    lines += ["  " + text for text in _rows(e.rows)]
    if e.diagnosis is not None:
        lines.append(f"  why replicas stay Pending ({e.diagnosis.message.split(':', 1)[0]}):")
        lines += _reasons(e.diagnosis)
    if e.rollout is not None:
        verdict = e.rollout
        lines.append("  rollout: " + (verdict.summary() if verdict.completes else
                                      f"stuck after {len(verdict.steps)} step(s): {verdict.pending_pod} stays Pending"))
        if e.rollout.steps:
            lines.append(f"    {e.rollout.strategy}, maxSurge {e.rollout.max_surge}, maxUnavailable "
                         f"{e.rollout.max_unavailable}; {len(e.rollout.steps)} step(s), at least "
                         f"{e.rollout.min_available} available")
    if e.suggestions:
        lines.append("  suggestions (each verified by simulating again with the change), the likeliest wanted first:")
        for s in e.suggestions:
            where = f"  [{s.patch[0]['path']}]" if s.patch else ""
            lines.append(f"  - {s.change}{where}")
            lines.append(f"    why: {s.why}")
    elif not e.ok:
        lines.append("  no single change found that makes it schedule")
    for note in e.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines) + "\n"


def _summary(e: Explanation) -> str:
    head = f"{e.kind} {e.namespace}/{e.name}: "
    total = len(e.rows)
    if e.rollout is not None:
        if e.rollout.completes:
            return head + f"the update completes: {e.rollout.replicas} replica(s) placed"
        return head + f"the update is STUCK: {e.placed} of {e.rollout.replicas} replica(s) updated, {e.pending} Pending"
    if total == 0:
        return head + "no pods to place"
    if e.pending == 0:
        return head + f"all {total} replica(s) place"
    return head + f"{e.placed} of {total} replica(s) place, {e.pending} Pending"


def _rows(rows: list[ReplicaRow]) -> list[str]:
    """One line per placed replica; Pending replicas in a row with the same message share one."""
    out: list[str] = []
    i = 0
    while i < len(rows):
        row = rows[i]
        if row.node is not None:
            out.append(_row(row))
            i += 1
            continue
        j = i
        while j + 1 < len(rows) and rows[j + 1].node is None and rows[j + 1].message == row.message:
            j += 1
        shown = f"replica {row.index} ({row.pod})" if j == i else f"replicas {row.index}-{rows[j].index} ({j - i + 1} pods)"
        out.append(f"{shown}: Pending: {row.message}")
        i = j + 1
    return out


def _row(row: ReplicaRow) -> str:
    text = f"replica {row.index} ({row.pod}) -> {row.node}"
    if row.score is not None:
        text += f" (score {row.score}" + (f", {_tied(row.tied)}" if row.tied else "") + ")"
    if row.victims:
        text += f", preempting {', '.join(row.victims)}"
    return text


def _tied(nodes: tuple[str, ...], shown: int = 3) -> str:
    """The nodes with the same top score (the scheduler picks one of them at random)."""
    if len(nodes) <= shown:
        return f"tied with {', '.join(nodes)}"
    return f"tied with {len(nodes)} nodes: {', '.join(nodes[:shown])} and {len(nodes) - shown} more"


def _reasons(result: Result) -> list[str]:
    lines: list[str] = []
    for reason, nodes in _by_reason(result):
        count = len(nodes)
        lines.append(f"    {count} {reason}:")
        for node in nodes[:NODES_SHOWN]:
            why = "; ".join(str(f) for f in result.failures.get(node, ()))
            lines.append(f"      {node}: {why}")
        if count > NODES_SHOWN:
            lines.append(f"      ... and {count - NODES_SHOWN} more (-o yaml lists every node)")
    return lines
