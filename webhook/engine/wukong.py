"""Placement for Wukong objects, written into their native scheduling API (docs/policies.md, "Wukong VMs").

Wukong (``vm.novasphere.dev/v1alpha1``) has no pod spec. Its API:

```yaml
spec:
  scheduling:
    nodeAffinity:     {required: [NodeSelectorTerm], preferred: [{weight, preference}]}
    nodeAntiAffinity: {required: [NodeSelectorTerm], preferred: [{weight, preference}]}
    resourceAffinity: {preferredCPU: {weight, threshold}, preferredMemory: ...,
                       preferredStorage: ..., requiredResources: [{resourceType, minAvailable}]}
    schedulingPolicy: {schedulerName, priority, preemptionPolicy}
  highAvailability:
    antiAffinity: true
    nodeSelector: {disk: ssd}                # map[string]string, the legacy node selector
```

Mapping decisions:
- ``nodeAntiAffinity`` is native, so the policy's anti terms are written as they are (no
  negation); Wukong avoids nodes matching any required term, so adding terms is additive.
- ``resources`` are native too (``resourceAffinity``), not compiled to label terms.
- ``nodeSelector`` goes into the legacy ``highAvailability.nodeSelector``, a map of label to
  value, merged key by key; ``capacity`` becomes a requirement of ``nodeAffinity``.
- Wukong has no ``priorityClassName``: the class's integer value is written to
  ``schedulingPolicy.priority`` when the cluster view knows the class and the object has no
  priority of its own; otherwise nothing is written and a warning says why. The author's
  ``priority``, ``rules`` and any field the engine does not own are never removed.
- spread (required or preferred) sets the legacy ``highAvailability.antiAffinity: true``.
- tolerations, pod affinity, advanced anti-affinity terms and rollout have no Wukong
  equivalent: they are skipped with a warning.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.engine import fragments, merge
from webhook.engine import scheduling as scheduling_rules
from webhook.engine.context import KEEP, REPLACE, Context, PlacementError
from webhook.kube import capacity as capacity_providers
from webhook.kube import nodeterms
from webhook.kube.nodeterms import Term
from webhook.kube.objects import copy_json
from webhook.policy.policyset import Policy

CACHE_KEY = "engine.wukong"
# The subtrees ``apply`` edits in place (see ``engine.written_paths``).
WRITES = (("spec", "scheduling"), ("spec", "highAvailability"))
_RESOURCE_PREFS = ("preferredCPU", "preferredMemory", "preferredStorage")


@dataclass(frozen=True)
class Native:
    """What one policy writes into a Wukong object, compiled once per policy."""

    required: list[Term] | None = None
    preferred: list[Term] = field(default_factory=list)
    anti_required: list[Term] = field(default_factory=list)
    anti_preferred: list[Term] = field(default_factory=list)
    resources: Mapping[str, Any] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    unsupported: tuple[str, ...] = ()


def native(policy: Policy) -> Native:
    cached = policy.cache.get(CACHE_KEY)
    if cached is None:
        cached = policy.cache[CACHE_KEY] = _compile(policy.spec.get("placement") or {})
    return cached  # type: ignore[no-any-return]


def _compile(placement: Mapping[str, Any]) -> Native:
    groups: list[list[Term]] = []
    affinity = placement.get("nodeAffinity") or {}
    if affinity.get("required"):
        groups.append([copy_json(t) for t in affinity["required"]])
    capacity = placement.get("capacity") or {}
    prov = capacity_providers.provider(capacity) if capacity else {}
    if capacity.get("require"):
        groups.append([{"matchExpressions": [capacity_providers.capacity_requirement(prov, capacity["require"])]}])
    preferred = [copy_json(t) for t in affinity.get("preferred") or ()]
    if capacity.get("prefer"):
        expr = capacity_providers.capacity_requirement(prov, capacity["prefer"])
        preferred.append({"weight": capacity.get("weight", 50), "preference": {"matchExpressions": [expr]}})
    anti = placement.get("nodeAntiAffinity") or {}
    return Native(
        required=fragments.and_dnf(groups) if groups else None,
        preferred=nodeterms.dedupe(preferred, nodeterms.preferred_key),
        anti_required=[copy_json(t) for t in anti.get("required") or ()],
        anti_preferred=[copy_json(t) for t in anti.get("preferred") or ()],
        resources=copy_json(dict(placement.get("resources") or {})),
        node_selector={str(k): str(v) for k, v in (placement.get("nodeSelector") or {}).items()},
        unsupported=_unsupported(placement, prov),
    )


def _unsupported(placement: Mapping[str, Any], prov: Mapping[str, Any]) -> tuple[str, ...]:
    anti = placement.get("podAntiAffinity") or {}
    capacity = placement.get("capacity") or {}
    skipped = [
        name
        for name, present in (
            ("tolerations", placement.get("tolerations")),
            ("podAffinity", placement.get("podAffinity")),
            ("podAntiAffinity.terms", anti.get("terms")),
            ("podAntiAffinity.labelSelector", anti.get("labelSelector")),
            ("podAntiAffinity.matchLabelKeys", anti.get("matchLabelKeys")),
            ("the spot toleration", prov.get("toleration") and "spot" in (capacity.get("prefer"), capacity.get("require"))),
        )
        if present
    ]
    return tuple(skipped)


def apply(
    obj: dict[str, Any], *, policy: Policy, compiled: fragments.Compiled, ctx: Context
) -> None:
    """Write the policy into ``spec.scheduling`` / ``spec.highAvailability``."""
    spec = merge.mapping(obj, "spec", where="")
    if spec is None:
        raise PlacementError("Wukong object has no spec")
    parts = native(policy)
    for name in parts.unsupported:
        ctx.warn(f"{name} skipped: Wukong has no equivalent")
    existing = merge.mapping(spec, "scheduling", where="spec")
    scheduling = existing if existing is not None else {}
    _node_affinity(scheduling, parts, ctx=ctx)
    _anti_affinity(scheduling, parts, ctx=ctx)
    _resources(scheduling, parts.resources, ctx=ctx)
    if compiled.scheduling:
        block = merge.mapping(scheduling, "schedulingPolicy", where="spec.scheduling")
        fresh = block if block is not None else {}
        _scheduling_policy(fresh, compiled.scheduling, ctx=ctx)
        if block is None and fresh:
            scheduling["schedulingPolicy"] = fresh
    if existing is None and scheduling:
        spec["scheduling"] = scheduling
    if compiled.spread is not None or parts.node_selector:
        _high_availability(spec, spread=compiled.spread is not None, node_selector=parts.node_selector, ctx=ctx)


def _scheduling_policy(block: dict[str, Any], wanted: Mapping[str, str], *, ctx: Context) -> None:
    """schedulerName, preemptionPolicy and, for a priorityClassName, the class's value."""
    if wanted.get("schedulerName") is not None:
        merge.scalar(block, "schedulerName", wanted["schedulerName"], ctx, defaults=(scheduling_rules.DEFAULT_SCHEDULER,))
    if wanted.get("preemptionPolicy") is not None:
        merge.scalar(block, "preemptionPolicy", wanted["preemptionPolicy"], ctx)
    name = wanted.get("priorityClassName")
    if name is None:
        return
    cls = scheduling_rules.class_of(name, ctx.cluster)
    if cls is None or not isinstance(cls.get("value"), int):
        why = "no cluster view" if ctx.cluster is None else f"PriorityClass {name} not known"
        ctx.warn(f"priority of {name} not written: Wukong has no priorityClassName and {why}")
        return
    if block.get("priority") is not None and ctx.mode != REPLACE:
        if block["priority"] != cls["value"]:
            ctx.warn(f"priority {block['priority']} kept (the author's; {name} has {cls['value']})")
        return
    merge.scalar(block, "priority", cls["value"], ctx)


def _node_affinity(scheduling: dict[str, Any], parts: Native, *, ctx: Context) -> None:
    if parts.required is None and not parts.preferred:
        return
    current = merge.mapping(scheduling, "nodeAffinity", where="spec.scheduling")
    if ctx.mode == KEEP and current:
        return
    wanted: dict[str, Any] = {}
    if parts.required is not None:
        wanted["required"] = copy_json(parts.required)
    if parts.preferred:
        wanted["preferred"] = copy_json(parts.preferred)
    if ctx.mode == REPLACE or not current:
        if current != wanted:
            scheduling["nodeAffinity"] = wanted
            ctx.changed()
        return
    terms = merge.sequence(current, "required", where="spec.scheduling.nodeAffinity")
    if parts.required is not None:
        combined = merge.and_into(terms, parts.required) if terms else wanted["required"]
        if combined is not None:
            merge.warn_unsatisfiable(terms or [], combined, ctx)
            current["required"] = combined
            ctx.changed()
    _append(current, "preferred", parts.preferred, nodeterms.preferred_key, ctx)


def _append(
    container: dict[str, Any], key: str, items: list[Term], key_fn: Any, ctx: Context,
    bucket: Any = merge.weight_bucket,
) -> None:
    if not items:
        return
    have = merge.sequence(container, key, where=key)
    if have is None:
        container[key] = copy_json(items)
        ctx.changed()
    elif merge.append_missing(have, items, key_fn, bucket):
        ctx.changed()


def _anti_affinity(scheduling: dict[str, Any], parts: Native, *, ctx: Context) -> None:
    if not parts.anti_required and not parts.anti_preferred:
        return
    current = merge.mapping(scheduling, "nodeAntiAffinity", where="spec.scheduling")
    if ctx.mode == KEEP and current:
        return
    if ctx.mode == REPLACE or not current:
        wanted: dict[str, Any] = {}
        if parts.anti_required:
            wanted["required"] = copy_json(parts.anti_required)
        if parts.anti_preferred:
            wanted["preferred"] = copy_json(parts.anti_preferred)
        if current != wanted:
            scheduling["nodeAntiAffinity"] = wanted
            ctx.changed()
        return
    _append(current, "required", parts.anti_required, nodeterms.term_key, ctx)
    _append(current, "preferred", parts.anti_preferred, nodeterms.preferred_key, ctx)


def _resources(scheduling: dict[str, Any], resources: Mapping[str, Any], *, ctx: Context) -> None:
    if not resources:
        return
    current = merge.mapping(scheduling, "resourceAffinity", where="spec.scheduling")
    if merge.whole_group(scheduling, "resourceAffinity", current, dict(resources), ctx):
        return
    assert current is not None  # merge: whole_group took an absent group
    for name in _RESOURCE_PREFS:
        if name in resources:
            merge.scalar(current, name, copy_json(resources[name]), ctx)
    required = list(resources.get("requiredResources") or ())
    _append(current, "requiredResources", required, merge.canonical, ctx, merge.key_bucket)


def _high_availability(spec: dict[str, Any], *, spread: bool, node_selector: Mapping[str, str], ctx: Context) -> None:
    """The legacy pair: ``antiAffinity: true`` for spread, and ``nodeSelector``, a map of
    label to value merged key by key (an existing value is kept, as for a pod's nodeSelector)."""
    current = merge.mapping(spec, "highAvailability", where="spec")
    if ctx.mode == KEEP and current:
        return
    block = current if current is not None else {}
    if spread:
        merge.scalar(block, "antiAffinity", True, ctx)
    if node_selector:
        merge.node_selector(block, node_selector, ctx.at("spec.highAvailability"))
    if current is None and block:
        spec["highAvailability"] = block
