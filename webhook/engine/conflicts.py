"""What policies do together that no single one says: ``lint`` findings that need the compiler.

A policy whose own required node affinity can match no node, and two policies that can
select the same object (``policy.overlap``) whose required node affinities, ANDed as the
engine ANDs them, can match no node: every pod either would place stays Pending.
"""
from __future__ import annotations

from webhook.engine import fragments
from webhook.policy import overlap
from webhook.policy.errors import LoadError
from webhook.policy.lint import finding
from webhook.policy.loader import Loaded
from webhook.policy.policyset import Policy

__all__ = ["contradictions", "findings", "uncompilable"]

REQUIRED_PATH = ("spec", "placement")


def findings(loaded: Loaded, *, only: str | None = None) -> list[LoadError]:
    """Policies that cannot be compiled, and pairs whose required node affinity contradicts
    (``only``: the findings about the policy of that name, and the pairs it is in)."""
    return uncompilable(loaded, only=only) + contradictions(loaded, only=only)


def uncompilable(loaded: Loaded, *, only: str | None = None) -> list[LoadError]:
    """Policies (``only``: the one of that name) whose placement cannot be compiled: they can never apply."""
    found: list[LoadError] = []
    for p in loaded.policies:
        error = fragments.compiled(p).error if only in (None, p.name) else None
        if error:
            found.append(finding(loaded, p, REQUIRED_PATH, f"the policy can never apply: {error}"))
    return found


def contradictions(loaded: Loaded, *, only: str | None = None) -> list[LoadError]:
    """Pairs of policies (``only``: the pairs the one of that name is in) that can select the
    same objects and whose required node affinities, ANDed, match no node."""
    found: list[LoadError] = []
    enforcing = [p for p in loaded.policies if p.enforcement == "patch"]
    for i, later in enumerate(enforcing):
        for earlier in enforcing[:i]:
            if only is not None and only not in (earlier.name, later.name):
                continue
            why = _contradiction(earlier, later)
            if why and overlap.can_overlap(earlier, later, targets=loaded.policies.targets):
                message = (f"together with policy {earlier.name!r} ({earlier.source}), which can select the same "
                           f"objects, required node affinity can match no node: {why}")
                found.append(finding(loaded, later, REQUIRED_PATH, message))
    return found


def _contradiction(a: Policy, b: Policy) -> str | None:
    """Why the AND of two policies' required node affinities matches no node, if it does not."""
    first, second = fragments.compiled(a), fragments.compiled(b)
    if first.error or second.error or first.required is None or second.required is None:
        return None
    try:
        fragments.and_dnf([first.required, second.required])
    except fragments.CompileError as exc:
        text = str(exc)
        return text.split(": ", 1)[1] if "can match no node: " in text else None
    return None
