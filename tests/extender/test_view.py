"""The extender on the cluster view: node names judged by the nodes it watches."""
from __future__ import annotations

import asyncio
from typing import Any

from tests.cluster.conftest import make_cache, until
from tests.kit.fakeapi import FakeApiServer
from webhook.cluster.cache import NODES
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.extender import protocol
from webhook.extender.app import Extender
from webhook.spot.config import SpotConfig
from webhook.spot.nodes import node_projection


def node(name: str, kind: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"node.kubernetes.io/capacity": kind},
                         "annotations": {"noise": "x" * 100, **(annotations or {})}},
            "spec": {}, "status": {"allocatable": {"cpu": "4"}}}


async def test_a_watched_annotation_marks_a_node_and_counts_against_its_pool() -> None:
    config = SpotConfig.model_validate({"reclaim": {"annotations": {"example.com/reclaim-at": ""}}})
    async with FakeApiServer("1.31.0", bookmark_interval=0.2) as server:
        server.load([node("spot-1", "spot"), node("spot-2", "spot"), node("od-1", "on-demand")])
        client = Client(ClusterConfig(server.url), request_timeout=2.0)
        cache = make_cache(client, projections={NODES: node_projection(config)})
        extender = Extender(config, view=cache)
        cache.informers[NODES].add_handler(extender.saw_node)
        await cache.start()
        try:
            assert await cache.wait_synced(3.0)
            kept = next(n for n in cache.nodes() if n["metadata"]["name"] == "spot-1")
            assert "annotations" not in kept["metadata"], "only the watched annotations are kept"
            server.patch_object("Node", "spot-1", {"metadata": {"annotations": {"example.com/reclaim-at": "t"}}})
            await until(lambda: extender.history.count(("", "")) == 1, what="the reclaim to be seen")
            args = protocol.ExtenderArgs({"metadata": {"name": "p"}}, True, ["spot-1", "spot-2", "od-1"])
            answer = extender.filter(args)
            assert answer["NodeNames"] == ["spot-2", "od-1"]
            assert answer["FailedAndUnresolvableNodes"] == {
                "spot-1": "node is about to be reclaimed (annotation example.com/reclaim-at)"}
        finally:
            await asyncio.wait_for(cache.stop(), 3.0)
            await client.close()
