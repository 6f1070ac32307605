"""The Deployment controller's revision label and arithmetic (pkg/controller/deployment/util/deployment_util.go).

One implementation, read by the engine's safe-rollout rules and by the rolling-update
simulation of the scheduler model.
"""
from __future__ import annotations

from typing import Any

__all__ = ["API_DEFAULT", "REVISION_KEY", "readable", "resolve"]

API_DEFAULT = "25%"  # the Deployment defaults for maxSurge and maxUnavailable (SetDefaults_Deployment)
# apps/v1 DefaultDeploymentUniqueLabelKey: the label the controller stamps on each revision's pods.
REVISION_KEY = "pod-template-hash"


def resolve(max_surge: Any, max_unavailable: Any, replicas: int) -> tuple[int, int]:
    """maxSurge and maxUnavailable as the Deployment controller resolves them
    (``ResolveFenceposts``, ``MaxUnavailable`` in pkg/controller/deployment/util): a percentage
    of the replicas, maxSurge rounded up and maxUnavailable down; both zero means one
    unavailable; maxUnavailable never more than the replicas."""
    surge = _read("maxSurge", max_surge, replicas, round_up=True)
    unavailable = _read("maxUnavailable", max_unavailable, replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, replicas)


def readable(value: Any) -> bool:
    """Whether ``resolve`` can read ``value`` as a maxSurge or maxUnavailable. The API server
    lets a Deployment carry only an integer or a percentage (``ValidatePositiveIntOrPercent``);
    a hand-made review, or a custom kind's strategy, can carry anything."""
    return _scaled(value, 100, round_up=False) is not None


def _read(name: str, value: Any, total: int, *, round_up: bool) -> int:
    """``_scaled``, or a ValueError naming the field it cannot read."""
    scaled = _scaled(value, total, round_up=round_up)
    if scaled is None:
        raise ValueError(f"{name} {value!r} is not an integer or a percentage")
    return scaled


def _scaled(value: Any, total: int, *, round_up: bool) -> int | None:
    """``intstr.GetScaledValueFromIntOrPercent``: an int as it is, "N%" of ``total``; None for
    a value that is neither.

    The controller rounds ``N * total / 100`` in float64; integer division gives the same
    whole numbers, exactly, without building a fraction on every call."""
    try:
        if isinstance(value, str) and value.endswith("%"):
            share, rest = divmod(int(value[:-1]) * total, 100)
            return share + 1 if round_up and rest else share
        return int(value)
    except (TypeError, ValueError):
        return None
