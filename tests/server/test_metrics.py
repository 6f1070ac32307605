"""The server's Prometheus metrics: reviews by kind, operation and result, their duration,
and what each policy did."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


@settings(max_examples=60, deadline=None)
@given(st.lists(reviews, max_size=12))
def test_every_review_is_counted_by_its_labels_and_every_policy_by_what_it_did(observed: list[Review]) -> None:
    metrics = Metrics()
    for kind, operation, result, seconds, applied, audited, failed in observed:
        metrics.observe_review(kind=kind, operation=operation, result=result, seconds=seconds,
                               applied=applied, audited=audited, failed=failed)
    sample = metrics.registry.get_sample_value
    for labels in {(k, o, r) for k, o, r, *_ in observed}:
        expected = sum(1 for k, o, r, *_ in observed if (k, o, r) == labels)
        assert sample(f"{PREFIX}_admission_requests_total", dict(zip(("kind", "operation", "result"), labels))) == expected
    assert sample(f"{PREFIX}_admission_duration_seconds_count", {}) == len(observed)
    assert sample(f"{PREFIX}_admission_duration_seconds_sum", {}) == pytest.approx(sum(o[3] for o in observed))
    for family, position in (("policy_applied", 4), ("policy_audited", 5), ("policy_errors", 6)):
        for name in {n for o in observed for n in o[position]}:
            expected = sum(o[position].count(name) for o in observed)
            assert sample(f"{PREFIX}_{family}_total", {"policy": name}) == expected


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
