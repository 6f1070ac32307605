"""A rebalance pass as plain data: candidates, and the decision made for each.

``decide`` (pure, on a snapshot) turns candidates into decisions; the controller acts on the
``move`` ones through the Eviction API and prints all of them in ``--dry-run``'s table.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Why(str, Enum):
    """Why a running pod is a candidate."""

    INTERRUPTIBLE_ON_DEMAND = "interruptible pod on on-demand while spot nodes exist"
    PREFERENCE_UNMET = "preferred node affinity unmet"
    UNREADABLE = "the model cannot read it"  # skipped: whether it is a candidate cannot be told


class Verdict(str, Enum):
    MOVE = "move"  # evict now: the simulation lands it on a better node at once
    STAY = "stay"  # simulated, and moving gains less than --min-gain (or lands nowhere better)
    SKIP = "skip"  # not simulated: excluded, unreadable, its owner busy, the rate limit, a PDB


@dataclass(frozen=True, slots=True)
class Owner:
    """The pod's controller (``metadata.ownerReferences`` with ``controller: true``)."""

    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Candidate:
    namespace: str
    name: str
    uid: str
    node: str  # where it runs now
    owner: Owner
    why: Why

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Decision:
    """``score_now`` and ``score_there`` are the pod's preference points on its node and on the
    node the simulation lands it on (``target``; None when it would not schedule at once);
    ``gain`` is their difference; ``reason`` says why, in a sentence an operator reads.
    ``ties`` are the other nodes the simulation scored as high as ``target``: the real scheduler
    picks one of the top-scoring nodes at random (``selectHost``), so a replacement bound to any
    of them is where the simulation said (the controller counts the others as mispredictions)."""

    candidate: Candidate
    verdict: Verdict
    reason: str
    target: str | None = None
    score_now: int = 0
    score_there: int = 0
    ties: frozenset[str] = frozenset()

    @property
    def gain(self) -> int:
        return self.score_there - self.score_now
