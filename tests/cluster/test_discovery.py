"""Discovery of the group-versions that differ by release: the Eviction and the PodDisruptionBudget."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tests.kit.envtest import free_port
from tests.kit.fakeapi import FakeApiServer
from webhook.cluster import discovery
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig


def ask(version: str, question: Callable[[Client], Awaitable[str | None]]) -> str | None:
    async def run() -> str | None:
        async with FakeApiServer(version) as api:
            client = Client(ClusterConfig(api.url), request_timeout=2.0)
            try:
                return await question(client)
            finally:
                await client.close()

    return asyncio.run(run())


@pytest.mark.parametrize(("version", "expected"), [("1.31.0", "policy/v1"), ("1.21.0", "policy/v1beta1")])
def test_the_eviction_version_comes_from_discovery(version: str, expected: str) -> None:
    assert ask(version, discovery.eviction_version) == expected


@pytest.mark.parametrize(("version", "expected"), [("1.31.0", "policy/v1"), ("1.20.0", "policy/v1beta1")])
def test_the_pdb_version_comes_from_discovery(version: str, expected: str) -> None:
    assert ask(version, discovery.pdb_group_version) == expected


def test_an_api_server_that_does_not_answer_gets_the_eviction_every_server_accepts() -> None:
    async def run() -> str:
        client = Client(ClusterConfig(f"http://127.0.0.1:{free_port()}"), request_timeout=2.0, log_failures=False)
        try:
            return await discovery.eviction_version(client)
        finally:
            await client.close()

    assert asyncio.run(run()) == discovery.EVICTION_FALLBACK == "policy/v1beta1"
