"""The status the webhook gives a PlacementPolicy object: what it made of the object's spec.

``observedGeneration`` is the ``metadata.generation`` the set in force was assembled from; the
``Ready`` condition is True (reason ``Loaded``) when the policy is in force, else False with the
reason (``Invalid``: the loader's errors; ``Duplicate``: a policy file defines the name too) and
the errors, each with its field path; ``changedObjects`` counts the objects it changed since it
was loaded.

The condition follows metav1.Condition's rules as ``meta.SetStatusCondition``
(k8s.io/apimachinery/pkg/api/meta/conditions.go) applies them: ``lastTransitionTime`` moves only
when the condition's status does. Conditions of other types are left as they are. The status is
written only when it differs from the object's (``differs``), so an unchanged policy costs no write.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.policy.crd import CONDITION_READY, REASON_LOADED
from webhook.policy.errors import LoadError

__all__ = ["IN_FORCE", "MAX_MESSAGE", "desired", "differs", "message"]

IN_FORCE = "in force: the webhook applies this policy"
# metav1.Condition's message is at most 32768 characters (the CRD's maxLength).
MAX_MESSAGE = 32768
_CUT = "\n... (cut: run placement-webhook lint for every error)"


def message(errors: Sequence[LoadError]) -> str:
    """The errors, one a line as ``field.path: message`` (the object is the condition's own),
    cut to what a condition's message holds."""
    lines = "\n".join(f"{e.field}: {e.message}" if e.field else e.message for e in errors)
    text = lines or "not in force"
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - len(_CUT)] + _CUT


def desired(current: Mapping[str, Any] | None, *, generation: int, reason: str | None,
            errors: Sequence[LoadError] = (), changed: int, now: str) -> dict[str, Any]:
    """The status an object with status ``current`` should have: in force when ``reason`` is
    None, else not in force for ``reason`` with ``errors``. ``now`` (RFC 3339) is the transition
    time of a condition whose status changes."""
    status = "True" if reason is None else "False"
    ready: dict[str, Any] = {
        "type": CONDITION_READY,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": now,
        "reason": REASON_LOADED if reason is None else reason,
        # Never empty: an API server built with Go 1.16 before kubernetes#99804 reads "" as null.
        "message": IN_FORCE if reason is None else message(errors),
    }
    conditions = _conditions(current)
    old = next((c for c in conditions if c.get("type") == CONDITION_READY), None)
    if old is not None and old.get("status") == status and isinstance(old.get("lastTransitionTime"), str):
        ready["lastTransitionTime"] = old["lastTransitionTime"]
    others = [dict(c) for c in conditions if c.get("type") != CONDITION_READY]
    return {"observedGeneration": generation, "conditions": [ready, *others], "changedObjects": changed}


def differs(current: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Whether writing ``wanted`` would change the object's status (the fields it sets: a
    merge patch leaves the others alone)."""
    have = current or {}
    return any(have.get(key) != value for key, value in wanted.items())


def _conditions(current: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    found = (current or {}).get("conditions")
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []
