"""LIST (chunking, continue tokens, selectors) and WATCH through the official client."""
from __future__ import annotations

import base64
import json
import threading

import kubernetes
import pytest
import urllib3
from kubernetes.client.rest import ApiException

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node, pod


def test_a_paginated_node_list_visits_every_node_once_at_one_resource_version(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.load(node(f"node-{i:03d}") for i in range(250))
    first = core.list_node(limit=100)
    token, seen = first.metadata._continue, [n.metadata.name for n in first.items]
    assert first.metadata.remaining_item_count == 150
    decoded = json.loads(base64.urlsafe_b64decode(token + "=="))
    assert decoded == {"v": "meta.k8s.io/v1", "rv": int(first.metadata.resource_version), "start": "node-099\x00"}
    server.apply_object(node("node-000", changed="yes"))  # later writes do not leak into the snapshot
    server.apply_object(node("node-200", changed="yes"))
    while token:
        page = core.list_node(limit=100, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        seen += [n.metadata.name for n in page.items]
        assert all(not (n.metadata.labels or {}).get("changed") for n in page.items)
        token = page.metadata._continue
    assert seen == [f"node-{i:03d}" for i in range(250)]
    assert page.metadata.remaining_item_count is None


def test_a_continue_token_from_before_a_compaction_gets_410_expired_with_an_inconsistent_token(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.load(node(f"n{i}") for i in range(5))
    token = core.list_node(limit=2).metadata._continue
    server.apply_object(node("n9"))
    server.compact()
    with pytest.raises(ApiException) as expired:
        core.list_node(limit=2, _continue=token)
    body = json.loads(expired.value.body)
    assert (expired.value.status, body["reason"], body["code"]) == (410, "Expired", 410)
    assert body["message"].startswith("The provided continue parameter is too old to display a consistent list "
                                      "result. You can start a new list without the continue parameter, or use the "
                                      "continue token in this response to retrieve the remainder of the results.")
    inconsistent = body["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(inconsistent + "=="))["rv"] == -1
    rest = core.list_node(limit=10, _continue=inconsistent)  # the remainder, at the latest revision
    assert [n.metadata.name for n in rest.items] == ["n2", "n3", "n4", "n9"]


def test_list_items_carry_no_kind_or_api_version_but_the_list_does(server: FakeApiServer,
                                                                   core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(node("n1"))
    raw = json.loads(core.list_node(_preload_content=False).data)
    assert (raw["kind"], raw["apiVersion"]) == ("NodeList", "v1")
    assert "kind" not in raw["items"][0] and "apiVersion" not in raw["items"][0]
    single = json.loads(core.read_node("n1", _preload_content=False).data)
    assert (single["kind"], single["apiVersion"]) == ("Node", "v1")


def test_label_and_field_selectors_filter_pods_like_the_real_server(server: FakeApiServer,
                                                                    core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pod("a", node_name="n1", labels={"app": "web", "tier": "1"}))
    server.apply_object(pod("b", node_name="n2", labels={"app": "web"}))
    server.apply_object(pod("c", node_name="n1", phase="Succeeded", labels={"app": "db"}))

    def names(**kw: str) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**kw).items]

    assert names(field_selector="spec.nodeName=n1") == ["a", "c"]
    assert names(field_selector="spec.nodeName=n1,status.phase!=Succeeded") == ["a"]
    assert names(label_selector="app in (web, db),!tier") == ["b", "c"]
    assert names(label_selector="app notin (web)") == ["c"]
    assert names(label_selector="tier") == ["a"]
    assert names(label_selector="app==web,tier!=1") == ["b"]
    assert [n.metadata.name for n in core.list_node(field_selector="spec.unschedulable=false").items] == []
    page = core.list_namespaced_pod("default", label_selector="app=web", limit=1)
    assert page.metadata._continue and page.metadata.remaining_item_count is None  # unknown with selectors


def test_an_unsupported_field_selector_or_a_bad_label_selector_is_a_400(core: kubernetes.client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as field:
        core.list_node(field_selector="metadata.namespace=x")
    assert (field.value.status, json.loads(field.value.body)["message"]) == (
        400, "field label not supported: metadata.namespace")
    with pytest.raises(ApiException) as label:
        core.list_node(label_selector="app in (web")
    assert label.value.status == 400
    with pytest.raises(ApiException) as match:
        core.list_node(resource_version_match="NotOlderThan")
    assert json.loads(match.value.body)["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden '
        "unless resourceVersion is provided")


def test_a_watch_replays_added_modified_deleted_and_sends_bookmarks_only_when_asked(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    start = str(server.resource_version)
    server.apply_object(node("n1"))
    server.patch_object("Node", "n1", {"metadata": {"labels": {"pool": "spot"}}})
    server.delete_object("Node", "n1")
    seen = []
    watch = kubernetes.watch.Watch()
    for e in watch.stream(core.list_node, resource_version=start, timeout_seconds=5, allow_watch_bookmarks=True):
        meta = e["raw_object"]["metadata"]
        seen.append((e["type"], meta.get("name"), meta["resourceVersion"]))
        if len(seen) == 5:
            watch.stop()
    assert [s[:2] for s in seen[:3]] == [("ADDED", "n1"), ("MODIFIED", "n1"), ("DELETED", "n1")]
    assert [int(s[2]) for s in seen[:3]] == [int(start) + 1, int(start) + 2, int(start) + 3]
    assert [s[:2] for s in seen[3:]] == [("BOOKMARK", None), ("BOOKMARK", None)]
    assert seen[3][2] == str(server.resource_version)
    plain = [e["type"] for e in kubernetes.watch.Watch().stream(core.list_node, resource_version=start,
                                                                timeout_seconds=1)]
    assert plain == ["ADDED", "MODIFIED", "DELETED"]


def test_a_watch_from_zero_starts_with_the_current_objects_then_follows_changes_from_another_thread(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(node("old"))
    timer = threading.Timer(0.3, lambda: server.apply_object(node("new")))
    timer.start()
    events = []
    watch = kubernetes.watch.Watch()
    for event in watch.stream(core.list_node, resource_version="0", timeout_seconds=5):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 2:
            watch.stop()
    timer.join()
    assert events == [("ADDED", "old"), ("ADDED", "new")]


def test_a_watch_from_a_compacted_resource_version_gets_410_expired(server: FakeApiServer,
                                                                    core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(node("n1"))
    server.compact()
    server.apply_object(node("n2"))
    raw = core.list_node(watch=True, resource_version="1", timeout_seconds=1, _preload_content=False)
    assert raw.status == 200  # the error travels inside the stream
    lines = [json.loads(line) for line in raw.data.splitlines()]
    assert lines == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: 1 ({server.resource_version - 1})", "reason": "Expired",
        "code": 410}}]
    with pytest.raises(ApiException) as gone:
        list(kubernetes.watch.Watch().stream(core.list_node, resource_version="1", timeout_seconds=1))
    assert gone.value.status == 410


def test_a_dropped_watch_breaks_the_client_stream_mid_flight(server: FakeApiServer,
                                                             core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(node("n1"))
    events = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in kubernetes.watch.Watch().stream(core.list_node, timeout_seconds=10):
            events.append(event["type"])
            assert server.drop_watches() == 1
    assert events == ["ADDED"]
