"""The PlacementPolicy custom resource on the fake, with apiextensions-apiserver's rules for a
resource with a status subresource (customResourceStrategy, customResourceStatusStrategy): the
same rules the e2e tier holds the real v1.20 API server to (tests/e2e/test_crd.py)."""
from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kit.fakeapi import FakeApiServer
from tests.kit.policy_objects import SSD_SPEC, manifest
from webhook.cluster.client import ApiError, Client
from webhook.cluster.config import ClusterConfig
from webhook.server.policies import PATH

STATUS = {"observedGeneration": 1, "changedObjects": 2}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with FakeApiServer("1.20.2", placement_policies=True) as server:
        api = Client(ClusterConfig(server.url))
        yield api
        await api.close()


async def test_the_resource_is_served_only_when_its_crd_is_installed() -> None:
    async with FakeApiServer("1.31.0") as server:
        api = Client(ClusterConfig(server.url))
        with pytest.raises(ApiError) as missing:
            await api.get(PATH)
        await api.close()
    assert missing.value.status == 404


async def test_create_drops_the_status_and_starts_the_generation_at_one(client: Client) -> None:
    created = await client.create(PATH, {**manifest("ssd"), "status": STATUS})
    assert created["metadata"]["generation"] == 1 and "status" not in created


async def test_a_spec_change_bumps_the_generation_and_keeps_the_status(client: Client) -> None:
    await client.create(PATH, manifest("ssd"))
    await client.patch(f"{PATH}/ssd/status", {"status": STATUS}, kind="merge")
    edited = await client.patch(f"{PATH}/ssd", {"spec": {"order": 5}, "status": {"changedObjects": 99}}, kind="merge")
    assert edited["metadata"]["generation"] == 2 and edited["status"] == STATUS


async def test_a_metadata_change_leaves_the_generation(client: Client) -> None:
    await client.create(PATH, manifest("ssd"))
    labelled = await client.patch(f"{PATH}/ssd", {"metadata": {"labels": {"team": "a"}}}, kind="merge")
    assert labelled["metadata"]["generation"] == 1


async def test_the_status_subresource_changes_the_status_alone(client: Client) -> None:
    await client.create(PATH, manifest("ssd"))
    written = await client.patch(f"{PATH}/ssd/status", {"status": STATUS, "spec": {"order": 9},
                                                        "metadata": {"labels": {"x": "y"}}}, kind="merge")
    assert written["status"] == STATUS and written["spec"] == SSD_SPEC
    assert written["metadata"]["generation"] == 1 and "labels" not in written["metadata"]
