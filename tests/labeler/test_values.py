"""The labels of one node: usage rounded up, availability down, requests as the scheduler counts them."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.kube import selectors
from webhook.kube.nodes import parse_int64
from webhook.kube.resourcelabels import resource_required
from webhook.labeler.values import LABELS, PREFIX, Steps, compute

P = PREFIX


def node(cpu: str = "4", memory: str = "8Gi", storage: str = "100Gi", **extra: str) -> dict[str, Any]:
    return {"metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "ephemeral-storage": storage, "pods": "110",
                                       **extra}}}


def pod(cpu: str | None = None, memory: str | None = None, *, phase: str = "Running", init: dict[str, str] | None = None,
        overhead: dict[str, str] | None = None, **extended: str) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None} | extended
    spec: dict[str, Any] = {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": requests}}]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": init}}]
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": "p", "namespace": "x"}, "spec": spec, "status": {"phase": phase}}


def test_an_empty_node_is_all_available_and_unused() -> None:
    labels = compute(node(), []).labels
    assert labels == {P + "cpu-usage": "0", P + "memory-usage": "0", P + "storage-usage": "0",
                      P + "cpu-available": "4000", P + "memory-available": "8192", P + "storage-available": "102400",
                      P + "gpu-available": "0"}
    assert set(labels) == set(LABELS)


def test_usage_rounds_up_and_availability_down_to_their_steps() -> None:
    labels = compute(node(), [pod("1050m", "1000Mi")]).labels
    assert labels[P + "cpu-usage"] == "30"  # 26.25% -> 30
    assert labels[P + "cpu-available"] == "2900"  # 2950m -> 2900
    assert labels[P + "memory-usage"] == "15"  # 12.2% -> 15
    assert labels[P + "memory-available"] == "7168"  # 7192 MiB -> 7168 (steps of 256)


def test_init_containers_and_overhead_count_as_the_scheduler_counts_them() -> None:
    # max(sum of containers, largest init container) + overhead: max(500m, 2) + 250m = 2250m
    labels = compute(node(), [pod("500m", init={"cpu": "2"}, overhead={"cpu": "250m"})],
                     steps=Steps(cpu=1, usage=1)).labels
    assert labels[P + "cpu-available"] == "1750" and labels[P + "cpu-usage"] == "57"


def test_finished_pods_hold_nothing_and_terminating_ones_still_do() -> None:
    done = [pod("1", phase="Succeeded"), pod("1", phase="Failed")]
    assert compute(node(), done).labels[P + "cpu-available"] == "4000"
    terminating = pod("1")
    terminating["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    assert compute(node(), [terminating]).labels[P + "cpu-available"] == "3000"


def test_an_overcommitted_node_has_nothing_available_not_a_negative_amount() -> None:
    labels = compute(node(cpu="1"), [pod("3")]).labels
    assert labels[P + "cpu-available"] == "0" and labels[P + "cpu-usage"] == "300"


def test_gpus_are_counted_per_extended_resource_and_summed() -> None:
    labels = compute(node(**{"nvidia.com/gpu": "4", "amd.com/gpu": "1"}), [pod(**{"nvidia.com/gpu": "3"})]).labels
    assert labels[P + "gpu-available"] == "2"
    configured = compute(node(**{"example.com/tpu": "2"}), [], gpu_resources=("example.com/tpu",)).labels
    assert configured[P + "gpu-available"] == "2"


def test_a_resource_the_node_lacks_reads_full() -> None:
    bare = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2", "pods": "10"}}}
    labels = compute(bare, []).labels
    assert labels[P + "memory-usage"] == "100" and labels[P + "memory-available"] == "0"


def test_measured_usage_replaces_requests_in_the_usage_labels_only() -> None:
    labels = compute(node(), [pod("2")], usage={"cpu": "400m", "memory": "4Gi"}).labels
    assert labels[P + "cpu-usage"] == "10" and labels[P + "memory-usage"] == "50"
    assert labels[P + "cpu-available"] == "2000"  # the scheduler places by requests


def test_a_node_without_allocatable_gets_no_labels_and_says_why() -> None:
    result = compute({"metadata": {"name": "new"}, "status": {}}, [])
    assert result.labels == {} and "no status.allocatable" in result.problem


def test_an_unparseable_quantity_leaves_the_node_unlabelled_naming_the_pod() -> None:
    result = compute(node(), [pod("lots")])
    assert result.labels == {} and "pod x/p" in result.problem


@pytest.mark.parametrize("field", ["usage", "cpu", "memory", "storage", "gpu"])
def test_a_step_below_one_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Steps(**{field: 0})


@settings(max_examples=200, deadline=None)
@given(alloc_m=st.integers(1, 64_000), used=st.lists(st.integers(0, 8_000), max_size=8), step=st.integers(1, 1000),
       want_m=st.integers(1, 64_000))
def test_the_available_label_never_promises_more_than_there_is(alloc_m: int, used: list[int], step: int,
                                                               want_m: int) -> None:
    labels = compute(node(cpu=f"{alloc_m}m"), [pod(f"{u}m") for u in used], steps=Steps(cpu=step)).labels
    free = alloc_m - sum(used)
    written = int(labels[P + "cpu-available"])
    assert 0 <= written <= max(free, 0) and written % step == 0
    # requiredResources: "at least want_m" selects the node only if that much is really free.
    (term,) = resource_required({"requiredResources": [{"resourceType": "cpu", "minAvailable": f"{want_m}m"}]})
    (expr,) = term["matchExpressions"]
    (bound,) = expr["values"]
    if selectors.holds(expr["operator"], str(written), expr["values"], parse_int64(bound)):
        assert free >= want_m


def test_the_memo_answers_for_pods_sharing_their_containers_and_never_for_others() -> None:
    from webhook.labeler.values import RequestsMemo, pod_resource

    memo = RequestsMemo(size=2)
    first = pod("1", "1Gi")
    twin = {**first, "metadata": {"name": "twin"}}  # the same containers list, as projections share it
    other = pod("2", "1Gi")  # equal shape, its own list: computed for itself
    assert memo(first) is memo(twin)
    assert memo(other).cpu == 2000 and memo(other) is not memo(first)
    assert memo(pod("1", phase="Succeeded")).cpu == 0
    assert pod_resource(first).cpu == memo(first).cpu == 1000
