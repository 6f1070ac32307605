"""Rolling-update settings that never deadlock a rollout (docs/policies.md, "rollout").

A surge pod cannot schedule when the Deployment has *required* self anti-affinity on a
topology key and every eligible domain already runs a replica. ``decide`` applies the
rules in order:

1. no required self anti-affinity: maxSurge 1, maxUnavailable 0;
2. the cluster view shows more eligible domains than replicas: maxSurge 1, maxUnavailable 0;
3. otherwise maxSurge 0, maxUnavailable 1; or, when the cluster honours ``matchLabelKeys``,
   the engine scopes its own spread term to one revision (``pod-template-hash``), after
   which old and new pods no longer repel each other and rule 1 holds.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webhook.cluster.view import ClusterView, NodeSet
from webhook.engine.context import KEEP, REPLACE, Context, PlacementError
from webhook.engine.merge import ensure, mapping, scalar
from webhook.kube import selectors
from webhook.kube.affinity import REQUIRED
from webhook.kube.deployment import API_DEFAULT, REVISION_KEY, readable, resolve
from webhook.kube.kinds import Target
from webhook.kube.pointers import Path, get_path
from webhook.scheduler.filters import NodeEligibility


@dataclass(frozen=True)
class Decision:
    max_surge: int | str
    max_unavailable: int | str
    reason: str
    rule: int = 1  # the safe-rollout rule that decided (1, 2 or 3, as above)


# The decisions that depend on nothing but the rule, made once rather than per review.
NO_SELF_ANTI_AFFINITY = Decision(1, 0, "no required self anti-affinity across revisions")
NO_CLUSTER_VIEW = Decision(0, 1, "required self anti-affinity, no cluster view", rule=3)


def _covers_own_namespace(term: Mapping[str, Any], namespace: str | None) -> bool:
    # Empty namespaces and no namespaceSelector mean "the pod's own namespace". A
    # namespaceSelector may or may not select it; assume it does (the cautious answer).
    names = term.get("namespaces") or []
    if not names or term.get("namespaceSelector") is not None:
        return True
    return namespace in names


def blocking_self_terms(
    pod_spec: Mapping[str, Any], labels: Mapping[str, Any], namespace: str | None
) -> list[Mapping[str, Any]]:
    """Required anti-affinity terms that make a pod repel the other replicas of its own
    workload, old revision included (terms scoped by ``pod-template-hash`` do not)."""
    anti = ((pod_spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(REQUIRED) or []
    return [
        t
        for t in anti
        if isinstance(t, dict)
        and selectors.matches(t.get("labelSelector"), labels)
        and _covers_own_namespace(t, namespace)
        and REVISION_KEY not in (t.get("matchLabelKeys") or ())
    ]


def eligible_domains(pod_spec: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], topology_key: str) -> int:
    """Distinct values of ``topology_key`` over the nodes the pod may run on. Nodes without
    the key are not counted, which can only make the answer more cautious.

    The answer depends only on the node set and the parts of the pod spec the node
    predicates read, so a ``NodeSet`` remembers it: admission asks this on every review
    and must not scan every node each time.
    """
    if isinstance(nodes, NodeSet):
        key = _eligibility_key(pod_spec, topology_key)
        memo = nodes.memo()
        if key not in memo:
            memo[key] = _count_domains(pod_spec, nodes, topology_key)
        return int(memo[key])
    return _count_domains(pod_spec, nodes, topology_key)


def _eligibility_key(pod_spec: Mapping[str, Any], topology_key: str) -> str:
    # Exactly what NodeEligibility reads: nodeSelector, required node affinity,
    # tolerations. Canonical JSON so equal specs share an entry whatever their key order.
    node_affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    question = [topology_key, pod_spec.get("nodeSelector"), node_affinity, pod_spec.get("tolerations")]
    return json.dumps(question, sort_keys=True, separators=(",", ":"), default=str)


def _count_domains(pod_spec: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], topology_key: str) -> int:
    eligibility = NodeEligibility(pod_spec)
    domains = set()
    for node in nodes:
        value = ((node.get("metadata") or {}).get("labels") or {}).get(topology_key)
        if value is not None and eligibility.admits(node):
            domains.add(value)
    return len(domains)


def room_to_surge(
    pod_spec: Mapping[str, Any], *, topology_keys: Sequence[str], replicas: int, cluster: ClusterView | None
) -> bool:
    """Rule 2: the cluster view shows more eligible domains than replicas for every key."""
    if cluster is None:
        return False
    nodes = cluster.nodes()
    return all(eligible_domains(pod_spec, nodes, key) > replicas for key in topology_keys)


def replicas_of(obj: Mapping[str, Any], target: Target) -> int:
    return _replicas(get_path(obj, target.rollout[:-1]) if target.rollout else None)


def _replicas(parent: Mapping[str, Any] | None) -> int:
    """``replicas`` beside the strategy (the Deployment's spec)."""
    value = (parent or {}).get("replicas")
    return value if isinstance(value, int) else 1  # the API default


def decide(
    *,
    pod_spec: Mapping[str, Any],
    labels: Mapping[str, Any],
    namespace: str | None,
    replicas: int,
    cluster: ClusterView | None,
) -> Decision:
    blocking = blocking_self_terms(pod_spec, labels, namespace)
    if not blocking:
        return NO_SELF_ANTI_AFFINITY
    if cluster is None:  # rule 2 counts domains in the cluster view: without one, rule 3
        return NO_CLUSTER_VIEW
    keys = sorted({str(t.get("topologyKey")) for t in blocking})
    if room_to_surge(pod_spec, topology_keys=keys, replicas=replicas, cluster=cluster):
        return Decision(1, 0, f"more eligible {keys[0]} domains than replicas", rule=2)
    return Decision(0, 1, f"required self anti-affinity, not enough {keys[0]} domains", rule=3)


def safe_values(decision: Decision, rollout: Mapping[str, Any]) -> Decision:
    """The policy's own maxSurge/maxUnavailable in safe mode, where they cannot deadlock.

    Rule 1 (no required self anti-affinity): any surge can schedule, so the policy's values
    stand. Rule 2 proves room for exactly one surge pod, so maxSurge stays 1 and only the
    policy's maxUnavailable is taken. Rule 3 overrides both: no surge at all.
    """
    surge, unavailable = rollout.get("maxSurge"), rollout.get("maxUnavailable")
    if decision.rule == 3:
        return decision
    if decision.rule == 1 and surge is not None:
        decision = replace(decision, max_surge=surge)
    if unavailable is not None:
        decision = replace(decision, max_unavailable=unavailable)
    return decision


# --- writing the strategy -------------------------------------------------------------


ROLLING_KEYS = ("maxSurge", "maxUnavailable")  # in the order warnings list them (alphabetical)


def _is_zero(value: Any) -> bool:
    return value in (0, "0", "0%")


def _user_set(strategy: Mapping[str, Any] | None) -> bool:
    """Whether the strategy differs from what the API server defaults it to."""
    if not strategy:
        return False
    if strategy.get("type") not in (None, "RollingUpdate"):
        return True
    ru = strategy.get("rollingUpdate") or {}
    return any(ru.get(k) not in (None, API_DEFAULT) for k in ROLLING_KEYS)


def apply(
    obj: dict[str, Any],
    *,
    target: Target,
    rollout: Mapping[str, Any] | None,
    pod_spec: Mapping[str, Any],
    labels: Mapping[str, Any],
    ctx: Context,
) -> None:
    """Write the policy's rollout into the object's strategy (Deployments)."""
    if not rollout or target.rollout is None:
        return
    parent = get_path(obj, target.rollout[:-1])
    if not isinstance(parent, dict):
        return
    key = target.rollout[-1]
    strategy = mapping(parent, key, where=".".join(target.rollout[:-1]))
    if strategy and strategy.get("type") == "Recreate":
        ctx.warn("rollout: strategy Recreate left alone")
        return
    if rollout.get("minReadySeconds") is not None:
        # The API server omits a zero minReadySeconds, so in a review "absent" covers the
        # default; a 0 written in a manifest is a choice like any other value.
        scalar(parent, "minReadySeconds", rollout["minReadySeconds"], ctx)
    current = _rolling_update(strategy, where=".".join(target.rollout))
    if rollout.get("mode", "safe") != "safe":
        wanted = {k: rollout[k] for k in ROLLING_KEYS if rollout.get(k) is not None}
        if not (ctx.mode == KEEP and _user_set(strategy)):
            _write(parent, key, current, _combined(current, wanted, ctx), ctx)
        return
    replicas = _replicas(parent)
    decision = decide(pod_spec=pod_spec, labels=labels, namespace=(obj.get("metadata") or {}).get("namespace"),
                      replicas=replicas, cluster=ctx.cluster)
    wanted = {"maxSurge": (d := safe_values(decision, rollout)).max_surge, "maxUnavailable": d.max_unavailable}
    if ctx.mode == KEEP and _user_set(strategy):
        if not can_finish(current, replicas=replicas, decision=decision):
            ctx.warn(f"rollout: the strategy kept by onConflict keep can never finish ({decision.reason})")
        return
    authored = _authored(ctx.original, target.rollout)
    # The author's values are the base in every pass: a value this admission wrote in an
    # earlier pass (perhaps over the author's, as never finishing) is not a choice to keep.
    result = _combined({**current, **authored}, wanted, ctx)
    if not can_finish(result, replicas=replicas, decision=decision):
        result = _finishing(result, authored, decision, replicas, ctx)
    ctx.warn(_written(result, authored, decision))
    _write(parent, key, current, result, ctx)


def _rolling_update(strategy: Mapping[str, Any] | None, *, where: str) -> dict[str, Any]:
    """A copy of the strategy's ``rollingUpdate``; ``PlacementError`` naming the field when it is
    not a mapping, or holds a maxSurge or maxUnavailable the controller's arithmetic cannot read
    (the API server refuses such a Deployment; a hand-made review can carry one)."""
    current = dict(mapping(strategy, "rollingUpdate", where=where) or {}) if strategy else {}
    for name in ROLLING_KEYS:
        value = current.get(name)
        if value is not None and not readable(value):
            raise PlacementError(f"{name} is not an integer or a percentage (at {where}.rollingUpdate)")
    return current


def _written(result: Mapping[str, Any], authored: Mapping[str, Any], decision: Decision) -> str:
    """The warning for a safe rollout: the values, why, and which of them its author wrote."""
    kept = [k for k, v in authored.items() if result.get(k) == v]  # in ROLLING_KEYS order, as _authored
    note = f"; as written: {', '.join(kept)}" if kept else ""
    return f"rollout: {_shown(result)} ({decision.reason}{note})"


def _authored(original: Mapping[str, Any] | None, strategy_path: Path) -> dict[str, Any]:
    """The rolling-update values the object carried when admission began, but for the API
    defaults: what its author wrote, or an earlier admission did."""
    strategy = get_path(original, strategy_path) if original is not None else None
    ru = (strategy.get("rollingUpdate") if isinstance(strategy, dict) else None) or {}
    return {k: ru[k] for k in ROLLING_KEYS if ru.get(k, API_DEFAULT) != API_DEFAULT}


def _finishing(
    result: dict[str, Any], authored: Mapping[str, Any], decision: Decision, replicas: int, ctx: Context
) -> dict[str, Any]:
    """Values that can finish, changing as little of what the author wrote as possible: first
    only the values policies wrote (to rule 3's), then, when the author's own can never finish
    with the required anti-affinity and no spare domain known, the author's too, with a warning."""
    fallback = {"maxSurge": decision.max_surge, "maxUnavailable": decision.max_unavailable}
    ours = {**result, **{k: v for k, v in fallback.items() if k not in authored}}
    both_zero = _is_zero(ours.get("maxSurge", API_DEFAULT)) and _is_zero(ours.get("maxUnavailable", API_DEFAULT))
    if not both_zero and can_finish(ours, replicas=replicas, decision=decision):
        return ours
    ctx.warn(f"rollout: the author's {_shown({**result, **authored})} could never finish with required self "
             "anti-affinity and no spare domain known: replaced")
    return fallback


def _shown(values: Mapping[str, Any]) -> str:
    return f"maxSurge {values.get('maxSurge', API_DEFAULT)}, maxUnavailable {values.get('maxUnavailable', API_DEFAULT)}"


def _combined(current: Mapping[str, Any], wanted: Mapping[str, Any], ctx: Context) -> dict[str, Any]:
    """The rolling-update values after a policy: ``wanted`` over absent values and the API
    defaults, and over everything under ``replace``; anything else someone wrote stays."""
    result = dict(current)
    replacing = ctx.mode == REPLACE
    for name, value in wanted.items():
        have = current.get(name)
        if replacing or have is None or have == API_DEFAULT:
            result[name] = value
    return result


def can_finish(values: Mapping[str, Any], *, replicas: int, decision: Decision) -> bool:
    """Whether a rolling update with these values can finish. Without required self
    anti-affinity (rule 1), or with a spare domain known (rule 2), a surge pod schedules.
    Otherwise only removing an old pod frees a domain, which maxUnavailable resolving to 0
    never allows: the surge pod stays Pending and the rollout is stuck."""
    if decision.rule in (1, 2) or replicas == 0:
        return True
    surge, unavailable = resolve(values.get("maxSurge", API_DEFAULT), values.get("maxUnavailable", API_DEFAULT), replicas)
    return unavailable > 0


def _write(parent: dict[str, Any], key: str, current: dict[str, Any], result: dict[str, Any], ctx: Context) -> None:
    if _is_zero(result.get("maxSurge", API_DEFAULT)) and _is_zero(result.get("maxUnavailable", API_DEFAULT)):
        # The API rejects both zero (ValidateRollingUpdateDeployment); the object stays as it is.
        ctx.warn("rollout: left as is, maxSurge and maxUnavailable would both be 0")
        return
    if result == current:
        return
    ensure(ensure(parent, key), "rollingUpdate").update(result)
    ctx.changed()


def scope_spread(
    obj: Mapping[str, Any],
    *,
    target: Target,
    rollout: Mapping[str, Any] | None,
    pod_spec: Mapping[str, Any],
    topology_key: str,
    cluster: ClusterView | None,
) -> bool:
    """Rule 3's second form: whether the engine's required spread term should carry
    ``matchLabelKeys: [pod-template-hash]`` so a surge pod only repels its own revision.

    Only when the cluster is known to honour matchLabelKeys (Kubernetes >= 1.31 by
    default; an older API server drops the field and the term would repel every revision)
    and rule 2 does not already allow a surge.
    """
    if not rollout or rollout.get("mode", "safe") != "safe" or target.rollout is None:
        return False
    if cluster is None or cluster.supports_match_label_keys() is not True:
        return False
    strategy = get_path(obj, target.rollout)
    if isinstance(strategy, dict) and strategy.get("type") == "Recreate":
        return False
    replicas = replicas_of(obj, target)
    return not room_to_surge(pod_spec, topology_keys=[topology_key], replicas=replicas, cluster=cluster)
