"""The server with policies from the cluster (``serve --policies-from cluster`` and
``files,cluster``) on the fake API server: objects assembled into the set after each burst of
changes, one refused by the loader left out and reported while the others serve, a name a file
and an object both define in force nowhere, and the status written by the holder of the Lease
only, only when it changes, retried when a write fails."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.cluster.conftest import until
from tests.kit import policy_objects as objects
from tests.kit.fakeapi import FakeApiServer
from tests.kit.policies import GOLD_FILE
from tests.kit.policies import GOLD_SPEC as GOLD
from tests.kit.policies import TYPO_SPEC as TYPO
from tests.kit.reviews import admission_review
from tests.kit.server import Pki
from tests.kit.workloads import deployment
from webhook.cluster.client import Client as ApiClient
from webhook.cluster.config import ClusterConfig
from webhook.server import app
from webhook.server import policies as policy_sources
from webhook.server.config import ServerConfig

Client = TestClient  # type: ignore[type-arg]
Served = Callable[..., Awaitable[Client]]



@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer("1.20.2", placement_policies=True, bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
async def writer(api: FakeApiServer) -> AsyncIterator[ApiClient]:
    """A user's client: kubectl applying PlacementPolicies."""
    client = ApiClient(ClusterConfig(api.url))
    yield client
    await client.close()


def _state(pki: Pki, api: FakeApiServer, *, sources: tuple[str, ...] = ("cluster",), policies: tuple[Path, ...] = (),
           interval: float = 0.2) -> app.State:
    config = ServerConfig(policies=policies, tls_cert=pki.cert, tls_key=pki.key, reload_interval=3600,
                          cluster=ClusterConfig(api.url), cluster_view=False, policies_from=sources,
                          status_interval=interval)
    return app.State(config)


async def _serve(aiohttp_client: Served, state: app.State) -> Client:
    client = await aiohttp_client(app.make_app(state))
    await until(lambda: state.policies.ready, timeout=5.0, what="the first list of PlacementPolicies")
    return client


async def _admitted(client: Client, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    resp = await client.post("/mutate", json=admission_review(obj, dry_run=dry_run))
    assert resp.status == 200
    answer: dict[str, Any] = (await resp.json())["response"]
    return answer


def _status(api: FakeApiServer, name: str) -> dict[str, Any]:
    found = api.get_object("PlacementPolicy", name) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def _ready(api: FakeApiServer, name: str) -> dict[str, Any]:
    conditions = _status(api, name).get("conditions") or [{}]
    ready: dict[str, Any] = conditions[0]
    return ready


def _in_force(state: app.State) -> tuple[str, ...]:
    return state.policy_set().names


# --- the set ------------------------------------------------------------------------------------


async def test_the_server_is_not_ready_until_the_policies_are_listed_and_then_ready_with_none(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer) -> None:
    api.fail_next("GET", "placementpolicies", 503, times=1)
    state = _state(pki, api)
    assert "the cluster's PlacementPolicies not listed yet" in state.not_ready()
    client = await _serve(aiohttp_client, state)
    assert (await client.get("/readyz")).status == 200 and _in_force(state) == ()


async def test_without_the_crd_the_server_is_not_ready_and_says_why(aiohttp_client: Served, pki: Pki) -> None:
    async with FakeApiServer("1.20.2") as bare:
        state = _state(pki, bare)
        client = await aiohttp_client(app.make_app(state))
        await until(lambda: "404" in " ".join(state.not_ready()), what="the informer's 404")
        resp = await client.get("/readyz")
        assert resp.status == 503
        assert (await resp.json())["error"] == (
            "not ready: the cluster's PlacementPolicies not listed yet (404: the API server does not serve "
            "placementpolicies.placement.novasphere.dev: is its CustomResourceDefinition installed?)")
        await client.close()


async def test_a_policy_created_in_the_cluster_is_applied_at_admission(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient) -> None:
    state = _state(pki, api)
    client = await _serve(aiohttp_client, state)
    await objects.create(writer, "ssd")
    await until(lambda: _in_force(state) == ("ssd",), what="the new policy in force")
    assert (await _admitted(client, deployment("web")))["patch"]


async def test_a_burst_of_edits_is_in_force_after_fewer_assemblies_than_edits(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient,
        caplog: pytest.LogCaptureFixture) -> None:
    await objects.create(writer, "ssd")
    state = _state(pki, api)
    await _serve(aiohttp_client, state)
    caplog.set_level(logging.INFO, logger="webhook.server.app")
    caplog.clear()
    for order in range(1, 6):
        await objects.edit(writer, "ssd", {**objects.SSD_SPEC, "order": order})
    await until(lambda: state.policy_set().policies[0].order == 5, what="the last edit in force")
    assemblies = [r for r in caplog.records if r.getMessage() == "policy set loaded"]
    assert 1 <= len(assemblies) < 5


async def test_a_deleted_policy_leaves_the_set(aiohttp_client: Served, pki: Pki, api: FakeApiServer,
                                               writer: ApiClient) -> None:
    await objects.create(writer, "ssd")
    await objects.create(writer, "gold", GOLD)
    state = _state(pki, api)
    await _serve(aiohttp_client, state)
    assert _in_force(state) == ("gold", "ssd")
    await objects.delete(writer, "gold")
    await until(lambda: _in_force(state) == ("ssd",), what="the deletion in force")


async def test_an_object_the_loader_refuses_is_left_out_logged_and_reported_and_the_others_serve(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="webhook.server.app")
    await objects.create(writer, "ssd")
    await objects.create(writer, "typo", TYPO)
    state = _state(pki, api)
    client = await _serve(aiohttp_client, state)
    assert _in_force(state) == ("ssd",)
    assert (await _admitted(client, deployment("web")))["patch"]
    (logged,) = [r for r in caplog.records if "typo" in r.getMessage()]
    assert logged.getMessage() == ("PlacementPolicy typo is not in force (Invalid): spec.match.kinds[0]: "
                                   "unknown kind 'Deploymnet'; did you mean \"Deployment\"?")
    await until(lambda: _ready(api, "typo").get("status") == "False", what="typo's status")
    assert _ready(api, "typo")["reason"] == "Invalid"
    assert _ready(api, "typo")["message"] == "spec.match.kinds[0]: unknown kind 'Deploymnet'; did you mean \"Deployment\"?"
    assert state.metrics.policies_left_out._value.get() == 1


async def test_fixing_a_refused_object_puts_it_in_force(aiohttp_client: Served, pki: Pki, api: FakeApiServer,
                                                       writer: ApiClient) -> None:
    await objects.create(writer, "typo", TYPO)
    state = _state(pki, api)
    await _serve(aiohttp_client, state)
    await objects.edit(writer, "typo", objects.SSD_SPEC)
    await until(lambda: _in_force(state) == ("typo",), what="the fixed policy in force")
    await until(lambda: _ready(api, "typo").get("status") == "True", what="its status")
    assert _status(api, "typo")["observedGeneration"] == 2


async def test_files_and_cluster_serve_together_and_a_name_defined_twice_is_in_force_nowhere(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient, tmp_path: Path) -> None:
    (tmp_path / "gold.yaml").write_text(GOLD_FILE)
    await objects.create(writer, "ssd")
    await objects.create(writer, "gold", {**GOLD, "scheduling": {"priorityClassName": "silver"}})
    state = _state(pki, api, sources=("files", "cluster"), policies=(tmp_path,))
    await _serve(aiohttp_client, state)
    assert _in_force(state) == ("ssd",)
    await until(lambda: _ready(api, "gold").get("reason") == "Duplicate", what="gold's status")
    assert f"is also defined at {tmp_path / 'gold.yaml'}:4" in _ready(api, "gold")["message"]
    await objects.delete(writer, "gold")
    await until(lambda: _in_force(state) == ("gold", "ssd"), what="the file's gold in force once the object went")


async def test_a_file_change_is_assembled_with_the_objects_in_force(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient, tmp_path: Path) -> None:
    await objects.create(writer, "ssd")
    state = _state(pki, api, sources=("files", "cluster"), policies=(tmp_path,))
    (tmp_path / "gold.yaml").write_text(GOLD_FILE.replace("name: gold", "name: bronze"))
    await _serve(aiohttp_client, state)
    assert _in_force(state) == ("bronze", "ssd")
    (tmp_path / "gold.yaml").write_text(GOLD_FILE)
    await state.reload_policies()
    assert _in_force(state) == ("gold", "ssd")


async def test_with_files_that_never_loaded_the_objects_alone_do_not_make_the_server_ready(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient, tmp_path: Path) -> None:
    await objects.create(writer, "ssd")
    (tmp_path / "gold.yaml").write_text(GOLD_FILE.replace("priorityClassName: gold", "priorityClassName: [gold]"))
    state = _state(pki, api, sources=("files", "cluster"), policies=(tmp_path,))
    client = await aiohttp_client(app.make_app(state))
    await until(lambda: state.policies.objects_listed, what="the first list of PlacementPolicies")
    assert state.not_ready() == ["no valid policy set loaded"] and (await client.get("/readyz")).status == 503
    (tmp_path / "gold.yaml").write_text(GOLD_FILE)
    await state.reload_policies()
    assert _in_force(state) == ("gold", "ssd") and state.not_ready() == []


async def test_without_the_cluster_view_the_server_watches_nothing_but_its_policies_and_its_lease(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient) -> None:
    await objects.create(writer, "ssd")
    state = _state(pki, api)
    await _serve(aiohttp_client, state)
    await until(lambda: bool(_status(api, "ssd")), what="the status")
    assert state.cluster_view() is None
    paths = {r.path.split("?")[0] for r in api.requests if not r.path.startswith("/version")}
    assert all("placementpolicies" in p or "/leases" in p for p in paths), paths


# --- the status ---------------------------------------------------------------------------------


async def test_status_observes_each_generation_and_counts_the_objects_changed_but_not_dry_runs(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient) -> None:
    await objects.create(writer, "ssd")
    state = _state(pki, api)
    client = await _serve(aiohttp_client, state)
    await until(lambda: _ready(api, "ssd").get("status") == "True", what="ssd Ready")
    assert _status(api, "ssd")["observedGeneration"] == 1 and _status(api, "ssd")["changedObjects"] == 0
    for name in ("a", "b"):
        await _admitted(client, deployment(name))
    await _admitted(client, deployment("c"), dry_run=True)
    await until(lambda: _status(api, "ssd").get("changedObjects") == 2, what="two objects counted")
    await objects.edit(writer, "ssd", {**objects.SSD_SPEC, "order": 1})
    await until(lambda: _status(api, "ssd").get("observedGeneration") == 2, what="generation 2 observed")
    assert _status(api, "ssd")["changedObjects"] == 0  # counted since it was loaded


async def test_the_status_is_written_with_the_field_manager_placement_webhook_to_the_status_subresource(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient) -> None:
    await objects.create(writer, "ssd")
    state = _state(pki, api)
    await _serve(aiohttp_client, state)
    await until(lambda: bool(_status(api, "ssd")), what="the status")
    (write,) = [r for r in api.requests if r.method == "PATCH" and r.path.endswith("/status")]
    assert write.path == f"{policy_sources.PATH}/ssd/status"
    assert write.query["fieldManager"] == "placement-webhook"
    assert write.content_type == "application/merge-patch+json"
    stored = api.get_object("PlacementPolicy", "ssd") or {}
    assert {m["manager"] for m in stored["metadata"]["managedFields"] if m.get("subresource") == "status"} == {
        "placement-webhook"}


async def test_an_unchanged_status_is_not_written_again(aiohttp_client: Served, pki: Pki, api: FakeApiServer,
                                                        writer: ApiClient) -> None:
    await objects.create(writer, "ssd")
    state = _state(pki, api, interval=3600)
    await _serve(aiohttp_client, state)
    await until(lambda: bool(_status(api, "ssd")), what="the status")
    assert state.status is not None
    await until(lambda: state.status is not None and state.status.informer.get("ssd", ).get("status") is not None,  # type: ignore[union-attr]
                what="the informer to see the status written")
    api.clear_requests()
    assert await state.status.write_all() == 0
    assert not [r for r in api.requests if r.method == "PATCH"]


async def test_of_two_replicas_only_the_holder_of_the_lease_writes_status(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient) -> None:
    await objects.create(writer, "ssd")
    first, second = _state(pki, api), _state(pki, api)
    await _serve(aiohttp_client, first)
    await until(lambda: bool(_status(api, "ssd")), what="the first replica's write")
    await _serve(aiohttp_client, second)
    await objects.create(writer, "gold", GOLD)
    await until(lambda: bool(_status(api, "gold")) and second.policies.ready and "gold" in _in_force(second),
                what="gold's status, and gold in force on both")
    writes = lambda state: state.metrics.policy_status_writes.labels("success")._value.get()  # noqa: E731
    assert writes(first) == 2 and writes(second) == 0


async def test_a_failed_status_write_is_retried_and_the_server_keeps_serving(
        aiohttp_client: Served, pki: Pki, api: FakeApiServer, writer: ApiClient,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="webhook.server.status")
    api.fail_next("PATCH", r"placementpolicies/ssd/status$", 500, times=2, message="etcd is down")
    await objects.create(writer, "ssd")
    state = _state(pki, api)
    client = await _serve(aiohttp_client, state)
    assert (await _admitted(client, deployment("web")))["patch"]
    await until(lambda: bool(_status(api, "ssd")), timeout=10.0, what="the status, after two failures")
    assert state.metrics.policy_status_writes.labels("failure")._value.get() == 2
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "status of PlacementPolicy ssd not written, retrying in" in warned[0]
    assert "etcd is down" in warned[0]


# --- the debounce -------------------------------------------------------------------------------


class Clock:
    """Time that moves only when something sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


async def _run_follow(clock: Clock, changes: asyncio.Event, during: Callable[[], None] | None = None) -> list[float]:
    """Run ``follow`` until its first assembly; the times it assembled at."""
    assembled: list[float] = []
    done = asyncio.Event()

    async def assemble() -> None:
        assembled.append(clock.now)
        done.set()

    async def sleep(seconds: float) -> None:
        await clock.sleep(seconds)
        if during is not None:
            during()

    task = asyncio.create_task(policy_sources.follow(changes, assemble, quiet=0.2, longest=1.0, clock=clock, sleep=sleep))
    await asyncio.wait_for(done.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return assembled


async def test_a_single_change_is_assembled_once_quiet_for_the_quiet_time() -> None:
    clock, changes = Clock(), asyncio.Event()
    changes.set()
    assert await _run_follow(clock, changes) == [pytest.approx(0.2)]


async def test_a_burst_is_assembled_once_after_it_ends() -> None:
    clock, changes = Clock(), asyncio.Event()
    changes.set()
    edits = iter(range(2))
    assert await _run_follow(clock, changes, during=lambda: next(edits, None) is not None and changes.set()) == [
        pytest.approx(0.6)]


async def test_a_burst_that_never_ends_is_assembled_at_the_longest_wait() -> None:
    clock, changes = Clock(), asyncio.Event()
    changes.set()
    assert await _run_follow(clock, changes, during=changes.set) == [pytest.approx(1.0)]
