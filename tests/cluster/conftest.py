"""Fixtures for the cluster cache: a fake API server on the test's loop, a client for it, and
a ClusterCache with short timings (every wait in these tests is bounded)."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node
from webhook.cluster.cache import ClusterCache
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.cluster.informer import BackoffPolicy

FAST = BackoffPolicy(initial=0.02, cap=0.1, factor=2.0, jitter=0.1, reset_after=1.0)
PAGE = 2


async def until(predicate: Callable[[], bool], timeout: float = 3.0, what: str = "condition") -> None:
    """Wait until ``predicate()`` holds, at most ``timeout`` seconds."""

    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None


def make_cache(client: Client, **kwargs: object) -> ClusterCache:
    options: dict[str, object] = {"page_size": PAGE, "watch_timeout": 5.0, "backoff": FAST,
                                  "min_watch_duration": 0.0, "version_timeout": 2.0}
    options.update(kwargs)
    return ClusterCache(client, **options)  # type: ignore[arg-type]




@pytest.fixture(name="until")
def until_fixture() -> Callable[..., object]:
    return until


@pytest.fixture(name="make_cache")
def make_cache_fixture() -> Callable[..., ClusterCache]:
    return make_cache


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer("1.31.0", bookmark_interval=0.2, page_size=PAGE) as srv:
        srv.load(node(f"n{i}", zone=f"z{i % 2}") for i in range(5))
        yield srv


@pytest.fixture
async def client(server: FakeApiServer) -> AsyncIterator[Client]:
    api = Client(ClusterConfig(server.url), request_timeout=2.0, watch_grace=2.0)
    yield api
    await api.close()


@pytest.fixture
async def cache(client: Client) -> AsyncIterator[ClusterCache]:
    view = make_cache(client)
    await view.start()
    began = time.monotonic()
    assert await view.wait_synced(3.0), view.status()
    assert time.monotonic() - began < 3.0
    yield view
    await asyncio.wait_for(view.stop(), 3.0)
