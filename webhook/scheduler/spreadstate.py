"""PodTopologySpread's filter and score state for one incoming pod (its PreFilter and PreScore
state, kept current as pods are bound): the constraints themselves are parsed in ``spread``."""
from __future__ import annotations

import math
from collections.abc import Sequence

from webhook.scheduler.labels import Selector
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.plan import PodPlan
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.spread import HOSTNAME, PLUGIN, Constraint
from webhook.scheduler.status import UNRESOLVABLE, UNSCHEDULABLE, Failure, Reason
from webhook.scheduler.taints import find_untolerated


def counts_node(c: Constraint, plan: PodPlan, node: NodeInfo) -> bool:
    """``matchNodeInclusionPolicies``: does this node's domain count for the constraint."""
    if c.node_affinity_policy == "Honor" and not plan.required.matches(node.labels, node.name):
        return False
    return not (c.node_taints_policy == "Honor" and find_untolerated(node.taints, plan.tolerations))


def _has_keys(node: NodeInfo, constraints: Sequence[Constraint]) -> bool:
    """``nodeLabelsMatchSpreadConstraints``: the node has every constraint's topology key."""
    return all(c.topology_key in node.labels for c in constraints)


def count_matching(pods: Sequence[PodInfo], selector: Selector, namespace: str) -> int:
    """``countPodsMatchSelector``: an empty selector counts nothing; terminating pods and pods
    of other namespaces are skipped."""
    if selector.empty:
        return 0
    return sum(1 for p in pods if not p.terminating and p.namespace == namespace and selector.matches(p.labels))


def count_on_node(node: NodeInfo, selector: Selector, namespace: str) -> int:
    """``count_matching`` over the node's pods, looking only at those of ``namespace``."""
    return count_matching(node.in_namespace(namespace), selector, namespace) if not selector.empty else 0


class SpreadFilterState:
    """``preFilterState``: per DoNotSchedule constraint, matching pods per topology value over
    the nodes that count (have every key, pass the inclusion policies)."""

    def __init__(self, plan: PodPlan, nodes: Sequence[NodeInfo]) -> None:
        self.plan = plan
        self.constraints = plan.hard_spread
        self.self_match = tuple(c.selector.matches(plan.labels) for c in self.constraints)
        self.eligible: dict[str, tuple[bool, ...]] = {}
        self.counts: list[dict[str, int]] = [{} for _ in self.constraints]
        self._mins: list[int] | None = None
        # Verdicts per constraint and topology value: every node of a domain gets the same one.
        self._verdicts: list[dict[str, Failure | None]] = [{} for _ in self.constraints]
        self._missing = tuple(Failure(PLUGIN, UNRESOLVABLE, (Reason.SPREAD_LABEL,), (f"node has no label {c.topology_key}",))
                              for c in self.constraints)
        if self.constraints:
            for node in nodes:
                self._build(node)

    def _build(self, node: NodeInfo) -> None:
        if not _has_keys(node, self.constraints):
            return
        flags = tuple(counts_node(c, self.plan, node) for c in self.constraints)
        self.eligible[node.name] = flags
        for i, c in enumerate(self.constraints):
            if flags[i]:
                value = node.labels[c.topology_key]
                # `+= count` creates the domain even with 0 pods: an empty domain is a domain.
                self.counts[i][value] = self.counts[i].get(value, 0) + count_on_node(
                    node, c.selector, self.plan.namespace)

    def clone(self) -> SpreadFilterState:
        clone = object.__new__(SpreadFilterState)
        clone.__dict__.update(self.__dict__)
        clone.counts = [dict(c) for c in self.counts]
        clone._mins = None
        clone._verdicts = [{} for _ in self.constraints]
        return clone

    def update(self, pod: PodInfo, node: NodeInfo, sign: int) -> None:
        """``updateWithPod`` (AddPod/RemovePod): unlike the PreFilter count it does not skip
        terminating pods, nor does an empty selector match nothing - both as upstream."""
        flags = self.eligible.get(node.name)
        if flags is None or pod.namespace != self.plan.namespace:
            return
        for i, c in enumerate(self.constraints):
            if flags[i] and c.selector.matches(pod.labels):
                value = node.labels[c.topology_key]
                self.counts[i][value] = self.counts[i].get(value, 0) + sign
                self._mins = None
                self._verdicts = [{} for _ in self.constraints]

    def min_match(self, i: int) -> int:
        """``preFilterState.minMatchNum``: the global minimum over the eligible domains, or 0
        while there are fewer domains than minDomains."""
        if self._mins is None:
            self._mins = [min(c.values()) if c else 0 for c in self.counts]
        if len(self.counts[i]) < self.constraints[i].min_domains:
            return 0
        return self._mins[i]

    def filter(self, node: NodeInfo) -> Failure | None:
        """``PodTopologySpread.Filter``: matching pods in the node's domain, plus one if the
        pod matches its own selector, minus the global minimum, may not exceed maxSkew."""
        labels = node.labels
        for i, c in enumerate(self.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                return self._missing[i]
            verdicts = self._verdicts[i]
            if value in verdicts:
                verdict = verdicts[value]
            else:
                verdict = verdicts[value] = self._judge(i, value)
            if verdict is not None:
                return verdict
        return None

    def _judge(self, i: int, value: str) -> Failure | None:
        c = self.constraints[i]
        matching = self.counts[i].get(value, 0)
        skew = matching + self.self_match[i] - self.min_match(i)
        if skew <= c.max_skew:
            return None
        why = (f"{c.topology_key}={value}: {matching} matching pod(s) + {int(self.self_match[i])} - global minimum "
               f"{self.min_match(i)} over {len(self.counts[i])} domain(s) = skew {skew} > maxSkew {c.max_skew}")
        return Failure(PLUGIN, UNSCHEDULABLE, (Reason.SPREAD,), (why,))


def go_round(x: float) -> int:
    """Go's ``math.Round``: half away from zero (Python's ``round`` goes to even)."""
    whole = math.trunc(x)
    return int(whole + math.copysign(1, x)) if abs(x - whole) >= 0.5 else int(whole)


class SpreadScoreState:
    """``preScoreState``: per ScheduleAnyway constraint, matching pods per topology value over
    all nodes that count; hostname constraints count each node's own pods at Score time."""

    def __init__(self, plan: PodPlan, nodes: Sequence[NodeInfo]) -> None:
        self.plan = plan
        self.constraints = plan.soft_spread
        # Only the system defaults let nodes without every key be scored (hostname spreading
        # on nodes with no zone label).
        self.require_all = not plan.system_spread
        self.eligible: dict[str, tuple[bool, ...]] = {}
        self.counts: list[dict[str, int]] = [{} for _ in self.constraints]
        self._host_counts: dict[str, tuple[NodeInfo, tuple[int, ...]]] = {}
        if self.constraints:
            for node in nodes:
                self._build(node)

    def _build(self, node: NodeInfo) -> None:
        if self.require_all and not _has_keys(node, self.constraints):
            return
        flags = tuple(counts_node(c, self.plan, node) for c in self.constraints)
        self.eligible[node.name] = flags
        for i, c in enumerate(self.constraints):
            if flags[i] and c.topology_key != HOSTNAME:
                # A node without the key counts under "" (Go's zero value) when keys are optional.
                value = node.labels.get(c.topology_key, "")
                self.counts[i][value] = self.counts[i].get(value, 0) + count_on_node(
                    node, c.selector, self.plan.namespace)

    def update(self, pod: PodInfo, node: NodeInfo, sign: int) -> None:
        """Keep the counts as a fresh PreScore would find them after ``pod`` joined ``node``."""
        flags = self.eligible.get(node.name)
        if flags is None or pod.terminating or pod.namespace != self.plan.namespace:
            return
        for i, c in enumerate(self.constraints):
            if flags[i] and c.topology_key != HOSTNAME and not c.selector.empty and c.selector.matches(pod.labels):
                value = node.labels.get(c.topology_key, "")
                self.counts[i][value] = self.counts[i].get(value, 0) + sign

    def _host_count(self, node: NodeInfo) -> tuple[int, ...]:
        cached = self._host_counts.get(node.name)
        if cached is None or cached[0] is not node:
            counts = tuple(count_on_node(node, c.selector, self.plan.namespace) if c.topology_key == HOSTNAME
                           else 0 for c in self.constraints)
            cached = self._host_counts[node.name] = (node, counts)
        return cached[1]

    def scores(self, feasible: Sequence[NodeInfo]) -> tuple[list[int], list[int]]:
        """Raw (``Score``) and normalized (``NormalizeScore``) scores of the feasible nodes."""
        if not self.constraints:
            return [0] * len(feasible), [0] * len(feasible)  # PreScore returned Skip
        ignored = [self.require_all and not _has_keys(n, self.constraints) for n in feasible]
        weights = self._weights(feasible, ignored)
        raw = [0 if skip else self._raw(n, weights) for n, skip in zip(feasible, ignored, strict=True)]
        kept = [s for s, skip in zip(raw, ignored, strict=True) if not skip]
        low, high = (min(kept), max(kept)) if kept else (0, 0)
        normalized = [0 if skip else 100 if high == 0 else 100 * (high + low - s) // high
                      for s, skip in zip(raw, ignored, strict=True)]
        return raw, normalized

    def _weights(self, feasible: Sequence[NodeInfo], ignored: Sequence[bool]) -> list[float]:
        """``topologyNormalizingWeight(size)``: log(size + 2), size being the number of topology
        values among the scored nodes (nodes, for hostname)."""
        scored = [n for n, skip in zip(feasible, ignored, strict=True) if not skip]
        sizes = [len(scored) if c.topology_key == HOSTNAME else len({n.labels.get(c.topology_key, "") for n in scored})
                 for c in self.constraints]
        return [math.log(size + 2) for size in sizes]

    def _raw(self, node: NodeInfo, weights: Sequence[float]) -> int:
        score = 0.0
        host = self._host_count(node)
        for i, c in enumerate(self.constraints):
            value = node.labels.get(c.topology_key)
            if value is None:
                continue
            count = host[i] if c.topology_key == HOSTNAME else self.counts[i].get(value, 0)
            # scoreForCount: cnt * weight + (maxSkew - 1) waters down differences within maxSkew.
            score += count * weights[i] + (c.max_skew - 1)
        return go_round(score)
