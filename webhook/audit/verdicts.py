"""The policies' verdicts on one stored object, from the one engine: ``admission.admit``.

The object is offered to admission as the API server would offer it on creation
(``review.request_for_object``), with the cluster's namespaces, nodes and priority classes as
its view. Two recording ``Steps`` watch admission's own calls, so the verdicts are the
engine's and nothing is decided twice: which policies selected the object (``selects``) and
what each policy's application changed (``apply``, diffed against a copy taken just before).

Per policy:

- ``fail``: an enforcing policy changed the object; one result per field group it touched
  (``field_group``), carrying the ops of admission's answer in that group (what the webhook
  would patch if the object were created now);
- ``warn``: an ``enforcement: audit`` policy would change it (its own ops, as it would make them);
- ``pass``: the policy selects the object and changes nothing;
- ``skip``: the object carries ``placement.novasphere.dev/skip: "true"`` and the policy allows
  opting out (``allowSkip``, default true); a policy with ``allowSkip: false`` still runs, as
  admission runs it, and its result says the opt-out was refused;
- ``error``: a policy that failed on the object (``PlacementError``, left out by admission),
  or admission's own failure on it (policies that never settle, an engine error).

An object admission ignores (a ReplicaSet of a Deployment, a Deployment's pods: owned by a
kind the engine places, "placed through its owner") has no verdict: its owner has.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook import ANNOTATION_APPLIED, ANNOTATION_SKIP
from webhook.audit.model import ADMISSION_POLICY, RULE_POLICY, RULE_READ, Resource, Result, Status
from webhook.cluster.view import ClusterView
from webhook.engine import admission, matching, patching, placement, review
from webhook.engine.working import working_copy
from webhook.kube import pointers
from webhook.kube.kinds import Target
from webhook.policy.policyset import Policy, PolicySet

__all__ = ["field_group", "policy_results"]

Op = Mapping[str, Any]

# Pod-spec fields reported under one group: the priority a pod gets is its class's value
# and preemption policy, which the engine writes together.
_GROUPS = {"priorityClassName": "priority", "priority": "priority", "preemptionPolicy": "priority"}
_APPLIED = pointers.pointer(("metadata", "annotations", ANNOTATION_APPLIED))
MESSAGE_LIMIT = 240  # a result's message is one line a table can show


def field_group(path: str, target: Target) -> str:
    """The field group a patch path touches: a pod-spec field (``affinity``, ``tolerations``,
    ``nodeSelector``, ``topologySpreadConstraints``, ``priority``, ...), ``strategy`` for the
    kind's rollout, ``labels`` or ``annotations`` of the object or its pod template."""
    keys = pointers.to_path(path)
    for prefix, inner in ((target.pod_spec, True), (target.rollout, False), (target.pod_metadata, True),
                          (("metadata",), True)):
        if prefix is None or keys[:len(prefix)] != prefix:
            continue
        if not inner:
            return "strategy"
        if len(keys) > len(prefix):
            key = keys[len(prefix)]
            return _GROUPS.get(key, key)
        return "podSpec" if prefix == target.pod_spec else "metadata"
    return keys[-1] if keys else "object"


@dataclass
class _Recorder:
    """What admission's calls showed: the policies that selected the object and, per policy,
    the ops each of its applications made (in the order made)."""

    target: Target
    selected: list[str] = field(default_factory=list)
    ops: dict[str, list[Op]] = field(default_factory=dict)

    def selects(self, policy: Policy, subject: matching.Subject) -> matching.Verdict:
        verdict = matching.selects(policy, subject)
        if verdict.matched and policy.name not in self.selected:
            self.selected.append(policy.name)
        return verdict

    def apply(self, obj: dict[str, Any], **kwargs: Any) -> placement.Applied:
        before = working_copy(obj, self.target)
        applied = placement.apply_policy(obj, **kwargs)
        if applied.changed:
            self.ops.setdefault(kwargs["policy"].name, []).extend(patching.diff(before, obj))
        return applied

    def steps(self) -> admission.Steps:
        return admission.Steps(selects=self.selects, apply=self.apply)


def policy_results(obj: dict[str, Any], target: Target, resource: Resource, *, policies: PolicySet,
                   view: ClusterView | None, namespace: str | None) -> list[Result] | None:
    """The verdict of every policy on ``obj``; None when admission ignores the object (it is
    placed through its owner, or is no object admission places)."""
    request = review.request_for_object(obj, operation="CREATE", namespace=namespace)
    recorder = _Recorder(target)
    outcome = admission.admit(request, policies=policies, cluster=view, steps=recorder.steps())
    if outcome.result == "ignored":
        return None
    make = _Maker(resource, target)
    if outcome.result == "error":
        return [make.error(name, f"admission failed: {outcome.error}") for name in recorder.selected or
                [ADMISSION_POLICY]]
    # The object asked to be skipped: admission says so by skipping it, or by each policy that
    # refused the opt-out saying so.
    skipping = outcome.result == "skipped" or any(f"{ANNOTATION_SKIP} refused" in w for w in outcome.warnings)
    out = _opted_out(obj, target, resource, policies, view, request) if skipping else []
    refused = f" ({ANNOTATION_SKIP}=true refused: the policy has allowSkip: false)" if skipping else ""
    applied, audited, failed = set(outcome.applied), set(outcome.audited), set(outcome.failed)
    failures = {w.split(":", 1)[0]: w for w in outcome.warnings if ": not applied: " in w}
    for name in recorder.selected:
        if name in failed:
            out.append(make.error(name, failures.get(name, f"{name}: not applied")))
        elif name in applied:
            out += make.changes(name, Status.FAIL, recorder.ops.get(name, []), outcome.patch, refused)
        elif name in audited:
            out += make.changes(name, Status.WARN, recorder.ops.get(name, []), None, " (enforcement: audit)")
        else:
            out.append(make.result(name, "", Status.PASS, "selects the object and would change nothing" + refused))
    return out


@dataclass(frozen=True)
class _Maker:
    resource: Resource
    target: Target

    def result(self, policy: str, rule: str, status: Status, message: str, patch: tuple[Op, ...] = ()) -> Result:
        return Result(self.resource, policy, rule or RULE_POLICY, status, _clip(message), patch)

    def error(self, policy: str, message: str) -> Result:
        return self.result(policy, RULE_READ, Status.ERROR, message)

    def changes(self, policy: str, status: Status, own: Sequence[Op], answer: Sequence[Op] | None, note: str) -> list[Result]:
        """One result per field group the policy's own ops touch, with the ops of ``answer``
        (admission's patch) in that group, or its own where the answer has none there (an
        audit-mode policy, or a group a later policy rewrote)."""
        groups: dict[str, list[Op]] = {}
        for op in own:
            if op.get("path") != _APPLIED:
                groups.setdefault(field_group(str(op["path"]), self.target), []).append(op)
        out = []
        for group, ops in groups.items():
            shown = [op for op in answer or () if field_group(str(op["path"]), self.target) == group] or ops
            verb = "would change" if status is Status.FAIL else "would change, if enforced,"
            text = f"{verb} {group}: {_summary(shown)}{note}"
            out.append(self.result(policy, group, status, text, tuple(shown)))
        return out


def _opted_out(obj: dict[str, Any], target: Target, resource: Resource, policies: PolicySet,
               view: ClusterView | None, request: review.Request) -> list[Result]:
    """A ``skip`` for each policy that allows opting out and would select the object: admission
    never offers them the object, so they are asked here, with admission's own matching."""
    subject = matching.subject(obj, target=target, operation=request.operation, namespace=request.namespace,
                               cluster=view)
    namespace = matching.subject_namespace(obj, request.namespace)
    allowing = [p for p in matching.index_for(policies).candidates(target, namespace) if p.allow_skip]
    text = f"opted out with {ANNOTATION_SKIP}=true, which the policy allows (allowSkip: true)"
    return [Result(resource, p.name, RULE_POLICY, Status.SKIP, text) for p in allowing
            if matching.selects(p, subject).matched]


def _summary(ops: list[Op]) -> str:
    return ", ".join(f"{op.get('op')} {op.get('path')}" for op in ops)


def _clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."

