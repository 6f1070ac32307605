"""ClusterCache against the fake API server: sync, events, bookmarks, resumes, relists, outages."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node
from webhook.cluster.cache import NAMESPACES, NODES, PRIORITY_CLASSES, ClusterCache
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.cluster.view import ClusterView
from webhook.scheduler.filters import NodeEligibility

Until = Callable[..., Any]


def lists_of(server: FakeApiServer, path: str) -> list[dict[str, str]]:
    return [r.query for r in server.requests if r.path == path and r.query.get("watch") != "true"]


def watches_of(server: FakeApiServer, path: str) -> list[dict[str, str]]:
    return [r.query for r in server.requests if r.path == path and r.query.get("watch") == "true"]


async def test_the_first_sync_reads_every_page_of_nodes_namespaces_and_priority_classes(
        server: FakeApiServer, cache: ClusterCache) -> None:
    assert isinstance(cache, ClusterView)
    assert sorted(n["metadata"]["name"] for n in cache.nodes()) == ["n0", "n1", "n2", "n3", "n4"]
    assert cache.namespace_labels("kube-system") is not None
    assert cache.namespace_labels("nowhere") is None
    assert cache.priority_class("system-node-critical") == {
        "metadata": {"name": "system-node-critical"}, "value": 2000001000,
        "preemptionPolicy": "PreemptLowerPriority", "globalDefault": False}
    node_lists = lists_of(server, "/api/v1/nodes")
    assert len(node_lists) == 3  # 5 nodes, pages of 2, following continue
    assert node_lists[0] == {"resourceVersion": "0", "limit": "2"}
    assert all("continue" in q and "resourceVersion" not in q for q in node_lists[1:])
    (first_watch,) = watches_of(server, "/api/v1/nodes")
    assert first_watch["allowWatchBookmarks"] == "true"
    assert first_watch["resourceVersion"] == str(server.resource_version)
    status = cache.status()
    assert set(status) == {NODES, NAMESPACES, PRIORITY_CLASSES}
    assert status[NODES]["synced"] and status[NODES]["objects"] == 5 and status[NODES]["relists"] == 0
    assert cache.fresh(5.0)


async def test_added_modified_and_deleted_events_reach_the_store(server: FakeApiServer, cache: ClusterCache,
                                                                 until: Until) -> None:
    seen: list[tuple[str, Any, Any]] = []
    cache.informers[NODES].add_handler(lambda key, old, new: seen.append((key, old, new)))
    server.apply_object(node("n9", zone="z9"))
    await until(lambda: any(n["metadata"]["name"] == "n9" for n in cache.nodes()), what="ADDED")
    server.patch_object("Node", "n9", {"metadata": {"labels": {"zone": "z10"}}})
    await until(lambda: {n["metadata"]["name"]: n for n in cache.nodes()}["n9"]["metadata"]["labels"]
                == {"zone": "z10"}, what="MODIFIED")
    server.delete_object("Node", "n9")
    await until(lambda: all(n["metadata"]["name"] != "n9" for n in cache.nodes()), what="DELETED")
    assert [(k, o is None, n is None) for k, o, n in seen] == [
        ("n9", True, False), ("n9", False, False), ("n9", False, True)]
    assert seen[1][1]["metadata"]["labels"] == {"zone": "z9"}
    assert cache.informers[NODES].events == 3


async def test_a_bookmark_moves_the_resource_version_and_nothing_else(server: FakeApiServer, cache: ClusterCache,
                                                                      until: Until) -> None:
    nodes = cache.informers[NODES]
    before, generation, bookmarks = nodes.resource_version, nodes.generation, nodes.bookmarks
    server.apply_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
    target = str(server.resource_version)
    await until(lambda: nodes.resource_version == target, what="a bookmark at the new resourceVersion")
    assert before != target
    assert nodes.bookmarks > bookmarks and nodes.events == 0
    assert nodes.generation == generation and len(nodes) == 5


async def test_a_dropped_watch_resumes_from_the_last_resource_version_without_a_relist(
        server: FakeApiServer, cache: ClusterCache, until: Until) -> None:
    nodes = cache.informers[NODES]
    await until(lambda: nodes.bookmarks > 0, what="a bookmark")
    server.clear_requests()
    last = nodes.resource_version
    assert server.drop_watches() >= 3
    server.apply_object(node("late"))
    await until(lambda: nodes.get("late") is not None, what="the event after the drop")
    assert lists_of(server, "/api/v1/nodes") == []
    resumed = watches_of(server, "/api/v1/nodes")
    assert resumed and resumed[0]["resourceVersion"] == last
    assert nodes.relists == 0 and nodes.lists == 1


async def test_an_expired_resource_version_relists_and_drops_what_was_deleted_meanwhile(
        server: FakeApiServer, cache: ClusterCache, until: Until) -> None:
    nodes = cache.informers[NODES]
    changes: list[tuple[str, Any, Any]] = []
    nodes.add_handler(lambda key, old, new: changes.append((key, old, new)))
    server.clear_requests()
    # No await between these: the watch never sees the deletion, then finds its version compacted.
    server.delete_object("Node", "n1")
    server.compact()
    server.drop_watches()
    await until(lambda: nodes.relists == 1, what="a relist")
    assert nodes.get("n1") is None and len(nodes) == 4
    assert [(k, n) for k, _, n in changes] == [("n1", None)]
    relist = lists_of(server, "/api/v1/nodes")
    assert relist[0] == {"limit": "2"}  # resourceVersion "": a quorum read, not the watch cache
    assert nodes.resource_version == str(server.resource_version)
    assert cache.fresh(5.0)


async def test_an_outage_keeps_the_store_counts_errors_goes_stale_and_resyncs_on_return(
        server: FakeApiServer, cache: ClusterCache, until: Until) -> None:
    nodes = cache.informers[NODES]
    assert cache.fresh(0.5)
    server.go_away()
    await until(lambda: nodes.errors >= 3, what="failed retries")
    await until(lambda: not cache.fresh(0.5), what="staleness")
    assert len(cache.nodes()) == 5  # stale, not forgotten
    assert cache.namespace_labels("default") is not None
    server.apply_object(node("while-away"))
    server.come_back()
    await until(lambda: nodes.get("while-away") is not None, what="the resync")
    await until(lambda: cache.fresh(0.5), what="freshness")
    assert nodes.relists == 0  # the history still had our resourceVersion: resumed


async def test_an_unavailable_server_is_retried_with_backoff(server: FakeApiServer, cache: ClusterCache,
                                                             until: Until) -> None:
    nodes = cache.informers[NODES]
    server.go_away("unavailable")
    await until(lambda: nodes.errors >= 2, what="503s")
    assert "ServiceUnavailable" in nodes.last_error
    server.come_back()
    server.apply_object(node("back"))
    await until(lambda: nodes.get("back") is not None, what="the resync")


async def test_a_failed_first_list_is_retried(server: FakeApiServer, make_cache: Callable[..., ClusterCache],
                                              client: Client) -> None:
    server.fail_next("GET", "^/api/v1/nodes$", 500, times=2)
    server.fail_next("GET", "^/api/v1/namespaces$", 410)  # an expired list: relisted from scratch
    view = make_cache(client)
    await view.start()
    try:
        assert await view.wait_synced(3.0)
        assert view.informers[NODES].errors == 2 and len(view.nodes()) == 5
        assert view.informers[NAMESPACES].errors == 1 and view.namespace_labels("default") is not None
    finally:
        await asyncio.wait_for(view.stop(), 3.0)


async def test_a_relabelled_namespace_and_a_cordoned_node_are_seen(server: FakeApiServer, cache: ClusterCache,
                                                                   until: Until) -> None:
    server.apply_object({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "team-a", "labels": {"tier": "bronze"}}})
    await until(lambda: (cache.namespace_labels("team-a") or {}).get("tier") == "bronze", what="the namespace")
    server.patch_object("Namespace", "team-a", {"metadata": {"labels": {"tier": "gold"}}})
    await until(lambda: (cache.namespace_labels("team-a") or {}).get("tier") == "gold", what="the relabel")

    def n2() -> Any:
        return next(n for n in cache.nodes() if n["metadata"]["name"] == "n2")

    assert NodeEligibility({}).admits(n2())
    server.patch_object("Node", "n2", {"spec": {"unschedulable": True}})
    await until(lambda: n2()["spec"]["unschedulable"], what="the cordon")
    assert not NodeEligibility({}).admits(n2())
    assert NodeEligibility({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}).admits(n2())


async def test_node_projection_keeps_what_predicates_read(server: FakeApiServer, cache: ClusterCache,
                                                          until: Until) -> None:
    taint = {"key": "spot", "value": "true", "effect": "NoSchedule"}
    big = node("big", taints=[taint], pool="gpu")
    big["status"].update({"allocatable": {"cpu": "8", "memory": "32Gi"}, "images": [{"names": ["x"] * 50}]})
    big["status"]["conditions"][0]["lastHeartbeatTime"] = "2024-01-01T00:00:00Z"
    server.apply_object(big)
    await until(lambda: cache.informers[NODES].get("big") is not None, what="the node")
    assert cache.informers[NODES].get("big") == {
        "metadata": {"name": "big", "labels": {"pool": "gpu"}},
        "spec": {"taints": [taint], "unschedulable": False},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    first = cache.nodes()
    assert cache.nodes() is first  # memoised until a node changes
    generation = cache.informers[NODES].generation
    big["status"]["conditions"][0]["lastHeartbeatTime"] = "2024-01-01T00:01:00Z"
    server.apply_object(big)  # a heartbeat: a MODIFIED event that changes nothing projected
    await until(lambda: cache.informers[NODES].events >= 2, what="the heartbeat")
    assert cache.informers[NODES].generation == generation and cache.nodes() is first


async def test_another_informer_can_be_registered_with_its_own_projection(
        server: FakeApiServer, cache: ClusterCache, until: Until) -> None:
    pods = cache.add("pods", "/api/v1/pods", lambda p: {"node": p["spec"].get("nodeName")})
    assert await cache.wait_synced(3.0)  # every informer listed, the one just added too
    server.apply_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-b"},
                         "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}})
    await until(lambda: pods.get("team-b/p") == {"node": "n1"}, what="the pod")
    assert "pods" in cache.status()


async def test_the_server_version_decides_match_label_keys(client: Client) -> None:
    assert ClusterCache(client).supports_match_label_keys() is None  # not learned yet
    for version, expected in (("1.30.0", False), ("1.31.0", True), ("1.33.1", True)):
        async with FakeApiServer(version) as srv:
            api = Client(ClusterConfig(srv.url), request_timeout=2.0)
            views = [ClusterCache(api), ClusterCache(api, match_label_keys=not expected)]
            try:
                for view in views:
                    await view.start()
                    assert await view.wait_synced(3.0)
                    await asyncio.wait_for(_version_known(view), 3.0)
                assert views[0].server_version == (1, int(version.split(".")[1]))
                assert views[0].supports_match_label_keys() is expected
                assert views[1].supports_match_label_keys() is (not expected)  # the override wins
            finally:
                for view in views:
                    await asyncio.wait_for(view.stop(), 3.0)
                await api.close()


async def _version_known(view: ClusterCache) -> None:
    while view.server_version is None:
        await asyncio.sleep(0.01)


async def test_a_quiet_cluster_with_open_watches_stays_fresh(cache: ClusterCache, until: Any) -> None:
    # Nothing changes and no bookmark is due: the open watches alone say the store is current.
    await until(lambda: all(i.watching for i in cache.informers.values()), what="every watch open")
    await asyncio.sleep(0.5)
    assert cache.fresh(0.2)


async def test_a_server_that_goes_away_is_logged_once_per_cause_in_one_line_and_its_return_once(
        server: FakeApiServer, cache: ClusterCache, until: Until, caplog: pytest.LogCaptureFixture) -> None:
    nodes = cache.informers[NODES]
    caplog.set_level(logging.DEBUG)
    server.go_away("refuse")
    await until(lambda: all(i.errors >= 3 for i in cache.informers.values()), what="several retries each")
    server.come_back()
    server.apply_object(node("back"))
    await until(lambda: nodes.get("back") is not None, what="the resync")
    server.go_away("unavailable")
    await until(lambda: nodes.errors >= 6, what="503s")

    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    refused = f"cannot reach the API server at {server.url}: connection refused"
    assert warnings.count(refused) == 1  # not once per retry, nor once per informer
    assert nodes.last_error.startswith("ApiError: 503")
    # A 503 may concern one resource: each informer says it, once.
    assert sorted(w.split(":")[0] for w in warnings if "503" in w) == \
        ["informer namespaces", "informer nodes", "informer priorityclasses"]
    assert [r.getMessage() for r in caplog.records if "again" in r.getMessage()] == \
        [f"reached the API server at {server.url} again"]
    assert not [r for r in caplog.records if "SSLContext" in r.getMessage() or "Cannot connect" in r.getMessage()]
