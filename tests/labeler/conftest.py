"""A fake API server with nodes and pods, a client, and a labeler on a fast cluster cache."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.cluster.conftest import client, make_cache, until  # noqa: F401 - client: the fixture, on this server
from tests.kit.fakeapi import FakeApiServer
from webhook.cluster.client import Client
from webhook.labeler.controller import Labeler, LabelerConfig
from webhook.labeler.writes import RateLimiter, Writer


def node(name: str, *, cpu: str = "4", gpus: int = 0, labels: dict[str, str] | None = None) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {}, "status": {"allocatable": allocatable}}


def pod(name: str, on: str, *, cpu: str = "1", gpus: int = 0, namespace: str = "apps") -> dict[str, Any]:
    requests = {"cpu": cpu, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": on, "containers": [{"name": "c", "image": "i", "resources": {"requests": requests}}]},
            "status": {"phase": "Running"}}


async def no_sleep(_: float) -> None:
    await asyncio.sleep(0)


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer("1.31.0", bookmark_interval=0.2, metrics=True) as srv:
        srv.load([node("cpu-1", labels={"team": "a"}), node("gpu-1", gpus=2), pod("web-1", "cpu-1"),
                  pod("train-1", "gpu-1", gpus=1)])
        yield srv


@pytest.fixture
async def start_labeler(client: Client) -> AsyncIterator[Callable[..., Any]]:  # noqa: F811 - the fixture
    """A started labeler (its cache synced); stopped at teardown."""
    caches: list[Any] = []

    async def start(**settings: Any) -> Labeler:
        cache = make_cache(client)
        writer = Writer(client, limiter=RateLimiter(1000.0), backoff=0.01, sleep=no_sleep)
        labeler = Labeler(client, cache, LabelerConfig(**settings), writer=writer)
        await cache.start()
        assert await cache.wait_synced(3.0), cache.status()
        caches.append(cache)
        return labeler

    yield start
    for cache in caches:
        await asyncio.wait_for(cache.stop(), 3.0)


@pytest.fixture(name="until")
def until_fixture() -> Callable[..., Any]:
    return until
