"""Prometheus metrics of the admission server.

Each server owns a ``Metrics`` with its own registry, so two servers in one process (tests,
the benchmark) never share or double-register collectors.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
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
        self.requests = self._counter(
            "admission_requests", "Admission reviews answered, by object kind, operation and result.",
            "kind", "operation", "result")
        self.duration = Histogram(f"{PREFIX}_admission_duration_seconds", "Time from reading a review to answering it.",
                                  buckets=DURATION_BUCKETS, registry=self.registry)
        self.applied = self._counter("policy_applied", "Objects a policy changed (enforcement: patch).", "policy")
        self.audited = self._counter("policy_audited", "Objects an audit-mode policy would have changed.", "policy")
        self.policy_errors = self._counter(
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
        # ``labels()`` validates and locks on every call, about a third of a review's metrics
        # cost: each label tuple's child is looked up once and kept (no child is ever removed).
        self._children: dict[tuple[Counter, tuple[str, ...]], Counter] = {}

    def _counter(self, name: str, text: str, *labels: str) -> Counter:
        """A counter named ``placement_webhook_<name>`` in this server's registry."""
        return Counter(f"{PREFIX}_{name}", text, labels, registry=self.registry)

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
        self._child(self.requests, (kind, operation, result)).inc()
        self.duration.observe(seconds)
        for name in applied:
            self._child(self.applied, (name,)).inc()
        for name in audited:
            self._child(self.audited, (name,)).inc()
        for name in failed:
            self._child(self.policy_errors, (name,)).inc()

    def _child(self, counter: Counter, values: tuple[str, ...]) -> Counter:
        """``counter.labels(*values)``, looked up once per label tuple."""
        key = (counter, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = counter.labels(*values)
        return child

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
