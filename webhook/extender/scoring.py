"""The extender's decisions, pure: which nodes a pod may not use, and how much it should like
each of the others.

Filter: a node about to be reclaimed fails for good (``FailedAndUnresolvableNodes``:
preemption cannot help); with ``critical.requireOnDemand``, a spot node fails for good for a
critical pod. Nothing else is filtered: static affinity already does, and an unknown node
(named but not in the cluster view) passes through unchanged.

Prioritize (0..10, before the scheduler multiplies by the extender's weight and by 10):
- the capacity score: critical pods 10 on on-demand, 0 on spot; interruptible pods 10 on
  spot, 3 on on-demand; other pods 5 everywhere; an unknown capacity 5;
- spot nodes lose ``interruptions.penalty`` points per reclaim seen in their pool within the
  window (``History``), down to 0;
- with ``cost.factor`` f > 0: the score is (1-f) × that + f × the cost score, 10 for the
  cheapest priced candidate and 0 for the dearest (by instance type and capacity); a node
  without a price gets 5 there;
- a node about to be reclaimed scores 0.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.spot.config import SpotConfig
from webhook.spot.nodes import ON_DEMAND, SPOT, UNKNOWN, Detector, PodClass, capacity, pool

__all__ = ["FactsCache", "FilterOutcome", "History", "NodeFacts", "filter_nodes", "node_facts", "prioritize"]

INSTANCE_TYPE = "node.kubernetes.io/instance-type"


@dataclass
class FilterOutcome:
    passed: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)  # metric label -> nodes


class History:
    """Reclaims seen per spot pool, remembered for ``interruptions.windowSeconds``. A node
    counts once per window however often it is seen marked."""

    def __init__(self, config: SpotConfig, clock: Any = time.time) -> None:
        self.config = config
        self.clock = clock
        self._events: deque[tuple[float, tuple[str, ...], str]] = deque()
        self._seen: dict[str, float] = {}

    def saw(self, node: Mapping[str, Any], now: float | None = None) -> None:
        """Record that ``node`` was seen about to be reclaimed (it counts if it is spot)."""
        name = str((node.get("metadata") or {}).get("name") or "")
        self.record(name, capacity(node, self.config), pool(node, self.config), now)

    def record(self, name: str, kind: str, node_pool: tuple[str, ...], now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self._expire(now)
        if name in self._seen or kind != SPOT:
            return
        self._seen[name] = now
        self._events.append((now, node_pool, name))

    def count(self, node_pool: tuple[str, ...], now: float | None = None) -> int:
        self._expire(self.clock() if now is None else now)
        return sum(1 for _, p, _ in self._events if p == node_pool)

    def _expire(self, now: float) -> None:
        window = self.config.interruptions.window_seconds
        while self._events and now - self._events[0][0] > window:
            _, _, name = self._events.popleft()
            self._seen.pop(name, None)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the rules read of one node, worked out once per version of the node: its capacity,
    its pool, its instance type, a reclaim signal that does not depend on the time, and since
    when a spot node has not been Ready (the one signal that does)."""

    name: str
    kind: str
    pool: tuple[str, ...]
    instance: str | None
    reason: str | None
    not_ready_since: float | None

    def reclaim(self, detector: Detector, now: float) -> str | None:
        return self.reason if self.reason is not None else detector.not_ready(self.not_ready_since, now)


def facts_of(node: Mapping[str, Any], detector: Detector, config: SpotConfig) -> NodeFacts:
    labels = (node.get("metadata") or {}).get("labels") or {}
    instance = labels.get(INSTANCE_TYPE)
    return NodeFacts(str((node.get("metadata") or {}).get("name") or ""), capacity(node, config), pool(node, config),
                     None if instance is None else str(instance), detector.fixed(node), detector.not_ready_since(node))


class FactsCache:
    """``NodeFacts`` by node name for a sequence of nodes, recomputed only for the nodes whose
    object changed since the last sequence (the cluster view replaces a node's projection when
    the node changes and keeps it otherwise, and rebuilds its sequence only then)."""

    def __init__(self, detector: Detector, config: SpotConfig) -> None:
        self.detector = detector
        self.config = config
        self._source: Any = None
        self._entries: dict[str, tuple[Mapping[str, Any], NodeFacts]] = {}
        self._facts: dict[str, NodeFacts] = {}

    def of(self, nodes: Iterable[Mapping[str, Any]]) -> dict[str, NodeFacts]:
        if nodes is self._source:
            return self._facts
        entries: dict[str, tuple[Mapping[str, Any], NodeFacts]] = {}
        for node in nodes:
            name = str((node.get("metadata") or {}).get("name") or "")
            old = self._entries.get(name)
            entries[name] = old if old is not None and old[0] is node else \
                (node, facts_of(node, self.detector, self.config))
        self._source, self._entries = nodes, entries
        self._facts = {name: facts for name, (_, facts) in entries.items()}
        return self._facts


def node_facts(nodes: Iterable[Mapping[str, Any]], detector: Detector, config: SpotConfig) -> dict[str, NodeFacts]:
    """``NodeFacts`` by name for nodes seen once (whole Node objects in a request)."""
    out: dict[str, NodeFacts] = {}
    for node in nodes:
        facts = facts_of(node, detector, config)
        out[facts.name] = facts
    return out


def filter_nodes(pod_class: PodClass, names: Iterable[str], facts: Mapping[str, NodeFacts], detector: Detector,
                 config: SpotConfig, now: float, history: History | None = None) -> FilterOutcome:
    """``names`` filtered; ``facts`` holds the nodes known (a name without them passes)."""
    out = FilterOutcome([])
    keep_off_spot = pod_class.critical and config.critical.require_on_demand
    for name in names:
        node = facts.get(name)
        if node is None:
            out.passed.append(name)
            continue
        reason = node.reclaim(detector, now)
        if reason is not None:
            out.unresolvable[name] = f"node is about to be reclaimed ({reason})"
            out.reasons["reclaim"] = out.reasons.get("reclaim", 0) + 1
            if history is not None:
                history.record(node.name, node.kind, node.pool, now)
            continue
        if keep_off_spot and node.kind == SPOT:
            out.unresolvable[name] = f"a critical pod ({pod_class.why}) needs on-demand capacity"
            out.reasons["critical-on-spot"] = out.reasons.get("critical-on-spot", 0) + 1
            continue
        out.passed.append(name)
    return out


def prioritize(pod_class: PodClass, names: Iterable[str], facts: Mapping[str, NodeFacts], detector: Detector,
               config: SpotConfig, now: float, history: History | None = None) -> dict[str, int]:
    """A score 0..10 for each of ``names`` (an unknown node: the neutral 5)."""
    wanted = list(names)
    # The capacity score of each kind of node, each instance type's price and each pool's
    # reclaims are worked out once per call (thousands of nodes; a handful of each).
    by_kind = {kind: float(_capacity_score(pod_class, kind)) for kind in (SPOT, ON_DEMAND, UNKNOWN)}
    prices: dict[tuple[str, str], float | None] = {}
    penalty = config.interruptions.penalty
    reclaims: dict[tuple[str, ...], int] = {}
    known: dict[str, tuple[float | None, float | None]] = {}  # name -> (base score, None: reclaimed; price)
    for name in wanted:
        node = facts.get(name)
        if node is None or name in known:
            continue
        price = None
        if node.instance is not None and node.kind in (SPOT, ON_DEMAND):
            key = (node.instance, node.kind)
            if key not in prices:
                prices[key] = config.price(*key)
            price = prices[key]  # a reclaimed node's price counts in the range too
        if node.reclaim(detector, now) is not None:
            known[name] = (None, price)
            continue
        base = by_kind[node.kind]
        if node.kind == SPOT and history is not None:
            seen = reclaims.get(node.pool)
            if seen is None:
                seen = reclaims[node.pool] = history.count(node.pool, now)
            base = max(0.0, base - penalty * seen)
        known[name] = (base, price)
    priced = [price for _, price in known.values() if price is not None]
    cheapest, dearest = (min(priced), max(priced)) if priced else (0.0, 0.0)
    factor = float(config.cost.factor)
    scores: dict[str, int] = {}
    for name in wanted:
        entry = known.get(name)
        if entry is None:
            scores[name] = 5
            continue
        score, price = entry
        if score is None:
            scores[name] = 0
            continue
        if factor > 0:
            cost = 5.0 if price is None else 10.0 if dearest == cheapest else 10 * (dearest - price) / (dearest - cheapest)
            score = (1 - factor) * score + factor * cost
        scores[name] = int(round(score))
    return scores


def _capacity_score(pod_class: PodClass, kind: str) -> int:
    if kind not in (SPOT, ON_DEMAND):
        return 5
    if pod_class.critical:
        return 10 if kind == ON_DEMAND else 0
    if pod_class.interruptible:
        return 10 if kind == SPOT else 3
    return 5
