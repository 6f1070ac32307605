"""Fold compiled fragments into an object under the ``onConflict`` rules (docs/policies.md, "Merge modes").

Each function owns one field group of a pod spec (or of Wukong's scheduling block) and edits
the container it is given in place, reporting through the policy's ``context.Context``:

- ``merge`` is additive: required node affinity is ANDed into every existing term, list
  entries are appended unless an equal one exists, map keys and scalars are set only when
  absent (or at their API default). Nothing the object has is removed or rewritten.
- ``keep`` leaves a group the object already sets untouched.
- ``replace`` puts the policy's value in place of the object's for that group.

Containers are created only when something is added to them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from webhook.engine.context import KEEP, MERGE, REPLACE, Context, PlacementError
from webhook.engine.fragments import MAX_TERMS
from webhook.kube import selectors
from webhook.kube.affinity import PREFERRED, REQUIRED
from webhook.kube.deployment import REVISION_KEY
from webhook.kube.nodeterms import Term, TermKey, conjoin, key_contains, preferred_key, term_contradiction, term_key


def mapping(container: Mapping[str, Any], key: str, *, where: str) -> dict[str, Any] | None:
    """The mapping at ``container[key]``; None when absent; an error when not a mapping."""
    value = container.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise PlacementError(f"{where}.{key} is not a mapping")


def sequence(container: Mapping[str, Any], key: str, *, where: str) -> list[Any] | None:
    """The list at ``container[key]``; None when absent; an error when not a list."""
    value = container.get(key)
    if value is None or isinstance(value, list):
        return value
    raise PlacementError(f"{where}.{key} is not a list")


def ensure(container: dict[str, Any], key: str) -> dict[str, Any]:
    """The mapping at ``container[key]``, created when missing (only call to add to it)."""
    value = container.get(key)
    if not isinstance(value, dict):
        value = container[key] = {}
    return value


# --- semantic equality ----------------------------------------------------------------


def freeze(value: Any, *, revision_free: bool = False) -> Any:
    """A hashable identity of plain data in which key order, list order, nulls and empty
    lists or maps do not count (every list the engine compares is a set in the API).

    ``revision_free`` drops ``pod-template-hash`` from ``matchLabelKeys``: it only scopes
    a self anti-affinity term to one revision (safe rollouts, rule 3), so a term that differs
    from ours by it alone is the same spread and must not be added twice.
    """
    if isinstance(value, dict):
        return frozenset(
            (k, _freeze_entry(k, v, revision_free)) for k, v in value.items() if v is not None and v != [] and v != {}
        )
    if isinstance(value, list):
        return frozenset(freeze(v, revision_free=revision_free) for v in value)
    return value


def _freeze_entry(key: str, value: Any, revision_free: bool) -> Any:
    if revision_free and key == "matchLabelKeys" and isinstance(value, list):
        return frozenset(v for v in value if v != REVISION_KEY)
    return freeze(value, revision_free=revision_free)


def canonical(value: Any) -> Any:
    """Semantic identity of a list entry (a toleration, a required resource, ...)."""
    return freeze(value)


_SELECTORS = ("labelSelector", "namespaceSelector")


def anti_term_key(term: Mapping[str, Any]) -> Any:
    """Identity of a pod (anti-)affinity entry, a PodAffinityTerm or a weighted one: its
    selectors by what they select (``selectors.canonical``: ``matchLabels`` and the same
    requirement written as ``In`` are one), the rest as ``freeze(revision_free=True)``."""
    inner = term.get("podAffinityTerm")
    if isinstance(inner, Mapping):
        return (freeze({k: v for k, v in term.items() if k != "podAffinityTerm"}), anti_term_key(inner))
    rest = {k: v for k, v in term.items() if k not in _SELECTORS}
    return (freeze(rest, revision_free=True),
            *(selectors.canonical(term.get(k)) if isinstance(term.get(k), Mapping) else None for k in _SELECTORS))


def toleration_key(tol: Mapping[str, Any]) -> Any:
    """Tolerations compared with the API's defaults filled in (operator Equal, empty value)."""
    return (
        tol.get("key") or "",
        tol.get("operator") or "Equal",
        tol.get("value") or "",
        tol.get("effect") or "",
        tol.get("tolerationSeconds"),
    )


def weight_bucket(entry: Mapping[str, Any]) -> Any:
    """A cheap partition of list entries that semantically equal entries share: only
    entries in the same bucket need their (costly) semantic key compared."""
    inner = entry.get("podAffinityTerm")
    topology = (inner if isinstance(inner, dict) else entry).get("topologyKey")
    return (entry.get("weight"), topology)


def key_bucket(entry: Mapping[str, Any]) -> Any:
    return entry.get("key"), entry.get("resourceType")


def append_missing(
    target: list[Any],
    items: Iterable[Mapping[str, Any]],
    key: Callable[[Any], Any],
    bucket: Callable[[Any], Any] = weight_bucket,
) -> bool:
    """Append the items no entry of ``target`` equals; True if any was added. The entries
    are shared, not copied: no one edits a list entry in place (``engine.working``)."""
    # Most items are already there verbatim on a second pass: a C-speed check first.
    pending = [item for item in items if item not in target]
    if not pending:
        return False
    if len(pending) == 1:  # what a policy adds to a group at a time, most often
        return _append_one(target, pending[0], key, bucket)
    # Semantic keys only for the entries that could equal a pending item, so a list that
    # many policies append to does not cost a key per entry per policy.
    buckets = {bucket(item) for item in pending}
    have = {key(x) for x in target if isinstance(x, dict) and bucket(x) in buckets}
    added = False
    for item in pending:
        k = key(item)
        if k not in have:
            target.append(item)
            have.add(k)
            added = True
    return added


def _append_one(target: list[Any], item: Mapping[str, Any], key: Callable[[Any], Any],
                bucket: Callable[[Any], Any]) -> bool:
    """``append_missing`` of one item: keyed only when an entry shares its bucket, once."""
    wanted, mine = bucket(item), None
    for x in target:
        if isinstance(x, dict) and bucket(x) == wanted:
            mine = key(item) if mine is None else mine
            if key(x) == mine:
                return False
    target.append(item)
    return True


# --- required node affinity: AND into existing terms ----------------------------------


def and_into(
    existing: Sequence[Mapping[str, Any]], terms: Sequence[Term], keys: Sequence[TermKey] | None = None
) -> list[Any] | None:
    """``existing AND terms`` (both ORs of terms), or None when ``existing`` already implies it.

    A term that already contains every requirement of one of ``terms`` is kept as is, which
    makes a second application a no-op. An empty term matches no node and ANDing keeps it
    so; it is left alone rather than turned into one that matches. ``keys`` are the
    ``term_key`` of each of ``terms`` when the caller has them (a policy's are compiled once).
    """
    if _implied(existing, terms):
        return None  # what ANDing them in an earlier pass left: no need to key every term
    out: list[Any] = []
    seen: set[Any] = set()
    changed = False
    wanted = keys if keys is not None else [term_key(t) for t in terms]
    for term in existing:
        if _left_alone(term):
            out.append(term)
            continue
        mine = term_key(term)
        if _contains_one(mine, wanted):
            out.append(term)
            seen.add(mine)
            continue
        changed = True
        for t, key in zip(terms, wanted):
            # A conjunction requires what both terms do: its key is the union of theirs.
            combined = (mine[0] | key[0], mine[1] | key[1])
            if combined not in seen:
                seen.add(combined)
                out.append(conjoin(term, t, key=mine, other_key=key))
    if not changed:
        return None
    if len(out) > MAX_TERMS:
        raise PlacementError(f"required node affinity would need {len(out)} terms (limit {MAX_TERMS})")
    return out


def _contains_one(key: TermKey, wanted: Sequence[TermKey]) -> bool:
    """Whether the term keyed ``key`` requires everything one of the ``wanted`` terms does."""
    for other in wanted:
        if key_contains(key, other):
            return True
    return False


def _left_alone(term: Any) -> bool:
    """A term ANDing keeps as it is: not a term, or an empty one (it matches no node)."""
    return not isinstance(term, dict) or not (term.get("matchExpressions") or term.get("matchFields"))


def _implied(existing: Sequence[Any], terms: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every term of ``existing`` is left alone or lists every requirement of one of
    ``terms`` (loops, not generators: this runs for every policy in every pass)."""
    for term in existing:
        if _left_alone(term):
            continue
        for other in terms:
            if _lists_every_requirement(term, other):
                break
        else:
            return False
    return True


def _lists_every_requirement(term: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether ``term`` holds each requirement of ``other`` exactly as ``other`` writes it, so
    that it implies ``other``: a C-speed check before ``term_key``. The loader makes a policy's
    values text, and for text ``==`` tells what ``expr_key`` tells."""
    for part in _PARTS:
        have = term.get(part) or []
        if not isinstance(have, list):
            return False  # an odd shape takes the long way, and fails there as it always did
        for requirement in other.get(part) or ():
            if requirement not in have:
                return False
    return True


_PARTS = ("matchExpressions", "matchFields")


def warn_unsatisfiable(before: Sequence[Any], after: Sequence[Any], ctx: Context) -> None:
    """Say so when ANDing a policy's terms into the object's leaves terms that can match no
    node (the same key constrained to disjoint values, In with DoesNotExist, ...): the API
    server accepts them, and the pods stay Pending (kube.nodeterms.term_contradiction)."""
    dead = [(i, why) for i, term in enumerate(after)
            if isinstance(term, dict) and term not in before and (why := term_contradiction(term)) is not None]
    if not dead:
        return
    if len(dead) == len(after):
        ctx.warn(f"required node affinity can match no node ({dead[0][1]}): its pods would stay Pending")
    else:
        ctx.warn("required node affinity term " + ", ".join(f"{i} ({why})" for i, why in dead) + " can match no node")


def node_affinity(
    affinity_parent: dict[str, Any],
    *,
    required: Sequence[Term] | None,
    preferred: Sequence[Term],
    ctx: Context,
    key: str = "affinity",
    required_keys: Sequence[TermKey] | None = None,
) -> None:
    """Merge required/preferred node affinity into ``affinity_parent[key].nodeAffinity``;
    ``required_keys``: the ``term_key`` of each required term, when the caller has them."""
    if required is None and not preferred:
        return
    affinity = mapping(affinity_parent, key, where=ctx.where) or {}
    current = mapping(affinity, "nodeAffinity", where=f"{ctx.where}.{key}")
    if ctx.mode == KEEP and current:
        return
    if ctx.mode == REPLACE or not current:
        wanted: dict[str, Any] = {}
        if required is not None:
            wanted[REQUIRED] = {"nodeSelectorTerms": list(required)}
        if preferred:
            wanted[PREFERRED] = list(preferred)
        if current != wanted:
            ensure(affinity_parent, key)["nodeAffinity"] = wanted
            ctx.changed()
        return
    _merge_node_affinity(current, required=required, preferred=preferred, ctx=ctx, required_keys=required_keys)


def _merge_node_affinity(
    current: dict[str, Any],
    *,
    required: Sequence[Term] | None,
    preferred: Sequence[Term],
    ctx: Context,
    required_keys: Sequence[TermKey] | None,
) -> None:
    here = f"{ctx.where}.affinity.nodeAffinity"
    if required is not None:
        req = mapping(current, REQUIRED, where=here)
        terms = sequence(req, "nodeSelectorTerms", where=here) if req is not None else None
        if not terms:
            current[REQUIRED] = {**(req or {}), "nodeSelectorTerms": list(required)}
            ctx.changed()
        else:
            combined = and_into(terms, required, required_keys)
            if combined is not None:
                warn_unsatisfiable(terms, combined, ctx)
                terms[:] = combined
                ctx.changed()
    if preferred:
        prefs = sequence(current, PREFERRED, where=here)
        if prefs is None:
            current[PREFERRED] = list(preferred)
            ctx.changed()
        elif append_missing(prefs, preferred, preferred_key):
            ctx.changed()


# --- other groups ---------------------------------------------------------------------


def whole_group(container: dict[str, Any], key: str, current: Any, wanted: Any, ctx: Context) -> bool:
    """The modes that take the field group ``container[key]`` whole. True when they decided it:
    ``keep`` leaves a group the object sets as it is; ``replace``, or an object without the
    group, puts a copy of ``wanted`` in its place (the mapping or list is the object's own, its
    entries are shared). False: ``merge`` folds ``wanted`` into ``current``, which the object sets."""
    if ctx.mode == KEEP and current:
        return True
    if ctx.mode != REPLACE and current:
        return False
    if current != wanted:
        container[key] = wanted.copy()
        ctx.changed()
    return True


def node_selector(pod_spec: dict[str, Any], wanted: Mapping[str, str], ctx: Context) -> None:
    """Merge the labels ``wanted`` (not empty) into ``nodeSelector``; one the object sets is kept."""
    current = mapping(pod_spec, "nodeSelector", where=ctx.where)
    if whole_group(pod_spec, "nodeSelector", current, wanted, ctx):
        return
    assert current is not None  # merge: whole_group took an absent group
    for k, v in wanted.items():
        have = current.get(k)
        if have is None:
            current[k] = v
            ctx.changed()
        elif str(have) != v:
            ctx.warn(f"nodeSelector {k}={have} kept (policy wants {v})")


def pod_terms(
    pod_spec: dict[str, Any],
    group: str,
    *,
    required: Sequence[Term],
    preferred: Sequence[Term],
    ctx: Context,
) -> None:
    """Merge pod affinity or anti-affinity terms into ``affinity.<group>``."""
    if not required and not preferred:
        return
    affinity = mapping(pod_spec, "affinity", where=ctx.where) or {}
    current = mapping(affinity, group, where=f"{ctx.where}.affinity")
    if ctx.mode == KEEP and current:
        return
    if ctx.mode == REPLACE or not current:
        wanted: dict[str, Any] = {}
        if required:
            wanted[REQUIRED] = list(required)
        if preferred:
            wanted[PREFERRED] = list(preferred)
        if current != wanted:
            ensure(pod_spec, "affinity")[group] = wanted
            ctx.changed()
        return
    for field_name, items in ((REQUIRED, required), (PREFERRED, preferred)):
        if not items:
            continue
        have = sequence(current, field_name, where=f"{ctx.where}.affinity.{group}")
        if have is None:
            current[field_name] = list(items)
            ctx.changed()
        elif append_missing(have, items, anti_term_key):
            ctx.changed()


def tolerations(pod_spec: dict[str, Any], wanted: Sequence[Term], ctx: Context) -> None:
    """Add the tolerations ``wanted`` (not empty) the object lacks."""
    current = sequence(pod_spec, "tolerations", where=ctx.where)
    if whole_group(pod_spec, "tolerations", current, wanted, ctx):
        return
    assert current is not None  # merge: whole_group took an absent group
    if append_missing(current, wanted, toleration_key, key_bucket):
        ctx.changed()


def scalar(
    container: dict[str, Any],
    key: str,
    value: Any,
    ctx: Context,
    *,
    defaults: tuple[Any, ...] = (),
) -> bool:
    """Set one scalar under the mode's rules; ``defaults`` are the values the API server
    fills in before webhooks run, which are not a user's choice. True if it was written."""
    current = container.get(key)
    if current == value:
        return False
    if ctx.mode != REPLACE and current is not None and current not in defaults:
        if ctx.mode == MERGE:
            ctx.warn(f"{key} {current} kept (policy wants {value})")
        return False
    container[key] = value
    ctx.changed()
    return True
