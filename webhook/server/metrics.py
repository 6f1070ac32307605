"""Prometheus metrics of the admission server (SPEC 4.3).

Each server owns a ``Metrics`` with its own registry, so two servers in one process (tests,
the benchmark) never share or double-register collectors.

The per-review series are plain numbers in a custom collector (``ReviewMetrics``) rather
than prometheus_client's ``Counter`` and ``Histogram``: those take a lock for every value
they change, and a review changes five or more. Reviews are counted on the event loop's
thread and ``/metrics`` is rendered on the same thread, so nothing here needs a lock.
"""
from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

PREFIX = "placement_webhook"
CONTENT_TYPE = CONTENT_TYPE_LATEST

# An admission costs well under a millisecond; the API server's default webhook timeout is
# 10 s. The buckets resolve the fast path and still show a stall before the timeout.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

# Result label of a review the server rejected before admission (HTTP 400/413/415).
RESULT_INVALID = "invalid"

_DURATION = f"{PREFIX}_admission_duration_seconds"
_DURATION_HELP = "Time from reading a review to answering it."


class _Series:
    """The series of one labelled counter: label values -> count, and when each began."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.counts: dict[tuple[str, ...], int] = {}
        self.created: dict[tuple[str, ...], float] = {}

    def inc(self, key: tuple[str, ...]) -> None:
        count = self.counts.get(key)
        if count is None:
            self.created[key] = time.time()
            count = 0
        self.counts[key] = count + 1

    def family(self) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, count in self.counts.items():
            family.add_metric(key, count, created=self.created[key])
        return family


class ReviewMetrics(Collector):
    """Reviews by kind, operation and result; their duration; what each policy did."""

    def __init__(self) -> None:
        self.requests = _Series(
            f"{PREFIX}_admission_requests",
            "Admission reviews answered, by object kind, operation and result.",
            ("kind", "operation", "result"),
        )
        self.applied = _Series(f"{PREFIX}_policy_applied", "Objects a policy changed (enforcement: patch).", ("policy",))
        self.audited = _Series(
            f"{PREFIX}_policy_audited", "Objects an audit-mode policy would have changed.", ("policy",)
        )
        self.policy_errors = _Series(
            f"{PREFIX}_policy_errors",
            "Objects a policy could not be applied to (left out for that object, SPEC 3.2).",
            ("policy",),
        )
        # Observations per bucket (not cumulative); the last one is +Inf.
        self.duration_counts = [0] * (len(DURATION_BUCKETS) + 1)
        self.duration_sum = 0.0
        self.duration_created = time.time()

    def observe(
        self,
        kind: str,
        operation: str,
        result: str,
        seconds: float,
        applied: Iterable[str],
        audited: Iterable[str],
        failed: Iterable[str],
    ) -> None:
        self.requests.inc((kind, operation, result))
        # Prometheus buckets are "less than or equal": a duration equal to a bound is in it.
        self.duration_counts[bisect_left(DURATION_BUCKETS, seconds)] += 1
        self.duration_sum += seconds
        for name in applied:
            self.applied.inc((name,))
        for name in audited:
            self.audited.inc((name,))
        for name in failed:
            self.policy_errors.inc((name,))

    def collect(self) -> Iterator[Metric]:
        yield self.requests.family()
        yield self._duration()
        yield self.applied.family()
        yield self.audited.family()
        yield self.policy_errors.family()

    def describe(self) -> Iterator[Metric]:
        """The families without samples: what the registry checks for name clashes."""
        for series in (self.requests, self.applied, self.audited, self.policy_errors):
            yield CounterMetricFamily(series.name, series.documentation, labels=series.labels)
        yield HistogramMetricFamily(_DURATION, _DURATION_HELP, labels=())

    def _duration(self) -> HistogramMetricFamily:
        cumulative, buckets = 0, []
        for bound, count in zip((*DURATION_BUCKETS, float("inf")), self.duration_counts):
            cumulative += count
            buckets.append((floatToGoString(bound), cumulative))
        family = HistogramMetricFamily(_DURATION, _DURATION_HELP, labels=())
        family.add_metric((), buckets, self.duration_sum)
        family.add_sample(f"{family.name}_created", {}, self.duration_created)  # as prometheus_client's Histogram has
        return family


class Metrics:
    """The collectors the server updates, registered in a private registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.reviews = ReviewMetrics()
        r.register(self.reviews)
        self.policies_loaded = Gauge(
            f"{PREFIX}_policies_loaded", "Policies in the set currently serving.", registry=r
        )
        self.policy_reloads = Counter(
            f"{PREFIX}_policy_reloads",
            "Policy set loads from disk, by result (success or failure).",
            ["result"],
            registry=r,
        )
        self.certificate_expiry = Gauge(
            f"{PREFIX}_certificate_expiry_timestamp_seconds",
            "Expiry (notAfter, Unix time) of the serving certificate in use.",
            registry=r,
        )
        self.certificate_reloads = Counter(
            f"{PREFIX}_certificate_reloads",
            "Serving certificate loads from disk, by result (success or failure).",
            ["result"],
            registry=r,
        )

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
        """Count one answered review and the policies that acted on it (event loop thread)."""
        self.reviews.observe(kind, operation, result, seconds, applied, audited, failed)

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)
