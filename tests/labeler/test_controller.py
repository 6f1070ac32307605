"""The labeler against the fake API server: what it writes, how, and what it never touches."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tests.kit.fakeapi import FakeApiServer
from tests.labeler.conftest import node, pod
from webhook.labeler.values import PREFIX

P = PREFIX


def patches(server: FakeApiServer) -> list[Any]:
    return [r for r in server.requests if r.method == "PATCH"]


def labels_of(server: FakeApiServer, name: str) -> dict[str, str]:
    return server.get_object("Node", name)["metadata"]["labels"]


async def test_a_pass_writes_every_label_with_a_merge_patch_of_its_own_keys(
        server: FakeApiServer, start_labeler: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    report, _, _ = await labeler.run_pass()
    assert (report.written, report.failed, report.skipped) == (2, {}, {})
    cpu = labels_of(server, "cpu-1")
    assert cpu["team"] == "a", "a label the labeler does not own is left alone"
    assert cpu[P + "cpu-available"] == "3000" and cpu[P + "cpu-usage"] == "25" and cpu[P + "gpu-available"] == "0"
    assert labels_of(server, "gpu-1")[P + "gpu-available"] == "1"
    for request in patches(server):
        assert request.content_type == "application/merge-patch+json"
        assert request.query.get("fieldManager") == "label-nodes"
        assert set(request.json()["metadata"]["labels"]) <= {k for k in cpu if k.startswith(P)}
        assert set(request.json()) == {"metadata"} and set(request.json()["metadata"]) == {"labels"}


async def test_a_second_pass_over_an_unchanged_cluster_writes_nothing(
        server: FakeApiServer, start_labeler: Callable[..., Any], until: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    await labeler.run_pass()
    server.clear_requests()
    report, _, changes = await labeler.run_pass()  # at once: before the watch brings the labels back
    assert (report.written, report.unchanged, changes) == (0, 2, []) and patches(server) == []
    await until(lambda: all(P + "cpu-usage" in (n["metadata"].get("labels") or {})
                            for n in labeler.nodes().values()), what="the view to see the labels")
    report, _, changes = await labeler.run_pass()  # and after
    assert (report.written, changes) == (0, []) and patches(server) == []


async def test_a_deleted_pod_moves_its_node_a_step_and_only_that_node_is_written(
        server: FakeApiServer, start_labeler: Callable[..., Any], until: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    await labeler.run_pass()
    server.delete_object("Pod", "web-1", "apps")
    await until(lambda: labeler.pods.node_of("apps/web-1") is None, what="the pod's deletion to be seen")
    assert "cpu-1" in labeler.dirty
    server.clear_requests()
    report, _, _ = await labeler.run_pass(labeler.dirty)
    assert report.written == 1 and [r.path for r in patches(server)] == ["/api/v1/nodes/cpu-1"]
    assert labels_of(server, "cpu-1")[P + "cpu-available"] == "4000"


async def test_a_label_someone_else_changed_is_put_back(server: FakeApiServer, start_labeler: Callable[..., Any],
                                                        until: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    await labeler.run_pass()
    server.patch_object("Node", "gpu-1", {"metadata": {"labels": {P + "gpu-available": "9"}}})
    await until(lambda: labeler.nodes()["gpu-1"]["metadata"]["labels"].get(P + "gpu-available") == "9",
                what="the view to see the tampered label")
    assert "gpu-1" in labeler.dirty
    await labeler.run_pass(labeler.dirty)
    assert labels_of(server, "gpu-1")[P + "gpu-available"] == "1"


async def test_a_change_by_someone_else_that_races_our_write_s_echo_is_still_put_back(
        server: FakeApiServer, start_labeler: Callable[..., Any], until: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    real = labeler.writer.apply

    def gpu_available() -> str | None:
        return labeler.nodes()["gpu-1"]["metadata"]["labels"].get(P + "gpu-available")

    async def echoed_then_tampered(changes: Any, report: Any) -> None:
        await real(changes, report)
        # Before the write's caller resumes, the watch brings the write back, then someone
        # else's change: nothing may be left that makes a pass take the view for our write.
        await until(lambda: gpu_available() == "1", what="the view to see our write")
        server.patch_object("Node", "gpu-1", {"metadata": {"labels": {P + "gpu-available": "9"}}})
        await until(lambda: gpu_available() == "9", what="the view to see the tampered label")

    labeler.writer.apply = echoed_then_tampered
    await labeler.run_pass()
    labeler.writer.apply = real
    assert "gpu-1" in labeler.dirty
    await labeler.run_pass(labeler.dirty)
    assert labels_of(server, "gpu-1")[P + "gpu-available"] == "1"


async def test_conflicts_and_throttling_are_retried(server: FakeApiServer, start_labeler: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    server.fail_next("PATCH", r"/api/v1/nodes/cpu-1$", 409)
    server.fail_next("PATCH", r"/api/v1/nodes/cpu-1$", 429, retry_after=1)
    report, _, _ = await labeler.run_pass()
    assert report.written == 2 and report.failed == {}
    assert len([r for r in patches(server) if r.path.endswith("cpu-1")]) == 3


async def test_a_write_that_keeps_failing_is_counted_and_the_pass_goes_on(
        server: FakeApiServer, start_labeler: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    server.fail_next("PATCH", r"/api/v1/nodes/cpu-1$", 500, times=10)
    report, _, _ = await labeler.run_pass()
    assert report.written == 1 and "cpu-1" in report.failed and "500" in report.failed["cpu-1"]
    assert labeler.metrics.errors.labels("write")._value.get() == 1
    assert P + "cpu-usage" not in labels_of(server, "cpu-1") and P + "cpu-usage" in labels_of(server, "gpu-1")


async def test_a_node_deleted_before_its_write_is_not_an_error(server: FakeApiServer,
                                                               start_labeler: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    server.fail_next("PATCH", r"/api/v1/nodes/gpu-1$", 404)
    report, _, _ = await labeler.run_pass()
    assert report.ok and report.gone == 1


async def test_nodes_that_cannot_be_computed_are_left_out_with_their_reason(
        server: FakeApiServer, start_labeler: Callable[..., Any]) -> None:
    server.apply_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "joining", "labels": {}},
                         "spec": {}, "status": {}})
    broken = pod("odd", "cpu-1")
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    server.apply_object(broken)
    labeler = await start_labeler()
    report, _, _ = await labeler.run_pass()
    assert set(report.skipped) == {"joining", "cpu-1"} and "pod apps/odd" in report.skipped["cpu-1"]
    assert report.written == 1 and P + "cpu-usage" not in labels_of(server, "cpu-1")


async def test_measured_usage_comes_from_metrics_k8s_io(server: FakeApiServer,
                                                        start_labeler: Callable[..., Any]) -> None:
    server.set_node_metrics("cpu-1", "3", "1Gi")
    server.set_node_metrics("gpu-1", "100m", "1Gi")
    labeler = await start_labeler(source="metrics")
    await labeler.run_pass()
    assert labels_of(server, "cpu-1")[P + "cpu-usage"] == "75"
    assert labels_of(server, "cpu-1")[P + "cpu-available"] == "3000"  # availability stays request-based


async def test_without_the_metrics_api_usage_falls_back_to_requests(start_labeler: Callable[..., Any],
                                                                    caplog: Any) -> None:
    async with FakeApiServer("1.31.0", bookmark_interval=0.2, metrics=False) as bare:
        bare.load([node("n1"), pod("p", "n1", cpu="2")])
        from tests.cluster.conftest import make_cache
        from webhook.cluster.client import Client
        from webhook.cluster.config import ClusterConfig
        from webhook.labeler.controller import Labeler, LabelerConfig

        client = Client(ClusterConfig(bare.url), request_timeout=2.0)
        cache = make_cache(client)
        labeler = Labeler(client, cache, LabelerConfig(source="metrics"))
        await cache.start()
        try:
            assert await cache.wait_synced(3.0)
            await labeler.run_pass()
            await labeler.run_pass()
        finally:
            await cache.stop()
            await client.close()
        assert bare.get_object("Node", "n1")["metadata"]["labels"][P + "cpu-usage"] == "50"
    assert labeler.metrics.metrics_fallbacks._value.get() == 2
    assert sum("metrics.k8s.io is not answering" in r.getMessage() for r in caplog.records) == 1


async def test_following_the_cluster_relabels_a_node_when_a_pod_lands_on_it(
        server: FakeApiServer, start_labeler: Callable[..., Any], until: Callable[..., Any]) -> None:
    labeler = await start_labeler(interval=300.0, settle=0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(labeler.run(stop))
    try:
        await until(lambda: P + "cpu-usage" in labels_of(server, "cpu-1"), what="the first pass")
        server.apply_object(pod("web-2", "cpu-1", cpu="2"))
        await until(lambda: labels_of(server, "cpu-1").get(P + "cpu-available") == "1000", what="the relabel")
    finally:
        stop.set()
        await asyncio.wait_for(task, 3.0)
    assert labeler.metrics.writes._value.get() == 3


async def test_a_dry_run_computes_and_writes_nothing(server: FakeApiServer, start_labeler: Callable[..., Any]) -> None:
    labeler = await start_labeler(dry_run=True)
    report, computed, changes = await labeler.run_pass()
    assert patches(server) == [] and report.written == 0 and len(changes) == 2 and len(computed) == 2


async def test_the_api_server_going_away_mid_pass_fails_writes_and_removes_nothing(
        server: FakeApiServer, start_labeler: Callable[..., Any], until: Callable[..., Any]) -> None:
    labeler = await start_labeler()
    await labeler.run_pass()
    before = {name: labels_of(server, name) for name in ("cpu-1", "gpu-1")}
    server.delete_object("Pod", "web-1", "apps")  # its pod has gone: a write is due
    await until(lambda: labeler.pods.node_of("apps/web-1") is None, what="the pod's deletion to be seen")
    server.go_away("refuse")
    try:
        report, _, _ = await labeler.run_pass()
    finally:
        server.come_back()
    assert list(report.failed) == ["cpu-1"] and report.written == 0
    assert {name: labels_of(server, name) for name in ("cpu-1", "gpu-1")} == before
    report, _, _ = await labeler.run_pass()  # it answers again: the same change goes through
    assert report.written == 1 and labels_of(server, "cpu-1")[P + "cpu-available"] == "4000"
    assert labels_of(server, "cpu-1")["team"] == "a"
