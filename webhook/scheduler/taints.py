"""Taints and tolerations as the TaintToleration and NodeUnschedulable plugins read them.

The matching of one toleration to one taint is ``webhook.kube.nodes.tolerates``
(``Toleration.ToleratesTaint``); here are the scheduler's loops around it, from
k8s.io/component-helpers/scheduling/corev1/helpers.go. The TaintTolerationComparisonOperators
gate (alpha in v1.35, off by default: Gt/Lt tolerations) is not modelled; with it off such a
toleration tolerates nothing, which is what ``tolerates`` answers.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.kube.nodes import tolerates

__all__ = [
    "DO_NOT_SCHEDULE",
    "UNSCHEDULABLE_TAINT",
    "count_intolerable_prefer_no_schedule",
    "find_untolerated",
    "prefer_no_schedule_tolerations",
    "tolerations_tolerate",
]

Taint = Mapping[str, Any]
Toleration = Mapping[str, Any]

# helper.DoNotScheduleTaintsFilterFunc: the effects the filter (and nodeTaintsPolicy: Honor) heed.
DO_NOT_SCHEDULE = frozenset({"NoSchedule", "NoExecute"})
# v1.TaintNodeUnschedulable, which NodeUnschedulable treats spec.unschedulable as.
UNSCHEDULABLE_TAINT: Taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def tolerations_tolerate(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    """``TolerationsTolerateTaint``: some toleration tolerates the taint."""
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration],
                     effects: frozenset[str] = DO_NOT_SCHEDULE) -> Taint | None:
    """``FindMatchingUntoleratedTaint``: the first taint with one of ``effects`` that no
    toleration tolerates, in the node's order; None when all are tolerated."""
    for taint in taints:
        if taint.get("effect") in effects and not tolerations_tolerate(tolerations, taint):
            return taint
    return None


def prefer_no_schedule_tolerations(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """``getAllTolerationPreferNoSchedule``: tolerations with no effect or PreferNoSchedule."""
    return tuple(t for t in tolerations if not t.get("effect") or t.get("effect") == "PreferNoSchedule")


def count_intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """``countIntolerableTaintsPreferNoSchedule``: the TaintToleration raw score of a node."""
    return sum(1 for taint in taints
               if taint.get("effect") == "PreferNoSchedule" and not tolerations_tolerate(tolerations, taint))
