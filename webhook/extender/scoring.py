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
from webhook.spot.nodes import ON_DEMAND, SPOT, Detector, PodClass, capacity, pool

__all__ = ["FilterOutcome", "History", "filter_nodes", "prioritize"]

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
        """Record that ``node`` (a spot node) was seen about to be reclaimed."""
        now = self.clock() if now is None else now
        self._expire(now)
        name = str((node.get("metadata") or {}).get("name") or "")
        if name in self._seen or capacity(node, self.config) != SPOT:
            return
        self._seen[name] = now
        self._events.append((now, pool(node, self.config), name))

    def count(self, node_pool: tuple[str, ...], now: float | None = None) -> int:
        self._expire(self.clock() if now is None else now)
        return sum(1 for _, p, _ in self._events if p == node_pool)

    def _expire(self, now: float) -> None:
        window = self.config.interruptions.window_seconds
        while self._events and now - self._events[0][0] > window:
            _, _, name = self._events.popleft()
            self._seen.pop(name, None)


def filter_nodes(pod_class: PodClass, names: Iterable[str], nodes: Mapping[str, Mapping[str, Any]],
                 detector: Detector, config: SpotConfig, now: float, history: History | None = None) -> FilterOutcome:
    """``names`` filtered; ``nodes`` holds the Node objects known (a name without one passes)."""
    out = FilterOutcome([])
    for name in names:
        node = nodes.get(name)
        if node is None:
            out.passed.append(name)
            continue
        reason = detector.reclaim(node, now)
        if reason is not None:
            out.unresolvable[name] = f"node is about to be reclaimed ({reason})"
            out.reasons["reclaim"] = out.reasons.get("reclaim", 0) + 1
            if history is not None:
                history.saw(node, now)
            continue
        if pod_class.critical and config.critical.require_on_demand and capacity(node, config) == SPOT:
            out.unresolvable[name] = f"a critical pod ({pod_class.why}) needs on-demand capacity"
            out.reasons["critical-on-spot"] = out.reasons.get("critical-on-spot", 0) + 1
            continue
        out.passed.append(name)
    return out


def prioritize(pod_class: PodClass, names: Iterable[str], nodes: Mapping[str, Mapping[str, Any]],
               detector: Detector, config: SpotConfig, now: float, history: History | None = None) -> dict[str, int]:
    """A score 0..10 for each of ``names`` (an unknown node: the neutral 5)."""
    wanted = list(names)
    prices = {name: _price(nodes[name], config) for name in wanted if name in nodes}
    known = [p for p in prices.values() if p is not None]
    cheapest, dearest = (min(known), max(known)) if known else (0.0, 0.0)
    factor = float(config.cost.factor)
    scores: dict[str, int] = {}
    for name in wanted:
        node = nodes.get(name)
        if node is None:
            scores[name] = 5
            continue
        if detector.reclaim(node, now) is not None:
            scores[name] = 0
            continue
        kind = capacity(node, config)
        base = float(_capacity_score(pod_class, kind))
        if kind == SPOT and history is not None:
            base = max(0.0, base - config.interruptions.penalty * history.count(pool(node, config), now))
        if factor > 0:
            price = prices.get(name)
            cost = 5.0 if price is None else 10.0 if dearest == cheapest else 10 * (dearest - price) / (dearest - cheapest)
            base = (1 - factor) * base + factor * cost
        scores[name] = int(round(base))
    return scores


def _capacity_score(pod_class: PodClass, kind: str) -> int:
    if kind not in (SPOT, ON_DEMAND):
        return 5
    if pod_class.critical:
        return 10 if kind == ON_DEMAND else 0
    if pod_class.interruptible:
        return 10 if kind == SPOT else 3
    return 5


def _price(node: Mapping[str, Any], config: SpotConfig) -> float | None:
    labels = (node.get("metadata") or {}).get("labels") or {}
    kind = capacity(node, config)
    instance = labels.get(INSTANCE_TYPE)
    if instance is None or kind not in (SPOT, ON_DEMAND):
        return None
    return config.price(str(instance), kind)
