"""The per-review metrics are plain numbers in a custom collector; Prometheus must not see
a difference from prometheus_client's own Counter and Histogram fed the same reviews."""
from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

from webhook.server.metrics import DURATION_BUCKETS, PREFIX, Metrics

Review = tuple[str, str, str, float, list[str], list[str], list[str]]

names = st.sampled_from(["ssd", "spot", "zone-a", "gpu"])
reviews = st.tuples(
    st.sampled_from(["Deployment", "StatefulSet", "other", ""]),
    st.sampled_from(["CREATE", "UPDATE", ""]),
    st.sampled_from(["patched", "unchanged", "invalid"]),
    st.one_of(st.sampled_from(DURATION_BUCKETS), st.floats(min_value=0, max_value=60)),
    st.lists(names, max_size=2, unique=True),
    st.lists(names, max_size=1),
    st.lists(names, max_size=1),
)


def reference(observed: list[Review]) -> bytes:
    """The exposition prometheus_client's stock collectors give for the same reviews."""
    r = CollectorRegistry()
    requests = Counter(f"{PREFIX}_admission_requests", "Admission reviews answered, by object kind, operation and result.",
                       ["kind", "operation", "result"], registry=r)
    duration = Histogram(f"{PREFIX}_admission_duration_seconds", "Time from reading a review to answering it.",
                         buckets=DURATION_BUCKETS, registry=r)
    applied = Counter(f"{PREFIX}_policy_applied", "Objects a policy changed (enforcement: patch).", ["policy"], registry=r)
    audited = Counter(f"{PREFIX}_policy_audited", "Objects an audit-mode policy would have changed.", ["policy"], registry=r)
    errors = Counter(f"{PREFIX}_policy_errors",
                     "Objects a policy could not be applied to (left out for that object, SPEC 3.2).", ["policy"], registry=r)
    for kind, operation, result, seconds, applied_names, audited_names, failed_names in observed:
        requests.labels(kind, operation, result).inc()
        duration.observe(seconds)
        for counter, policies in ((applied, applied_names), (audited, audited_names), (errors, failed_names)):
            for name in policies:
                counter.labels(name).inc()
    return generate_latest(r)


def review_families(text: bytes) -> list[str]:
    """The exposition's lines of the per-review families, with creation times blanked."""
    lines = [re.sub(r"(_created(\{.*\})?) \S+$", r"\1 <time>", line) for line in text.decode().splitlines()]
    return sorted(line for line in lines if "admission_" in line or "policy_applied" in line
                  or "policy_audited" in line or "policy_errors" in line)


@settings(max_examples=60, deadline=None)
@given(st.lists(reviews, max_size=12))
def test_the_exposition_is_what_prometheus_clients_own_collectors_give(observed: list[Review]) -> None:
    metrics = Metrics()
    for kind, operation, result, seconds, applied, audited, failed in observed:
        metrics.observe_review(kind=kind, operation=operation, result=result, seconds=seconds,
                               applied=applied, audited=audited, failed=failed)
    assert review_families(metrics.render()) == review_families(reference(observed))


def test_a_duration_equal_to_a_bucket_bound_is_counted_in_that_bucket() -> None:
    metrics = Metrics()
    metrics.observe_review(kind="Deployment", operation="CREATE", result="patched", seconds=0.001)
    sample = metrics.registry.get_sample_value
    name = f"{PREFIX}_admission_duration_seconds_bucket"
    assert sample(name, {"le": "0.0005"}) == 0
    assert sample(name, {"le": "0.001"}) == 1
    assert sample(name, {"le": "+Inf"}) == 1


def test_an_unobserved_histogram_still_exports_zero_buckets_count_and_sum() -> None:
    metrics = Metrics()
    sample = metrics.registry.get_sample_value
    assert sample(f"{PREFIX}_admission_duration_seconds_bucket", {"le": "+Inf"}) == 0
    assert sample(f"{PREFIX}_admission_duration_seconds_count", {}) == 0
    assert sample(f"{PREFIX}_admission_duration_seconds_sum", {}) == 0
    assert sample(f"{PREFIX}_admission_requests_total", {"kind": "Deployment", "operation": "CREATE",
                                                         "result": "patched"}) is None


def test_the_openmetrics_exposition_renders_the_counters_and_the_histogram_with_their_created_times() -> None:
    metrics = Metrics()
    metrics.observe_review(kind="Deployment", operation="CREATE", result="patched", seconds=0.002, applied=["ssd"])
    text = openmetrics(metrics.registry).decode()
    assert f'{PREFIX}_admission_requests_total{{kind="Deployment",operation="CREATE",result="patched"}} 1.0' in text
    assert f'{PREFIX}_admission_requests_created{{kind="Deployment",operation="CREATE",result="patched"}}' in text
    assert f"{PREFIX}_admission_duration_seconds_created " in text
    assert f'{PREFIX}_policy_applied_total{{policy="ssd"}} 1.0' in text
    assert text.endswith("# EOF\n")


def test_two_servers_in_one_process_keep_their_own_counts() -> None:
    first, second = Metrics(), Metrics()
    first.observe_review(kind="Deployment", operation="CREATE", result="patched", seconds=0.001)
    labels = {"kind": "Deployment", "operation": "CREATE", "result": "patched"}
    assert first.registry.get_sample_value(f"{PREFIX}_admission_requests_total", labels) == 1
    assert second.registry.get_sample_value(f"{PREFIX}_admission_requests_total", labels) is None
