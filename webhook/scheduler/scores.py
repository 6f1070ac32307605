"""The score plugins that look at one node and the pod only, and ``DefaultNormalizeScore``.

``node_affinity_raw``: NodeAffinity ``Score`` (sum of matching preferred term weights).
``taint_raw``: TaintToleration ``Score`` (untolerated PreferNoSchedule taints).
``least_allocated``: NodeResourcesFit with the default LeastAllocated strategy, cpu and memory
weight 1, over the non-zero requests (``leastResourceScorer``, least_allocated.go).
``balanced_allocation``: NodeResourcesBalancedAllocation over the plain requests
(``balancedResourceScorer``, balanced_allocation.go); a best-effort pod (no cpu or memory
request) is skipped since v1.33 (kubernetes#129138) and scores 0 everywhere.
Neither resource plugin normalizes: their scores are already 0..100.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.taints import (
    count_intolerable_prefer_no_schedule,
    prefer_no_schedule_tolerations,
)

if TYPE_CHECKING:
    from webhook.scheduler.plan import PodPlan

__all__ = ["balanced_allocation", "default_normalize", "least_allocated", "node_affinity_raw", "taint_raw"]

MAX_NODE_SCORE = 100


def node_affinity_raw(plan: PodPlan, node: NodeInfo) -> int:
    return plan.preferred.score(node.labels, node.name) if plan.preferred is not None else 0


def taint_raw(plan: PodPlan, node: NodeInfo) -> int:
    return count_intolerable_prefer_no_schedule(node.taints, prefer_no_schedule_tolerations(plan.tolerations))


def default_normalize(scores: Sequence[int], reverse: bool) -> list[int]:
    """``helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)``: scale to the highest
    score (integer division); all-zero scores stay 0, or all become 100 when reversed."""
    top = max(scores, default=0)
    if top <= 0:
        return [MAX_NODE_SCORE if reverse else s for s in scores]
    scaled = [MAX_NODE_SCORE * s // top if s >= 0 else -(MAX_NODE_SCORE * -s // top) for s in scores]
    return [MAX_NODE_SCORE - s for s in scaled] if reverse else scaled


def _least_requested(requested: int, capacity: int) -> int:
    """``leastRequestedScore``: the free fraction of capacity, 0..100, 0 when over-committed."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def least_allocated(plan: PodPlan, node: NodeInfo) -> int:
    """``leastResourceScorer`` over cpu and memory (weights 1): a resource the node has none of
    allocatable is left out (``score`` skips alloc == 0)."""
    cpu, memory = plan.least_requests
    total = weights = 0
    for alloc, requested in ((node.allocatable.cpu, node.non0_cpu + cpu), (node.allocatable.memory, node.non0_mem + memory)):
        if alloc == 0:
            continue
        total += _least_requested(requested, alloc)
        weights += 1
    return total // weights if weights else 0


def balanced_allocation(plan: PodPlan, node: NodeInfo) -> int:
    """``balancedResourceScorer``: 100 * (1 - standard deviation of the requested fractions)."""
    cpu, memory = plan.balanced_requests
    fractions = [min((node.requested.cpu + cpu) / node.allocatable.cpu, 1.0) if node.allocatable.cpu else None,
                 min((node.requested.memory + memory) / node.allocatable.memory, 1.0) if node.allocatable.memory else None]
    kept = [f for f in fractions if f is not None]
    std = 0.0
    if len(kept) == 2:
        std = abs((kept[0] - kept[1]) / 2)
    elif len(kept) > 2:  # only with more resources configured than the default cpu and memory
        mean = sum(kept) / len(kept)
        std = math.sqrt(sum((f - mean) ** 2 for f in kept) / len(kept))
    return int((1 - std) * MAX_NODE_SCORE)


def best_effort(plan: PodPlan) -> bool:
    """``isBestEffortPod`` of the BalancedAllocation PreScore: no cpu and no memory requested."""
    return not any(plan.balanced_requests)
