"""Prometheus metrics of the node labeler, in a registry of its own."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from webhook.cluster.metrics import ClusterViewCollector

if TYPE_CHECKING:
    from webhook.labeler.writes import PassReport

__all__ = ["LabelerMetrics"]

PREFIX = "placement_webhook_labeler"
# A pass over 5,000 nodes computes in about a second; writes are rate-limited on top.
PASS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class LabelerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.writes = Counter(f"{PREFIX}_writes", "Nodes whose labels were written.", registry=r)
        self.unchanged = Counter(f"{PREFIX}_unchanged", "Nodes whose labels were already right.", registry=r)
        self.skipped = Counter(f"{PREFIX}_skipped", "Nodes left unlabelled in a pass (no allocatable, an "
                               "unreadable pod quantity).", registry=r)
        self.errors = Counter(f"{PREFIX}_errors", "Failed label writes and passes.", ["kind"], registry=r)
        self.metrics_fallbacks = Counter(f"{PREFIX}_metrics_fallbacks", "Passes that counted requests because "
                                         "metrics.k8s.io did not answer.", registry=r)
        self.nodes = Gauge(f"{PREFIX}_nodes", "Nodes in the cluster view.", registry=r)
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this replica holds the lease (or runs without one).",
                            registry=r)
        self.duration = Histogram(f"{PREFIX}_pass_duration_seconds", "One pass: compute and write.",
                                  buckets=PASS_BUCKETS, registry=r)

    def observe(self, report: PassReport, *, total_nodes: int) -> None:
        self.writes.inc(report.written)
        self.unchanged.inc(report.unchanged)
        self.skipped.inc(len(report.skipped))
        if report.failed:
            self.errors.labels("write").inc(len(report.failed))
        self.nodes.set(total_nodes)
        self.duration.observe(report.seconds)

    def watch_cluster(self, status: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        self.registry.register(ClusterViewCollector(status))

    def render(self) -> bytes:
        return generate_latest(self.registry)
