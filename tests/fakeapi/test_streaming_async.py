"""The wire format of watches and lists, read with aiohttp's client from the server's own loop."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest

from tests.kit.fakeapi import FakeApiServer, listing
from tests.kit.fakeapi.objects import node, pod


async def read_events(resp: aiohttp.ClientResponse, count: int, timeout: float = 5) -> list[dict[str, Any]]:
    out = []
    async with asyncio.timeout(timeout):
        while len(out) < count:
            line = await resp.content.readline()
            if not line:
                break
            out.append(json.loads(line))
    return out


async def test_a_watch_is_chunked_newline_delimited_json_and_timeout_seconds_ends_it_cleanly() -> None:
    async with FakeApiServer("1.31.0") as server, aiohttp.ClientSession() as http:
        start = server.resource_version
        server.apply_object(node("n1"))
        began = time.monotonic()
        async with http.get(f"{server.url}/api/v1/nodes", params={"watch": "1", "resourceVersion": str(start),
                                                                  "timeoutSeconds": "1"}) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "application/json"
            assert resp.headers["Transfer-Encoding"] == "chunked"
            body = await resp.read()  # ends with the final chunk, no error
        assert 0.9 <= time.monotonic() - began < 3
        lines = body.split(b"\n")
        assert lines[-1] == b"" and len(lines) == 2
        event = json.loads(lines[0])
        assert list(event) == ["type", "object"] and event["type"] == "ADDED"
        assert (event["object"]["kind"], event["object"]["apiVersion"]) == ("Node", "v1")


async def test_an_object_that_stops_matching_the_selector_is_delivered_as_deleted_at_the_new_version() -> None:
    async with FakeApiServer("1.31.0") as server, aiohttp.ClientSession() as http:
        server.apply_object(node("n1", pool="spot"))
        async with http.get(f"{server.url}/api/v1/nodes", params={"watch": "true", "labelSelector": "pool=spot",
                                                                  "timeoutSeconds": "5"}) as resp:
            assert [e["type"] for e in await read_events(resp, 1)] == ["ADDED"]
            relabeled = server.apply_object(node("n1", pool="general"))
            server.apply_object(node("n2", pool="spot"))
            gone, added = await read_events(resp, 2)
        assert gone["type"] == "DELETED"
        assert gone["object"]["metadata"]["labels"] == {"pool": "spot"}  # the previous content...
        assert gone["object"]["metadata"]["resourceVersion"] == relabeled["metadata"]["resourceVersion"]  # ...now
        assert (added["type"], added["object"]["metadata"]["name"]) == ("ADDED", "n2")


async def test_bookmarks_come_only_when_asked_and_look_like_the_real_servers() -> None:
    async with FakeApiServer("1.31.0", bookmark_interval=0.1) as server, aiohttp.ClientSession() as http:
        server.apply_object(pod("p1"))
        url = f"{server.url}/api/v1/namespaces/default/pods"
        async with http.get(url, params={"watch": "1", "timeoutSeconds": "1"}) as quiet:
            assert [e["type"] for e in await read_events(quiet, 100)] == ["ADDED"]
        async with http.get(url, params={"watch": "1", "timeoutSeconds": "5", "allowWatchBookmarks": "true"}) as chatty:
            events = await read_events(chatty, 4)
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "BOOKMARK", "BOOKMARK"]
        bookmark = events[1]
        assert bookmark == {"type": "BOOKMARK", "object": {
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"resourceVersion": str(server.resource_version), "creationTimestamp": None},
            "spec": {"containers": None}, "status": {}}}


async def test_send_initial_events_ends_with_an_annotated_bookmark_and_needs_watch_list() -> None:
    params = {"watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
              "allowWatchBookmarks": "true", "timeoutSeconds": "2"}
    async with FakeApiServer("1.32.0") as server, aiohttp.ClientSession() as http:
        server.apply_object(node("n1"))
        async with http.get(f"{server.url}/api/v1/nodes", params=params) as resp:
            added, end = await read_events(resp, 2)
        assert added["type"] == "ADDED"
        assert end["type"] == "BOOKMARK"
        assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    async with FakeApiServer("1.31.0") as server, aiohttp.ClientSession() as http:
        async with http.get(f"{server.url}/api/v1/nodes", params=params) as resp:
            body = await resp.json()
        assert resp.status == 422 and "WatchList feature gate" in body["message"]


async def test_a_watch_from_a_future_resource_version_waits_for_it() -> None:
    async with FakeApiServer("1.31.0") as server, aiohttp.ClientSession() as http:
        future = server.resource_version + 2
        async with http.get(f"{server.url}/api/v1/nodes", params={"watch": "1", "resourceVersion": str(future),
                                                                  "timeoutSeconds": "5"}) as resp:
            server.apply_object(node("early-1"))
            server.apply_object(node("early-2"))
            server.apply_object(node("late"))
            (event,) = await read_events(resp, 1)
        assert event["object"]["metadata"]["name"] == "late"


async def test_lists_honour_exact_and_not_older_than_resource_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "TOO_LARGE_WAIT", 0.2)
    async with FakeApiServer("1.31.0") as server, aiohttp.ClientSession() as http:
        server.apply_object(node("n1", v="1"))
        then = server.resource_version
        server.apply_object(node("n1", v="2"))
        server.apply_object(node("n2"))
        url = f"{server.url}/api/v1/nodes"
        async with http.get(url, params={"resourceVersion": str(then), "resourceVersionMatch": "Exact"}) as resp:
            exact = await resp.json()
        assert exact["metadata"]["resourceVersion"] == str(then)
        assert [(i["metadata"]["name"], i["metadata"]["labels"]) for i in exact["items"]] == [("n1", {"v": "1"})]
        async with http.get(url, params={"resourceVersion": str(then), "resourceVersionMatch": "NotOlderThan"}) as r:
            newer = await r.json()
        assert newer["metadata"]["resourceVersion"] == str(server.resource_version) and len(newer["items"]) == 2
        async with http.get(url, params={"resourceVersion": str(server.resource_version + 5)}) as resp:
            body = await resp.json()
        assert resp.status == 504 and resp.headers["Retry-After"] == "1"
        assert body["message"] == (f"Timeout: Too large resource version: {server.resource_version + 5}, "
                                   f"current: {server.resource_version}")
        server.compact()
        async with http.get(url, params={"resourceVersion": str(then), "resourceVersionMatch": "Exact"}) as resp:
            assert (resp.status, (await resp.json())["message"]) == (
                410, "The resourceVersion for the provided list is too old.")


async def test_a_forced_page_size_splits_lists_for_clients_that_follow_continue() -> None:
    async with FakeApiServer("1.31.0", page_size=2) as server, aiohttp.ClientSession() as http:
        server.load(node(f"n{i}") for i in range(5))
        names, token = [], ""
        while True:
            params = {"continue": token} if token else {}
            async with http.get(f"{server.url}/api/v1/nodes", params=params) as resp:
                page = await resp.json()
            assert len(page["items"]) <= 2
            names += [i["metadata"]["name"] for i in page["items"]]
            token = page["metadata"].get("continue", "")
            if not token:
                break
        assert names == [f"n{i}" for i in range(5)]
        assert [r.query.get("continue", "") != "" for r in server.requests] == [False, True, True]
