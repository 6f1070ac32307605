"""The server with a cluster view: a watch-backed cache of a (fake) API server, used by
admission from memory only, never in the way of an answer or of readiness."""
from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node
from tests.kit.policies import PROD_SSD_YAML
from tests.kit.reviews import admission_review
from tests.kit.server import Pki
from tests.kit.workloads import deployment
from webhook.cluster import config as cluster_config
from webhook.server import app

Client = TestClient  # type: ignore[type-arg]

POLICIES = PROD_SSD_YAML + """---
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: gold}
spec:
  match: {kinds: [Deployment], names: [gold-*]}
  scheduling: {priorityClassName: gold}
---
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: spread}
spec:
  match: {kinds: [Deployment], names: [spread-*]}
  placement: {podAntiAffinity: {spread: required}}
  rollout: {mode: safe}
"""


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer("1.30.0") as server:
        server.apply_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"env": "prod"}}})
        for name in ("a", "b", "c"):
            server.apply_object(node(name, **{"kubernetes.io/hostname": name, "disk": "ssd"}))
        yield server


def _state(pki: Pki, tmp_path: Path, api: FakeApiServer, *, max_age: float = 60.0) -> app.State:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "policies.yaml").write_text(POLICIES)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    config = app.ServerConfig(policies=(folder,), tls_cert=pki.cert, tls_key=pki.key, reload_interval=3600,
                              cluster=cluster_config.load(str(kubeconfig)), cluster_view_max_age=max_age)
    return app.State(config)


async def _review(client: Client, obj: dict[str, Any], namespace: str = "shop") -> dict[str, Any]:
    resp = await client.post("/mutate", json=admission_review(obj, namespace=namespace))
    assert resp.status == 200
    response: dict[str, Any] = (await resp.json())["response"]
    return response


async def _served(aiohttp_client: Callable[..., Awaitable[Client]], state: app.State) -> Client:
    client = await aiohttp_client(app.make_app(state))
    assert state.cache is not None
    await until(lambda: state.cluster_view() is not None)
    return client


async def test_a_namespace_relabelled_while_serving_is_seen_by_the_next_review(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path, api: FakeApiServer
) -> None:
    state = _state(pki, tmp_path, api)
    client = await _served(aiohttp_client, state)
    assert "patch" in await _review(client, deployment("web", namespace="shop"))
    api.patch_object("Namespace", "shop", {"metadata": {"labels": {"env": "dev"}}})
    await until(lambda: state.cluster_view() is not None and state.cluster_view().namespace_labels("shop") == {"env": "dev"})  # type: ignore[union-attr]
    assert "patch" not in await _review(client, deployment("web", namespace="shop"))


async def test_a_priority_class_created_after_a_review_warned_about_it_is_then_known(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path, api: FakeApiServer
) -> None:
    state = _state(pki, tmp_path, api)
    client = await _served(aiohttp_client, state)
    first = await _review(client, deployment("gold-api"))
    assert "gold: PriorityClass gold does not exist in the cluster" in first["warnings"]
    api.apply_object({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": "gold"}, "value": 1000})
    await until(lambda: state.cache is not None and state.cache.priority_class("gold") is not None)
    second = await _review(client, deployment("gold-api"))
    assert not any("PriorityClass gold" in w for w in second.get("warnings", []))


async def test_a_cordoned_node_changes_the_rollout_decision(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path, api: FakeApiServer
) -> None:
    # Two replicas, three nodes: a spare node for a surge pod (rule 2). Cordon one: none left.
    state = _state(pki, tmp_path, api)
    client = await _served(aiohttp_client, state)
    web = deployment("spread-web", replicas=2)
    first = (await _review(client, web))["warnings"]
    assert any("maxSurge 1, maxUnavailable 0 (more eligible" in w for w in first), first
    api.patch_object("Node", "c", {"spec": {"unschedulable": True}})
    await until(lambda: any(n["metadata"]["name"] == "c" and n["spec"].get("unschedulable")
                            for n in state.cache.nodes()))  # type: ignore[union-attr]
    warnings = (await _review(client, deployment("spread-web", replicas=2)))["warnings"]
    assert any("maxSurge 0, maxUnavailable 1 (required self anti-affinity, not enough" in w for w in warnings)


async def test_reviews_are_answered_and_the_server_stays_ready_while_the_api_server_is_gone(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path, api: FakeApiServer
) -> None:
    state = _state(pki, tmp_path, api, max_age=0.3)
    client = await _served(aiohttp_client, state)
    api.go_away("refuse")
    await until(lambda: state.cluster_view() is None)  # stale past the bound: checks skipped
    answer = await asyncio.wait_for(_review(client, deployment("web", namespace="shop")), 2)
    assert answer["allowed"] is True
    assert any("no cluster view" in w for w in answer["warnings"])  # the namespaceSelector note
    assert (await client.get("/readyz")).status == 200  # readiness never depends on the control plane


async def test_before_the_first_sync_the_checks_are_skipped_and_the_server_is_ready(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path, api: FakeApiServer
) -> None:
    api.go_away("refuse")
    state = _state(pki, tmp_path, api)
    client = await aiohttp_client(app.make_app(state))
    assert state.cluster_view() is None
    assert (await client.get("/readyz")).status == 200
    answer = await _review(client, deployment("web", namespace="shop"))
    assert answer["allowed"] is True and "patch" not in answer


async def test_the_cluster_view_is_exported_per_resource(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path, api: FakeApiServer
) -> None:
    state = _state(pki, tmp_path, api)
    await _served(aiohttp_client, state)
    sample = state.metrics.registry.get_sample_value
    assert sample("placement_webhook_cluster_view_synced", {"resource": "nodes"}) == 1.0
    assert sample("placement_webhook_cluster_view_events_total", {"resource": "namespaces"}) is not None
    assert sample("placement_webhook_cluster_view_seconds_since_last_event", {"resource": "priorityclasses"}) is not None


async def test_the_match_label_keys_override_wins_over_the_servers_version(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path, api: FakeApiServer
) -> None:
    # The fake serves 1.30, where the feature is off by default; a cluster that turned the gate on
    # says so, and required spread is then scoped to one revision instead of giving up the surge.
    state = _state(pki, tmp_path, api)
    state = app.State(dataclasses.replace(state.config, match_label_keys=True))
    client = await _served(aiohttp_client, state)
    assert state.cache is not None and state.cache.supports_match_label_keys() is True
    api.patch_object("Node", "c", {"spec": {"unschedulable": True}})
    await until(lambda: any(n["metadata"]["name"] == "c" and n["spec"].get("unschedulable")
                            for n in state.cache.nodes()))  # type: ignore[union-attr]
    answer = await _review(client, deployment("spread-web", replicas=2))
    assert any("maxSurge 1, maxUnavailable 0" in w for w in answer["warnings"]), answer["warnings"]
