"""A finished pod holds nothing.

A pod in phase Succeeded or Failed has run to completion: its containers are gone, it holds no
resources on its node and never matters to a scheduling filter again. The kube-scheduler's pod
informer does not even list such pods (``newPodInformer`` in pkg/scheduler/scheduler.go builds
the field selector ``status.phase!=Succeeded,status.phase!=Failed`` from the two phases); the
node labeler counts no requests for them, ``explain`` places nothing against them, and a drain
has nothing to evict. Every one of those reads this module.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SCHEDULER_FIELD_SELECTOR", "TERMINAL_PHASES", "terminal"]

TERMINAL_PHASES: tuple[str, ...] = ("Succeeded", "Failed")  # v1.PodSucceeded, v1.PodFailed
# What the scheduler's pod informer lists: every pod not in a terminal phase.
SCHEDULER_FIELD_SELECTOR = ",".join(f"status.phase!={phase}" for phase in TERMINAL_PHASES)


def terminal(pod: Mapping[str, Any]) -> bool:
    """Whether the pod has finished (phase Succeeded or Failed), so holds nothing."""
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
