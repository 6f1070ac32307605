"""Prometheus metrics of the admission server.

Each server owns a ``Metrics`` with its own registry, so two servers in one process (tests,
the benchmark) never share or double-register collectors.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from webhook.cluster.metrics import ClusterViewCollector

PREFIX = "placement_webhook"
CONTENT_TYPE = CONTENT_TYPE_LATEST

# An admission costs well under a millisecond; the API server's default webhook timeout is
# 10 s. The buckets resolve the fast path and still show a stall before the timeout.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

# A background audit reads the whole cluster: seconds on a small one, minutes on a large one.
AUDIT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

# Result label of a review the server rejected before admission (HTTP 400/413/415).
RESULT_INVALID = "invalid"


class Metrics:
    """The collectors the server updates, registered in a private registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.requests = self._counts(
            "admission_requests", "Admission reviews answered, by object kind, operation and result.",
            "kind", "operation", "result")
        self.duration = Histogram(f"{PREFIX}_admission_duration_seconds", "Time from reading a review to answering it.",
                                  buckets=DURATION_BUCKETS, registry=self.registry)
        self.applied = self._counts("policy_applied", "Objects a policy changed (enforcement: patch).", "policy")
        self.audited = self._counts("policy_audited", "Objects an audit-mode policy would have changed.", "policy")
        self.policy_errors = self._counts(
            "policy_errors", "Objects a policy could not be applied to (left out for that object).", "policy")
        self.policies_loaded = self._gauge("policies_loaded", "Policies in the set currently serving.")
        self.policies_left_out = self._gauge(
            "policies_left_out",
            "PlacementPolicy objects not in force: refused by the loader, or a name a policy file defines too.")
        self.policy_status_writes = self._counter(
            "policy_status_writes",
            "Writes of PlacementPolicy status by this replica (while it holds the Lease), by result.", "result")
        self.policy_reloads = self._counter(
            "policy_reloads", "Policy set loads from disk, by result (success or failure).", "result")
        self.certificate_expiry = self._gauge(
            "certificate_expiry_timestamp_seconds", "Expiry (notAfter, Unix time) of the serving certificate in use.")
        self.certificate_reloads = self._counter(
            "certificate_reloads", "Serving certificate loads from disk, by result (success or failure).", "result")
        # The background audit (webhook/audit/background.py): its passes, and what the last one found.
        self.audit_runs = self._counter("audit_runs", "Background audit passes, by result (success, unread, "
                                        "failed, no_policies).", "result")
        self.audit_duration = Histogram(f"{PREFIX}_audit_duration_seconds", "Time of a background audit pass: "
                                        "read, audit, report writes.", buckets=AUDIT_BUCKETS, registry=self.registry)
        self.audit_out_of_policy = self._gauge(
            "audit_out_of_policy", "Workloads failing a policy in the last background audit.", "policy", "namespace")
        self.audit_rollout_risks = self._gauge(
            "audit_rollout_risks", "Workloads whose next rolling update would not finish, in the last audit.",
            "namespace")
        self.audit_report_errors = self._counter(
            "audit_report_errors", "PolicyReport requests the API server refused, by reason.", "reason")

    def _counter(self, name: str, text: str, *labels: str) -> Counter:
        """A counter named ``placement_webhook_<name>`` in this server's registry."""
        return Counter(f"{PREFIX}_{name}", text, labels, registry=self.registry)

    def _counts(self, name: str, text: str, *labels: str) -> Counts:
        """Plain counts exposed as the counter ``placement_webhook_<name>`` of this server's registry."""
        counts = Counts(f"{PREFIX}_{name}", text, labels)
        self.registry.register(counts)
        return counts

    def _gauge(self, name: str, text: str, *labels: str) -> Gauge:
        """A gauge named ``placement_webhook_<name>`` in this server's registry."""
        return Gauge(f"{PREFIX}_{name}", text, labels, registry=self.registry)

    def observe_review(
        self,
        *,
        kind: str,
        operation: str,
        result: str,
        seconds: float,
        applied: Iterable[str] = (),
        audited: Iterable[str] = (),
        failed: Iterable[str] = (),
    ) -> None:
        """Count one answered review and the policies that acted on it."""
        self.requests.add((kind, operation, result))
        self.duration.observe(seconds)
        for name in applied:
            self.applied.add((name,))
        for name in audited:
            self.audited.add((name,))
        for name in failed:
            self.policy_errors.add((name,))

    def observe_audit(self, *, result: str, seconds: float, out_of_policy: Mapping[tuple[str, str], int],
                      rollout_risks: Mapping[str, int]) -> None:
        """Count one audit pass; after a successful one, its figures replace the last one's (on the
        event loop, between two scrapes: a scrape never sees them half replaced)."""
        self.audit_runs.labels(result).inc()
        self.audit_duration.observe(seconds)
        if result != "success":
            return
        self.audit_out_of_policy.clear()
        for (policy, namespace), count in out_of_policy.items():
            self.audit_out_of_policy.labels(policy, namespace).set(count)
        self.audit_rollout_risks.clear()
        for namespace, count in rollout_risks.items():
            self.audit_rollout_risks.labels(namespace).set(count)

    def watch_cluster(self, status: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        """Export the cluster view's state per resource, read from ``status`` at scrape time."""
        self.registry.register(ClusterViewCollector(status))

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)


class Counts:
    """A labelled counter counted in a plain dict, for the counters every review adds to.

    A prometheus_client ``Counter`` child checks and takes a lock on every ``inc``: with a
    count per policy that acted, that is most of a review's metrics cost. Reviews are counted
    on the event loop, and the registry is read there too (``render``), so nothing else
    writes or reads meanwhile. Scraped, the family is the one a ``Counter`` exposes: per label
    set its ``_total`` and the time it was first counted as its ``_created``.
    """

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self._counts: dict[tuple[str, ...], int] = {}
        self._created: dict[tuple[str, ...], float] = {}

    def add(self, values: tuple[str, ...]) -> None:
        """One more for the label set ``values`` (in the order of ``labels``)."""
        count = self._counts.get(values)
        if count is None:
            self._created[values] = time.time()
            count = 0
        self._counts[values] = count + 1

    def describe(self) -> list[CounterMetricFamily]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labels)]

    def collect(self) -> list[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for values, count in self._counts.items():
            family.add_metric(values, float(count), created=self._created[values])
        return [family]
