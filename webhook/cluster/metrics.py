"""Prometheus collectors of the cluster view, shared by every command that runs one."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["ClusterViewCollector"]

PREFIX = "placement_webhook"


class ClusterViewCollector(Collector):
    """The cluster view per resource: synced (0/1), events, relists, seconds since last event."""

    def __init__(self, status: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "synced": GaugeMetricFamily(f"{PREFIX}_cluster_view_synced", "1 once the resource's first list completed.",
                                        labels=["resource"]),
            "events": CounterMetricFamily(f"{PREFIX}_cluster_view_events", "Watch events received.", labels=["resource"]),
            "relists": CounterMetricFamily(f"{PREFIX}_cluster_view_relists", "Lists after the first (410 Expired).",
                                           labels=["resource"]),
            "errors": CounterMetricFamily(f"{PREFIX}_cluster_view_errors", "Failed lists and watches.", labels=["resource"]),
            "age": GaugeMetricFamily(f"{PREFIX}_cluster_view_seconds_since_last_event",
                                     "Seconds since the API server last said anything about the resource.",
                                     labels=["resource"]),
        }
        for resource, state in sorted(self.status().items()):
            families["synced"].add_metric([resource], 1.0 if state.get("synced") else 0.0)
            families["events"].add_metric([resource], float(state.get("events") or 0))
            families["relists"].add_metric([resource], float(state.get("relists") or 0))
            families["errors"].add_metric([resource], float(state.get("errors") or 0))
            age = state.get("seconds_since_last_event")
            families["age"].add_metric([resource], float("nan") if age is None else float(age))
        yield from families.values()
