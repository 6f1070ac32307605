"""The rebalancer's Prometheus metrics: what each pass found and decided, what the Eviction API
answered, the points moved, how often the scheduler put a replacement somewhere other than the
simulation said, and how many interruptible pods run on spot capacity."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest

from webhook.cluster.metrics import ClusterViewCollector
from webhook.rebalance.model import Decision, Verdict
from webhook.spot.controller import RESULTS

__all__ = ["PASS_OUTCOMES", "PLACEMENTS", "RESULTS", "RebalanceMetrics"]

PREFIX = "placement_webhook_rebalance"
PASS_OUTCOMES = ("done", "not-synced", "failed")
# Where a moved pod's replacement was bound, against the simulation's target.
PLACEMENTS = ("as-simulated", "mispredicted", "not-seen")


class RebalanceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.passes = Counter(f"{PREFIX}_passes", "Passes, by outcome (done, not-synced: the view was not "
                              "synced, so nothing was decided; failed).", ["outcome"], registry=r)
        self.candidates = Gauge(f"{PREFIX}_candidates", "The last pass's candidates, by verdict (move, stay, "
                                "skip).", ["verdict"], registry=r)
        self.evictions = Counter(f"{PREFIX}_evictions", "Evictions asked, by the API server's answer (evicted, "
                                 "gone, blocked: a PodDisruptionBudget refused, failed, retry).", ["result"],
                                 registry=r)
        self.gain = Counter(f"{PREFIX}_gain_points", "Preference points the evicted pods were expected to gain, "
                            "summed.", registry=r)
        self.spot_share = Gauge(f"{PREFIX}_interruptible_on_spot_ratio", "Of the running interruptible pods, "
                                "the share on spot nodes (1 when there are none).", registry=r)
        self.replacements = Counter(f"{PREFIX}_replacements", "Replacements of moved pods, by where they were "
                                    "bound (as-simulated, mispredicted, not-seen in time).", ["outcome"],
                                    registry=r)
        self.mispredictions = Counter(f"{PREFIX}_mispredictions", "Replacements the scheduler bound to a node "
                                      "the simulation did not choose.", registry=r)
        self.backed_off = Gauge(f"{PREFIX}_owners_backed_off", "Owners left alone after a misprediction, now.",
                                registry=r)
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this replica acts.", registry=r)
        self.errors = Counter(f"{PREFIX}_errors", "Failed writes (events).", ["kind"], registry=r)
        for outcome in PASS_OUTCOMES:
            self.passes.labels(outcome)
        for result in RESULTS:
            self.evictions.labels(result)
        for placed in PLACEMENTS:
            self.replacements.labels(placed)

    def decided(self, decisions: Iterable[Decision]) -> None:
        """The last pass's verdicts, every verdict present (zero when none)."""
        counts = dict.fromkeys(Verdict, 0)
        for decision in decisions:
            counts[decision.verdict] += 1
        for verdict, count in counts.items():
            self.candidates.labels(verdict.value).set(count)

    def watch_cluster(self, status: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        self.registry.register(ClusterViewCollector(status))

    def render(self) -> bytes:
        return generate_latest(self.registry)
