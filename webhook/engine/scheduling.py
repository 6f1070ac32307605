"""The scheduling scalars of a pod spec: priorityClassName, schedulerName and
preemptionPolicy, with the rules of the Priority admission plugin they must satisfy.

The plugin (``(*Plugin).admitPod`` in plugin/pkg/admission/priority/admission.go) computes a
pod's integer ``priority`` and its ``preemptionPolicy`` from the PriorityClass and rejects a
pod that carries different values of its own ("the integer value of priority (%d) must not
be provided in pod spec", "the string value of PreemptionPolicy (%s) must not be provided").
It runs before mutating webhooks, and again after a webhook changed the pod (the admission
chain is reinvoked), so on a Pod the values it filled in must go when the class changes.
A Deployment whose template breaks the rule is accepted and its ReplicaSet then fails to
create pods, so the engine never writes a combination the plugin would refuse, and says so
in a warning when it leaves something out for that reason.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.cluster.view import ClusterView
from webhook.engine.context import REPLACE, Context
from webhook.engine.merge import scalar

DEFAULT_SCHEDULER = "default-scheduler"  # the API server's default, not a user's choice
DEFAULT_PREEMPTION = "PreemptLowerPriority"  # a PriorityClass's default (SetDefaults_PriorityClass)


def apply(
    container: dict[str, Any],
    wanted: Mapping[str, str],
    ctx: Context,
    *,
    preemption: bool = True,
    defaulted: bool = False,
) -> None:
    """priorityClassName, schedulerName and preemptionPolicy (docs/policies.md, "scheduling").

    ``preemption`` is False where the object has no preemptionPolicy field (KubeVirt);
    ``defaulted`` is True for a Pod, whose priority and preemptionPolicy the Priority plugin
    filled in before this webhook ran (``Target.priority_defaulted``).
    """
    name = wanted.get("priorityClassName")
    if name is not None:
        _priority_class(container, name, ctx, defaulted=defaulted)
    if wanted.get("schedulerName") is not None:
        scalar(container, "schedulerName", wanted["schedulerName"], ctx, defaults=(DEFAULT_SCHEDULER,))
    if wanted.get("preemptionPolicy") is not None:
        if preemption:
            _preemption(container, wanted["preemptionPolicy"], ctx)
        else:
            ctx.warn("preemptionPolicy skipped: this kind has no such field")


def class_of(name: str, cluster: ClusterView | None) -> Mapping[str, Any] | None:
    """The PriorityClass ``name`` as the cluster view knows it, or None (unknown or no view)."""
    return cluster.priority_class(name) if cluster is not None else None


def _priority_class(container: dict[str, Any], name: str, ctx: Context, *, defaulted: bool) -> None:
    cls = class_of(name, ctx.cluster)
    if ctx.cluster is None:
        ctx.warn(f"PriorityClass {name} not checked: no cluster view")
    elif cls is None:
        ctx.warn(f"PriorityClass {name} does not exist in the cluster")
    current = container.get("priorityClassName")
    would_write = current != name and (ctx.mode == REPLACE or current is None)
    if would_write and not defaulted:
        conflict = _authored_preemption_conflict(container, name, cls)
        if conflict:
            ctx.warn(f"priorityClassName {name} not set: {conflict}")
            return
    if scalar(container, "priorityClassName", name, ctx):
        _drop_computed(container, name, cls, ctx, defaulted=defaulted)


def _authored_preemption_conflict(container: Mapping[str, Any], name: str, cls: Mapping[str, Any] | None) -> str:
    """Why a pod template's own preemptionPolicy forbids the class (empty when it does not)."""
    own = container.get("preemptionPolicy")
    if own is None:
        return ""
    if cls is None:
        return f"the template's preemptionPolicy {own} cannot be checked against an unknown class"
    theirs = cls.get("preemptionPolicy") or DEFAULT_PREEMPTION
    return "" if theirs == own else f"the template's preemptionPolicy {own} differs from the class's {theirs}"


def _drop_computed(
    container: dict[str, Any], name: str, cls: Mapping[str, Any] | None, ctx: Context, *, defaulted: bool
) -> None:
    """Remove what the Priority plugin would compute differently for the new class: a stale
    integer ``priority`` (written by an author, or filled in on a Pod), and on a Pod the
    ``preemptionPolicy`` the plugin filled in. Values known to agree with the class stay."""
    if "priority" in container and not (cls is not None and cls.get("value") == container["priority"]):
        ctx.warn(f"dropped integer priority {container.pop('priority')}: {name} decides it")
        ctx.changed()
    policy = container.get("preemptionPolicy")
    if defaulted and policy is not None:
        theirs = (cls.get("preemptionPolicy") or DEFAULT_PREEMPTION) if cls is not None else None
        if policy != theirs:
            del container["preemptionPolicy"]
            ctx.warn(f"dropped preemptionPolicy {policy}: {name} decides it")
            ctx.changed()


def _preemption(container: dict[str, Any], value: str, ctx: Context) -> None:
    # The Priority admission plugin rejects a pod whose preemptionPolicy differs from the
    # one its class computes, so write it only when the class is known to agree.
    if container.get("preemptionPolicy") == value:
        return
    name = container.get("priorityClassName")
    cls = class_of(str(name), ctx.cluster) if name else None
    if cls is None:
        why = "no priorityClassName" if not name else f"PriorityClass {name} not known"
        ctx.warn(f"preemptionPolicy {value} not set: {why}")
        return
    if (cls.get("preemptionPolicy") or DEFAULT_PREEMPTION) != value:
        ctx.warn(f"preemptionPolicy {value} not set: {name} has {cls.get('preemptionPolicy') or DEFAULT_PREEMPTION}")
        return
    scalar(container, "preemptionPolicy", value, ctx)
