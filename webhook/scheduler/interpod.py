"""InterPodAffinity: the PreFilter/Filter state and the PreScore/Score state.

Sources (pkg/scheduler/framework/plugins/interpodaffinity): ``getExistingAntiAffinityCounts``,
``getIncomingAffinityAntiAffinityCounts``, ``preFilterState.updateWithPod``,
``satisfyPodAffinity``/``satisfyPodAntiAffinity``/``satisfyExistingPodsAntiAffinity`` and
``Filter`` (filtering.go); ``processExistingPod``, ``PreScore``, ``Score`` and
``NormalizeScore`` (scoring.go); ``mergeAffinityTermNamespacesIfNotEmpty`` (plugin.go).

Counts are kept as {topologyKey: {value: n}}; a node "has" a pair when its label under that
key has that value, which is what the plugin's topologyPair lookups amount to.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.podinfo import AffinityTerm, PodInfo, WeightedTerm
from webhook.scheduler.release import Release
from webhook.scheduler.status import UNRESOLVABLE, UNSCHEDULABLE, Failure, Reason

if TYPE_CHECKING:
    from webhook.scheduler.plan import PodPlan

__all__ = ["InterPodFilterState", "InterPodScoreState"]

PLUGIN = "InterPodAffinity"
Counts = dict[str, dict[str, int]]
_EMPTY: Mapping[str, str] = {}
_NO_COUNTS: Mapping[str, int] = {}


def _bump(counts: Counts, node: NodeInfo, key: str, delta: int) -> None:
    """``topologyToMatchedTermCount.update``: only nodes with the key count; zeros are dropped."""
    value = node.labels.get(key)
    if value is None:
        return
    inner = counts.setdefault(key, {})
    total = inner.get(value, 0) + delta
    if total:
        inner[value] = total
    else:
        inner.pop(value, None)
        if not inner:
            del counts[key]


def _matches_all(terms: Sequence[AffinityTerm], pod: PodInfo) -> bool:
    """``podMatchesAllAffinityTerms``: false for no terms; the incoming pod's terms have their
    namespace selector merged, so no namespace labels are needed."""
    return bool(terms) and all(t.matches(pod.namespace, pod.labels, _EMPTY) for t in terms)


class InterPodFilterState:
    """``preFilterState``: topology pairs of existing pods whose required anti-affinity the
    pod matches, and of existing pods matching the pod's required (anti-)affinity terms."""

    def __init__(self, plan: PodPlan, nodes: Sequence[NodeInfo], namespace_labels: Mapping[str, Mapping[str, str]],
                 release: Release | None = None) -> None:
        info = plan.info
        self.pod = info
        self.release = release  # whose words the statuses use
        self.ns_labels: Mapping[str, str] = namespace_labels.get(info.namespace) or _EMPTY
        self.affinity_terms = tuple(t.merged(namespace_labels) for t in info.required_affinity)
        self.anti_terms = tuple(t.merged(namespace_labels) for t in info.required_anti_affinity)
        self.existing: Counts = {}
        self.affinity: Counts = {}
        self.anti: Counts = {}
        self.self_match = _matches_all(self.affinity_terms, info)
        # Failures per (check, topology key, value), dropped whenever a count changes.
        self._verdicts: dict[tuple[int, str, str], Failure] = {}
        scan_all = bool(self.affinity_terms or self.anti_terms)
        for node in nodes:
            for pod in node.pods if scan_all else node.with_required_anti_affinity:
                self.update(pod, node, 1)

    def clone(self) -> InterPodFilterState:
        clone = object.__new__(InterPodFilterState)
        clone.__dict__.update(self.__dict__)
        for name in ("existing", "affinity", "anti"):
            setattr(clone, name, {k: dict(v) for k, v in getattr(self, name).items()})
        clone._verdicts = {}
        return clone

    @property
    def idle(self) -> bool:
        """PreFilter's Skip: no required terms and no existing pod's anti-affinity matches."""
        return not self.existing and not self.affinity_terms and not self.anti_terms

    def update(self, pod: PodInfo, node: NodeInfo, sign: int) -> None:
        """``preFilterState.updateWithPod`` (also how the PreFilter counts are built)."""
        if self._verdicts:
            self._verdicts = {}
        me = self.pod
        for term in pod.required_anti_affinity:
            if term.matches(me.namespace, me.labels, self.ns_labels):
                _bump(self.existing, node, term.topology_key, sign)
        if _matches_all(self.affinity_terms, pod):
            for term in self.affinity_terms:
                _bump(self.affinity, node, term.topology_key, sign)
        for term in self.anti_terms:
            if term.matches(pod.namespace, pod.labels, _EMPTY):
                _bump(self.anti, node, term.topology_key, sign)

    def filter(self, node: NodeInfo) -> Failure | None:
        """``InterPodAffinity.Filter``: the pod's affinity, then its anti-affinity, then the
        existing pods' anti-affinity; the first that fails is the status."""
        labels = node.labels
        if self.affinity_terms:
            failed = self._affinity(labels)
            if failed:
                return Failure(PLUGIN, UNRESOLVABLE, Reason.interpod(Reason.AFFINITY, self.release), (failed,))
        for term in self.anti_terms if self.anti else ():
            value = labels.get(term.topology_key)
            if value is not None and self.anti.get(term.topology_key, _NO_COUNTS).get(value, 0) > 0:
                return self._verdict(1, term.topology_key, value)
        for key, values in self.existing.items():
            value = labels.get(key)
            if value is not None and values.get(value, 0) > 0:
                return self._verdict(2, key, value)
        return None

    def _verdict(self, check: int, key: str, value: str) -> Failure:
        found = self._verdicts.get((check, key, value))
        if found is None:
            if check == 1:
                why = f"{self.anti[key][value]} pod(s) matching an anti-affinity term in {key}={value}"
                found = Failure(PLUGIN, UNSCHEDULABLE, Reason.interpod(Reason.ANTI_AFFINITY, self.release), (why,))
            else:
                why = f"{self.existing[key][value]} existing pod(s) in {key}={value} have anti-affinity against this pod"
                found = Failure(PLUGIN, UNSCHEDULABLE, Reason.interpod(Reason.EXISTING_ANTI_AFFINITY, self.release),
                                (why,))
            self._verdicts[(check, key, value)] = found
        return found

    def _affinity(self, labels: Mapping[str, str]) -> str | None:
        """``satisfyPodAffinity``; the reason it fails, or None."""
        missing = None
        for term in self.affinity_terms:
            value = labels.get(term.topology_key)
            if value is None:
                return f"node has no label {term.topology_key}"  # all topology labels must exist
            if self.affinity.get(term.topology_key, _NO_COUNTS).get(value, 0) <= 0:
                missing = missing or f"no pod matching the affinity terms in {term.topology_key}={value}"
        # The first pod of a group with affinity to itself: when no pod anywhere matches the
        # terms and the pod matches them itself, any node with the topology labels will do.
        if missing and not (not self.affinity and self.self_match):
            return missing
        return None


class InterPodScoreState:
    """``preScoreState.topologyScore``: weights summed per topology pair over the pod's
    preferred terms matched by existing pods, and the existing pods' required affinity (at
    hardPodAffinityWeight) and preferred terms the pod matches."""

    def __init__(self, plan: PodPlan, nodes: Sequence[NodeInfo], namespace_labels: Mapping[str, Mapping[str, str]],
                 hard_weight: int) -> None:
        info = plan.info
        self.pod = info
        self.hard_weight = hard_weight
        self.ns_labels: Mapping[str, str] = namespace_labels.get(info.namespace) or _EMPTY
        self.preferred: tuple[WeightedTerm, ...] = tuple(t.merged(namespace_labels) for t in info.preferred_affinity)
        self.preferred_anti: tuple[WeightedTerm, ...] = tuple(
            t.merged(namespace_labels) for t in info.preferred_anti_affinity)
        self.scores: Counts = {}
        # PreScore returns Skip when no node produced any term match: Score is then 0 everywhere
        # and NormalizeScore leaves it so. A match whose weights cancel out still counts.
        self.matches = 0
        # Without preferred terms of its own, only pods with affinity can contribute.
        everyone = bool(self.preferred or self.preferred_anti)
        for node in nodes:
            for pod in node.pods if everyone else node.with_affinity:
                self.update(pod, node, 1)

    def _add(self, node: NodeInfo, key: str, amount: int, sign: int) -> None:
        """``scoreMap.processTerm`` once a term matched: credit the node's pair, if it has one."""
        value = node.labels.get(key)
        if value is None:
            return
        inner = self.scores.setdefault(key, {})
        inner[value] = inner.get(value, 0) + sign * amount
        self.matches += sign

    def update(self, pod: PodInfo, node: NodeInfo, sign: int) -> None:
        """``processExistingPod`` for a pod joining (or, ``sign=-1``, leaving) ``node``."""
        if not node.labels:
            return
        me = self.pod
        for term in self.preferred:
            if term.matches(pod.namespace, pod.labels, _EMPTY):
                self._add(node, term.topology_key, term.weight, sign)
        for term in self.preferred_anti:
            if term.matches(pod.namespace, pod.labels, _EMPTY):
                self._add(node, term.topology_key, -term.weight, sign)
        if self.hard_weight > 0:
            for hard in pod.required_affinity:
                if hard.matches(me.namespace, me.labels, self.ns_labels):
                    self._add(node, hard.topology_key, self.hard_weight, sign)
        for term in pod.preferred_affinity:
            if term.matches(me.namespace, me.labels, self.ns_labels):
                self._add(node, term.topology_key, term.weight, sign)
        for term in pod.preferred_anti_affinity:
            if term.matches(me.namespace, me.labels, self.ns_labels):
                self._add(node, term.topology_key, -term.weight, sign)

    def raw(self, node: NodeInfo) -> int:
        """``Score``: the sum over the topology keys the node has of its value's weight."""
        labels = node.labels
        return sum(values.get(labels[key], 0) for key, values in self.scores.items() if key in labels)

    def scores_for(self, feasible: Sequence[NodeInfo]) -> tuple[list[int], list[int]]:
        """Raw and ``NormalizeScore``d scores: min-max scaled to 0..100 (truncated)."""
        if self.matches == 0 or not feasible:
            return [0] * len(feasible), [0] * len(feasible)
        raw = [self.raw(n) for n in feasible]
        low, high = min(raw), max(raw)
        spread = high - low
        return raw, [int(100 * ((s - low) / spread)) if spread > 0 else 0 for s in raw]
