"""Benchmark-sized clusters: 5,000 nodes and 150,000 pods are stored and listed in pages."""
from __future__ import annotations

import time

import aiohttp
import msgspec

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node, pod

NODES, PODS = 5_000, 150_000


async def test_five_thousand_nodes_and_150k_pods_list_in_pages_quickly() -> None:
    async with FakeApiServer("1.31.0", record_requests=False) as server, aiohttp.ClientSession() as http:
        began = time.monotonic()
        server.load(node(f"node-{i:05d}", zone=f"z{i % 3}") for i in range(NODES))
        server.load(pod(f"pod-{i:06d}", f"ns-{i % 50:02d}", node_name=f"node-{i % NODES:05d}",
                        labels={"app": f"app-{i % 100}"}) for i in range(PODS))
        loaded = time.monotonic()

        async def pages(path: str, **params: str) -> tuple[int, int, set[str]]:
            count, requests, versions, token = 0, 0, set(), ""
            while True:
                query = {**params, **({"continue": token} if token else {})}
                async with http.get(f"{server.url}{path}", params=query) as resp:
                    assert resp.status == 200
                    page = msgspec.json.decode(await resp.read())
                count, requests = count + len(page["items"]), requests + 1
                versions.add(page["metadata"]["resourceVersion"])
                token = page["metadata"].get("continue", "")
                if not token:
                    return count, requests, versions

        pods, requests, versions = await pages("/api/v1/pods", limit="10000")
        assert (pods, requests, len(versions)) == (PODS, 15, 1)
        assert (await pages("/api/v1/nodes", limit="500"))[:2] == (NODES, 10)
        assert (await pages("/api/v1/namespaces/ns-07/pods", limit="1000"))[:2] == (PODS // 50, 3)
        on_node = await pages("/api/v1/pods", fieldSelector="spec.nodeName=node-00042")
        assert on_node[0] == PODS // NODES
        listed = time.monotonic()
    # generous bounds: they catch quadratic behaviour, not a slow machine
    assert loaded - began < 30 and listed - loaded < 30
