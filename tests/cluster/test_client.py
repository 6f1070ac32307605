"""The client's wire handling: Status errors, watch ERROR events, long lines, /version."""
from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node
from webhook.cluster.client import ApiError, Client, Expired
from webhook.cluster.config import ClusterConfig
from webhook.cluster.informer import REFLECTOR_BACKOFF, Backoff


async def collect(it: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in it]


async def test_status_bodies_become_api_errors_and_410_becomes_expired(server: FakeApiServer,
                                                                        client: Client) -> None:
    with pytest.raises(ApiError) as caught:
        await client.get("/api/v1/nodes/absent")
    assert (caught.value.status, caught.value.reason) == (404, "NotFound")
    assert 'nodes "absent" not found' in caught.value.message
    old = str(server.resource_version)
    server.apply_object(node("x"))
    server.compact()
    with pytest.raises(Expired) as expired:
        await collect(client.watch("/api/v1/nodes", old, timeout_seconds=2))
    assert expired.value.status == 410 and "too old resource version" in expired.value.message
    pages = client.list_pages("/api/v1/nodes", limit=2)
    await pages.__anext__()
    server.apply_object(node("y"))
    server.compact()
    with pytest.raises(Expired):  # the continue token's snapshot is gone
        await pages.__anext__()


async def test_a_watch_yields_typed_events_until_the_server_ends_it(server: FakeApiServer, client: Client) -> None:
    start = str(server.resource_version)
    server.apply_object(node("w1"))
    server.delete_object("Node", "w1")
    events = await collect(client.watch("/api/v1/nodes", start, allow_bookmarks=False, timeout_seconds=1))
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "w1"), ("DELETED", "w1")]


async def fake(routes: dict[str, Any]) -> TestServer:
    async def handle(request: web.Request) -> web.StreamResponse:
        body = routes[request.path]
        if isinstance(body, list):  # a watch: these lines in small chunks
            resp = web.StreamResponse()
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            data = b"".join(msgspec.json.encode(e) + b"\n" for e in body)
            for i in range(0, len(data), 1000):
                await resp.write(data[i:i + 1000])
            await resp.write_eof()
            return resp
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    server = TestServer(app)
    await server.start_server()
    return server


async def test_managed_cluster_minors_and_events_larger_than_a_read_buffer() -> None:
    huge = {"metadata": {"name": "big", "resourceVersion": "7"}, "status": {"images": ["x" * 100] * 3000}}
    server = await fake({"/version": {"major": "1", "minor": "31+", "gitVersion": "v1.31.2-eks-1"},
                         "/api/v1/nodes": [{"type": "ADDED", "object": huge},
                                           {"type": "ERROR", "object": {"kind": "Status", "code": 500,
                                                                        "reason": "InternalError",
                                                                        "message": "boom"}}]})
    api = Client(ClusterConfig(str(server.make_url("")).rstrip("/")), request_timeout=2.0)
    try:
        assert await api.version() == (1, 31)
        got: list[tuple[str, Any]] = []
        with pytest.raises(ApiError, match="boom"):
            async for event in api.watch("/api/v1/nodes", "1", timeout_seconds=1):
                got.append(event)
        assert got == [("ADDED", huge)]
    finally:
        await api.close()
        await server.close()


def test_the_backoff_is_the_reflectors() -> None:
    now = [0.0]
    steps = Backoff(REFLECTOR_BACKOFF, clock=lambda: now[0], rand=lambda: 0.0)
    waits = []
    for _ in range(9):
        waits.append(steps.next())
        now[0] += 1
    assert waits == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
    now[0] += 121  # no backoff for over two minutes: healthy again
    assert steps.next() == 0.8
    jittered = Backoff(REFLECTOR_BACKOFF, clock=lambda: now[0], rand=lambda: 0.999)
    assert 0.8 <= jittered.next() < 1.6
