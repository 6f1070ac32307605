"""The scheduling scalars of a pod spec (docs/policies.md, "Merge modes"): priorityClassName, schedulerName and
preemptionPolicy, with the rules of the Priority admission plugin they must satisfy.

The plugin (``plugin/pkg/admission/priority``) computes a pod's integer ``priority`` and its
``preemptionPolicy`` from the PriorityClass, and rejects a pod that carries different values
of its own. A Deployment with such a template is accepted but its ReplicaSet then fails to
create pods, so the engine must never write a combination the plugin would refuse.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.cluster.view import ClusterView
from webhook.engine.context import Context
from webhook.engine.merge import scalar

DEFAULT_SCHEDULER = "default-scheduler"  # the API server's default, not a user's choice
DEFAULT_PREEMPTION = "PreemptLowerPriority"


def apply(
    container: dict[str, Any],
    wanted: Mapping[str, str],
    ctx: Context,
    *,
    preemption: bool = True,
) -> None:
    """priorityClassName, schedulerName and preemptionPolicy (docs/policies.md, "Merge modes").

    ``preemption`` is False where the object has no preemptionPolicy field (KubeVirt).
    """
    name = wanted.get("priorityClassName")
    if name is not None:
        if scalar(container, "priorityClassName", name, ctx):
            _drop_stale_priority(container, name, ctx)
        if ctx.cluster is not None and ctx.cluster.priority_class(name) is None:
            ctx.warn(f"PriorityClass {name} does not exist in the cluster")
    if wanted.get("schedulerName") is not None:
        scalar(container, "schedulerName", wanted["schedulerName"], ctx, defaults=(DEFAULT_SCHEDULER,))
    if wanted.get("preemptionPolicy") is not None:
        if preemption:
            _preemption(container, wanted["preemptionPolicy"], ctx)
        else:
            ctx.warn("preemptionPolicy skipped: this kind has no such field")


def _class_value(name: str, cluster: ClusterView | None) -> Mapping[str, Any] | None:
    return cluster.priority_class(name) if cluster is not None else None


def _drop_stale_priority(container: dict[str, Any], name: str, ctx: Context) -> None:
    # The Priority admission plugin rejects a pod whose integer priority differs from
    # the value of its class; keep it only when the class is known to carry that value.
    if "priority" not in container:
        return
    cls = _class_value(name, ctx.cluster)
    if cls is not None and cls.get("value") == container["priority"]:
        return
    ctx.warn(f"dropped integer priority {container.pop('priority')}: {name} decides it")
    ctx.changed()


def _preemption(container: dict[str, Any], value: str, ctx: Context) -> None:
    # The Priority admission plugin rejects a pod whose preemptionPolicy differs from the
    # one its class computes, so write it only when the class is known to agree.
    if container.get("preemptionPolicy") == value:
        return
    name = container.get("priorityClassName")
    cls = _class_value(str(name), ctx.cluster) if name else None
    if cls is None:
        why = "no priorityClassName" if not name else f"PriorityClass {name} not known"
        ctx.warn(f"preemptionPolicy {value} not set: {why}")
        return
    if (cls.get("preemptionPolicy") or DEFAULT_PREEMPTION) != value:
        ctx.warn(f"preemptionPolicy {value} not set: {name} has {cls.get('preemptionPolicy') or DEFAULT_PREEMPTION}")
        return
    scalar(container, "preemptionPolicy", value, ctx)
