"""Apply one policy to one object: the engine ``admission`` calls.

``apply_policy`` edits the object in place (admission hands it a private working copy) and
says whether anything changed. It compiles the policy once (``compile.compiled``), folds
the fragments in under the policy's ``onConflict`` (``merge``), decides the rollout
(``rollout``) and writes Wukong objects through their native API (``wukong``).

It does not evaluate match/exclude, the skip annotation, audit mode, the ``applied``
annotation or patches: ``admission`` does.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from webhook import LABEL_GROUP
from webhook.cluster.view import ClusterView
from webhook.engine import fragments, merge, rollout, scheduling, shapes, wukong
from webhook.engine.context import KEEP, Context, PlacementError, Report
from webhook.kube import warnings
from webhook.kube.kinds import VOLATILE_LABELS, Path_, Target
from webhook.kube.objects import copy_json
from webhook.kube.pointers import get_path
from webhook.policy.policyset import Policy

__all__ = ["Applied", "PlacementError", "apply_policy", "template_fields", "workload_selector", "written_paths"]

# The subtrees of a pod spec that ``merge`` edits in place. Scalars (priorityClassName,
# schedulerName, evictionStrategy, the stale ``priority``) are set on the pod spec itself.
POD_SPEC_WRITES = ("affinity", "nodeSelector", "tolerations")
# The scalars ``apply_policy`` sets on a pod spec, or drops from it (``priority``, and a
# ``preemptionPolicy`` the Priority plugin filled in): ``scheduling``, and ``vm.evictionStrategy``.
POD_SPEC_SCALARS = ("priorityClassName", "schedulerName", "preemptionPolicy", "priority", "evictionStrategy")


# The result of one policy on one object: the report its writers filled in, its warnings
# then each prefixed with the policy's name and clipped. A required spread's topology key
# (``spread_key``) is for admission to count its eligible domains in the object it answers
# with (``spread_warning``): later policies may still narrow the nodes.
Applied = Report


def apply_policy(
    obj: dict[str, Any],
    *,
    policy: Policy,
    target: Target,
    cluster: ClusterView | None,
    original: Mapping[str, Any] | None = None,
    well_shaped: bool = False,
) -> Applied:
    """Apply ``policy`` to ``obj`` in place. Raises ``PlacementError`` when the policy
    cannot be applied to this object; the caller then discards the working copy.

    ``well_shaped``: the caller has found ``obj`` (or the object it was copied from before
    policies edited it) of the shapes the engine reads (``shapes.check``). What a policy
    writes keeps those shapes, so admission checks an object once, not once per policy."""
    compiled = fragments.compiled(policy)
    if compiled.error:
        raise PlacementError(compiled.error)
    # A Context is made per policy and object: positional arguments, since a class called
    # with keywords costs half as much again as one called without.
    report = Applied()
    if target.native == "wukong":
        wukong.apply(obj, policy=policy, compiled=compiled, ctx=Context(policy.on_conflict, cluster, report, "", original))
    elif target.pod_spec is None:
        raise PlacementError(f"{target.kind} has neither a pod spec nor a native scheduling API")
    else:
        if not well_shaped:
            shapes.check(obj, target)
        ctx = Context(policy.on_conflict, cluster, report, ".".join(target.pod_spec), original)
        _apply_pod(obj, compiled=compiled, target=target, ctx=ctx)
    if report.warnings:
        report.warnings = [warnings.clip(f"{policy.name}: {w}") for w in report.warnings]
    return report


def written_paths(target: Target) -> tuple[Path_, ...]:
    """Every subtree ``apply_policy`` may edit in place for objects of ``target``.

    Admission copies these, and the containers on the way to them (where scalars such as
    ``minReadySeconds`` or ``priorityClassName`` are set), and shares everything else with
    the request. A writer that edits anything else must be listed here.
    """
    paths: list[Path_] = [target.pod_labels]  # the group label (``_group_selector``)
    if target.native == "wukong":
        paths.extend(wukong.WRITES)
    elif target.pod_spec is not None:
        paths.extend(target.pod_spec + (key,) for key in POD_SPEC_WRITES)
    if target.rollout is not None:
        paths.append(target.rollout)
    return tuple(paths)


def template_fields(target: Target) -> tuple[Path_, ...]:
    """Every field of the pod template that ``apply_policy`` may write, add or drop: the pod
    spec's placement subtrees and scheduling scalars, and the group label on the pods
    (``_group_selector``). Empty for a kind without a pod spec (Wukong)."""
    if target.pod_spec is None:
        return ()
    return (*(target.pod_spec + (key,) for key in (*POD_SPEC_WRITES, *POD_SPEC_SCALARS)),
            target.pod_labels + (LABEL_GROUP,))


def _apply_pod(obj: dict[str, Any], *, compiled: fragments.Compiled, target: Target, ctx: Context) -> None:
    pod_spec = get_path(obj, target.pod_spec or ())
    if not isinstance(pod_spec, dict):
        raise PlacementError(f"{target.kind} has no pod spec at {ctx.where}")
    # Each step runs only when the policy has something for its field group: a policy
    # typically sets two or three of them.
    if compiled.scheduling:
        scheduling.apply(pod_spec, compiled.scheduling, ctx, preemption=not target.kubevirt,
                         defaulted=target.priority_defaulted)
    if compiled.node_selector:
        merge.node_selector(pod_spec, compiled.node_selector, ctx)
    if compiled.required is not None or compiled.preferred:
        merge.node_affinity(pod_spec, required=compiled.required, preferred=compiled.preferred, ctx=ctx,
                            required_keys=compiled.required_keys)
    if compiled.tolerations:
        merge.tolerations(pod_spec, compiled.tolerations, ctx)
    if compiled.affinity_required or compiled.affinity_preferred:
        merge.pod_terms(pod_spec, "podAffinity", required=compiled.affinity_required,
                        preferred=compiled.affinity_preferred, ctx=ctx)
    if compiled.spread is not None or compiled.anti_required or compiled.anti_preferred:
        _anti_affinity(obj, pod_spec, compiled=compiled, target=target, ctx=ctx)
    if compiled.rollout and target.rollout is not None:
        labels = get_path(obj, target.pod_labels) or {}
        rollout.apply(obj, target=target, rollout=compiled.rollout, pod_spec=pod_spec, labels=labels, ctx=ctx)
    if compiled.eviction and target.kubevirt:
        merge.scalar(pod_spec, "evictionStrategy", compiled.eviction, ctx)


def _anti_affinity(
    obj: dict[str, Any], pod_spec: dict[str, Any], *, compiled: fragments.Compiled, target: Target, ctx: Context
) -> None:
    required, preferred = list(compiled.anti_required), list(compiled.anti_preferred)
    spread = compiled.spread
    present = (pod_spec.get("affinity") or {}).get("podAntiAffinity")
    term = None
    if spread is not None and not target.self_spread:
        ctx.warn(f"no self anti-affinity: a {target.kind} runs one pod per node")
    elif spread is not None and not (ctx.mode == KEEP and present):
        term = _spread_term(obj, spread, target=target, ctx=ctx)
        if spread.mode == "preferred":
            preferred.insert(0, {"weight": spread.weight, "podAffinityTerm": term})
        else:
            if rollout.scope_spread(obj, target=target, rollout=compiled.rollout, pod_spec=pod_spec,
                                    topology_key=spread.topology_key, cluster=ctx.cluster):
                _add_match_label_keys(term, [rollout.REVISION_KEY], ctx)
            required.insert(0, term)
    merge.pod_terms(pod_spec, "podAntiAffinity", required=required, preferred=preferred, ctx=ctx)
    if spread is not None and term is not None and spread.mode == "required":
        ctx.report.spread_key = spread.topology_key


def spread_warning(obj: Mapping[str, Any], *, target: Target, topology_key: str,
                   cluster: ClusterView | None) -> str | None:
    """Required spread over fewer eligible domains than replicas leaves pods Pending: what to
    say about ``obj``, the object admission answers with. Counted there, not as the spread is
    written: a later policy's node affinity, nodeSelector or tolerations narrow the nodes too."""
    if cluster is None:
        return f"required spread: {topology_key} domains not counted: no cluster view"
    pod_spec = get_path(obj, target.pod_spec or ())
    if not isinstance(pod_spec, dict):
        return None
    replicas = (obj.get("spec") or {}).get("replicas")
    replicas = replicas if isinstance(replicas, int) else 1
    domains = rollout.eligible_domains(pod_spec, cluster.nodes(), topology_key)
    if domains < replicas:
        return f"required spread: {replicas} replicas but {domains} eligible {topology_key} domains"
    return None


def _spread_term(obj: dict[str, Any], spread: fragments.Spread, *, target: Target, ctx: Context) -> dict[str, Any]:
    selector = copy_json(spread.label_selector) if spread.label_selector else None
    if selector is None:
        selector = workload_selector(obj, target) or _group_selector(obj, target, ctx)
    term: dict[str, Any] = {"labelSelector": selector, "topologyKey": spread.topology_key}
    _add_match_label_keys(term, spread.match_label_keys, ctx)
    return term


def _add_match_label_keys(term: dict[str, Any], keys: Sequence[str], ctx: Context) -> None:
    """Add ``matchLabelKeys`` a pod affinity term may carry: none the term's labelSelector
    already constrains. The API server merges matchLabelKeys into the selector at pod
    creation and rejects a key found twice ("exists in both matchLabelKeys and
    labelSelector", validateMatchLabelKeysAndMismatchLabelKeys, from 1.31 on by default); a
    Deployment carrying such a term is accepted and then every pod it creates is refused."""
    if not keys:
        return
    selector = term.get("labelSelector") or {}
    taken = set(selector.get("matchLabels") or ()) | {e.get("key") for e in selector.get("matchExpressions") or ()}
    clashing = sorted(k for k in keys if k in taken)
    if clashing:
        ctx.warn(f"matchLabelKeys {', '.join(clashing)} left out: the spread's label selector already has it")
    kept = sorted({*term.get("matchLabelKeys", ()), *(k for k in keys if k not in taken)})
    if kept:
        term["matchLabelKeys"] = kept


def workload_selector(obj: Mapping[str, Any], target: Target) -> dict[str, Any] | None:
    """The selector that picks this workload's own pods (docs/policies.md, "Workload kinds"), or None when it has no
    usable label.

    ``spec.selector`` where the kind has one (immutable, a subset of the pod labels),
    otherwise the pod labels; keys that change per revision or are stamped by controllers
    (``targets.VOLATILE_LABELS``) are left out either way, or replicas of two revisions
    would stop repelling each other.
    """
    sel = get_path(obj, target.selector) if target.selector else None
    if isinstance(sel, dict):
        labels = {k: v for k, v in (sel.get("matchLabels") or {}).items() if k not in VOLATILE_LABELS}
        exprs = [e for e in sel.get("matchExpressions") or () if e.get("key") not in VOLATILE_LABELS]
        if labels or exprs:
            out: dict[str, Any] = {}
            if labels:
                out["matchLabels"] = labels
            if exprs:
                out["matchExpressions"] = copy_json(exprs)
            return out
    pod_labels = get_path(obj, target.pod_labels)
    if isinstance(pod_labels, dict):
        labels = {k: v for k, v in pod_labels.items() if k not in VOLATILE_LABELS}
        if labels:
            return {"matchLabels": labels}
    return None


def _group_selector(obj: dict[str, Any], target: Target, ctx: Context) -> dict[str, Any]:
    """Label the pods ``placement.novasphere.dev/group: <name>`` and select on that."""
    value = group_value(obj.get("metadata") or {})
    container: dict[str, Any] = obj
    for key in target.pod_labels:
        container = merge.ensure(container, key)
    if container.get(LABEL_GROUP) != value:
        container[LABEL_GROUP] = value
        ctx.changed()
        ctx.warn(f"pods had no usable label: added {LABEL_GROUP}={value}")
    return {"matchLabels": {LABEL_GROUP: value}}


_LABEL_VALUE_EDGES = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def group_value(metadata: Mapping[str, Any]) -> str:
    """The object's name, or its ``generateName`` stem, as a valid label value (<= 63
    characters, alphanumeric at both ends)."""
    raw = str(metadata.get("name") or metadata.get("generateName") or "")
    value = _LABEL_VALUE_EDGES.sub("", re.sub(r"[^A-Za-z0-9._-]", "-", raw)[:63])
    if not value:
        raise PlacementError("the object has neither a name nor a generateName to group its pods by")
    return value
