"""What ``lint`` finds across a loaded policy set, beyond what loading validates.

Two policies that can select the same object but set a scheduling field to different
values, and policies (or parts of them) that can never apply to anything. Each finding is a
``LoadError`` at the file and line of the field it is about.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

from webhook.kube.kinds import Targets
from webhook.policy import overlap
from webhook.policy.errors import LoadError, format_path, located
from webhook.policy.loader import Loaded
from webhook.policy.policyset import Policy

__all__ = ["conflicts", "findings", "never_applies"]

SCALAR_FIELDS = ("priorityClassName", "schedulerName", "preemptionPolicy")
ACTIONS = ("placement", "scheduling", "rollout", "vm")
INERT_OPERATIONS = frozenset({"DELETE", "CONNECT"})  # admission never mutates these


def findings(loaded: Loaded) -> list[LoadError]:
    """Cross-policy conflicts and never-applying policies, in file order."""
    found = [f for p in loaded.policies for f in _never_applies(p, loaded)]
    found += _conflicts(loaded)
    return sorted(set(found), key=lambda e: (e.file, e.line, e.field, e.message))


def conflicts(loaded: Loaded, name: str) -> list[LoadError]:
    """lint's conflicts between the policy ``name`` and the others (the validating webhook asks
    this of a policy being applied, against the set in force)."""
    return _conflicts(loaded, only=name)


def never_applies(loaded: Loaded, name: str) -> list[LoadError]:
    """lint's findings about the policy ``name`` alone: parts of it that can never apply."""
    return [f for p in loaded.policies if p.name == name for f in _never_applies(p, loaded)]


def locate(loaded: Loaded, p: Policy, *path: str | int) -> tuple[str, int, str]:
    doc, base = loaded.sources[p.name], loaded.bases[p.name]
    full = base + tuple(path)
    return doc.file, doc.line_of(full), format_path(full)


def finding(loaded: Loaded, p: Policy, path: Sequence[str | int], message: str) -> LoadError:
    file, line, field = locate(loaded, p, *path)
    return LoadError(file, line, field, message)


def _conflicts(loaded: Loaded, *, only: str | None = None) -> list[LoadError]:
    """Pairs of policies that can select one object and set a scalar field differently
    (``only``: the pairs the policy of that name is in)."""
    targets = loaded.policies.targets
    out: list[LoadError] = []
    for field in SCALAR_FIELDS:
        # Audit policies change nothing, so they cannot fight over a field.
        setters = [
            p for p in loaded.policies
            if p.enforcement == "patch" and field in (p.spec.get("scheduling") or {})
        ]
        for i, later in enumerate(setters):
            mine = later.spec["scheduling"][field]
            for earlier in setters[:i]:
                if only is not None and only not in (earlier.name, later.name):
                    continue
                theirs = earlier.spec["scheduling"][field]
                if theirs != mine and overlap.can_overlap(earlier, later, targets=targets):
                    out.append(_conflict(loaded, earlier, later, field))
    return out


def _conflict(loaded: Loaded, earlier: Policy, later: Policy, field: str) -> LoadError:
    theirs = earlier.spec["scheduling"][field]
    file, line, _ = locate(loaded, earlier, "spec", "scheduling", field)
    message = (
        f"conflicts with policy {earlier.name!r} ({located(file, line)}), which sets {theirs!r} "
        "for objects both can select; which value wins depends on order and onConflict"
    )
    return finding(loaded, later, ("spec", "scheduling", field), message)


def _never_applies(p: Policy, loaded: Loaded) -> Iterator[LoadError]:
    """Findings for a policy, or parts of one, that can never change anything."""
    for path, message in _dead_parts(p, loaded.policies.targets):
        yield finding(loaded, p, path, message)


def _dead_parts(p: Policy, targets: Targets) -> Iterator[tuple[tuple[str | int, ...], str]]:
    yield from _unselectable(p, targets)
    yield from _empty_actions(p)
    kinds = overlap.effective_kinds(p, targets)
    if p.targets is None or not kinds:
        return
    names = ", ".join(sorted(t.kind for t in kinds))
    if "rollout" in p.spec and not any(t.rollout for t in kinds):
        yield ("spec", "rollout"), f"rollout applies to Deployments only; this policy selects {names}"
    if "vm" in p.spec and not any(t.kubevirt for t in kinds):
        yield ("spec", "vm"), f"vm applies to KubeVirt kinds only; this policy selects {names}"
    spread = (p.spec.get("placement") or {}).get("podAntiAffinity", {}).get("spread")
    if spread and not any(t.self_spread for t in kinds):
        yield (
            ("spec", "placement", "podAntiAffinity", "spread"),
            f"spread has no effect: {names} already run one pod per node",
        )


def _unselectable(p: Policy, targets: Targets) -> Iterator[tuple[tuple[str | int, ...], str]]:
    match = p.spec.get("match") or {}
    if not overlap.effective_kinds(p, targets):
        yield ("spec", "exclude", "kinds"), "every kind the policy matches is excluded; it can never apply"
    ops = overlap.effective_operations(p)
    if ops <= INERT_OPERATIONS:
        listed = ", ".join(sorted(ops)) or "no operation"
        yield ("spec", "match", "operations"), f"{listed} only: admission never mutates these, so it can never apply"
    excluded = list(match.get("excludeNamespaces") or ()) + list(_only_exclude(p, "namespaces"))
    if not overlap.uncovered_globs(match.get("namespaces"), excluded):
        yield ("spec", "match", "namespaces"), "every namespace the policy matches is excluded; it can never apply"
    if not overlap.uncovered_globs(match.get("names"), _only_exclude(p, "names")):
        yield ("spec", "match", "names"), "every name the policy matches is excluded; it can never apply"
    for field in ("selector", "podSelector", "namespaceSelector"):
        if not overlap.selector_satisfiable(match.get(field)):
            yield ("spec", "match", field), f"{field} contradicts itself; no object can match it"


def _only_exclude(p: Policy, criterion: str) -> list[str]:
    exclude = p.spec.get("exclude") or {}
    return list(exclude.get(criterion) or ()) if set(exclude) == {criterion} else []


def _empty_actions(p: Policy) -> Iterator[tuple[tuple[str | int, ...], str]]:
    present = [name for name in ACTIONS if name in p.spec]
    if not present:
        yield ("spec",), "the policy does nothing: set placement, scheduling, rollout or vm"
        return
    for name in present:
        if not p.spec[name]:
            yield ("spec", name), f"{name} is empty; remove it or give it content"
