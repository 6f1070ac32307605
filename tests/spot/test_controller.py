"""The spot controller against the fake API server: cordon, evict under budgets, undo false alarms, resume."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.cluster.conftest import make_cache, until
from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import pdb, pod
from webhook.cluster.cache import NODES
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.spot.config import SpotConfig
from webhook.spot.controller import CORDONED_BY, DRAIN_STARTED, SpotController, SpotSettings, plan
from webhook.spot.nodes import node_projection

SPOT_ITN = {"key": "aws-node-termination-handler/spot-itn", "value": "event-1", "effect": "NoSchedule"}
OWNER_RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs-1", "controller": True}
OWNER_DS = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-1", "controller": True}


def node(name: str, kind: str = "spot", *, taints: list[dict[str, Any]] | None = None,
         unschedulable: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"node.kubernetes.io/capacity": kind}},
            "spec": spec, "status": {"allocatable": {"cpu": "4"}}}


def web(name: str, on: str) -> dict[str, Any]:
    return pod(name, "shop", node_name=on, labels={"app": "web"}, owner=OWNER_RS)


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer("1.31.0", bookmark_interval=0.2, pdb_controller=True) as srv:
        srv.load([node("spot-1"), node("od-1", "on-demand"), web("web-1", "spot-1"), web("web-2", "spot-1"),
                  web("web-3", "spot-1"), pod("agent-x", "kube-system", node_name="spot-1", owner=OWNER_DS),
                  pdb("web", "shop", match={"app": "web"}, min_available=2)])
        srv.sync_pdbs()
        yield srv


class Running:
    """A controller on its own client and cache, run until ``stop``."""

    def __init__(self, server: FakeApiServer, **settings: Any) -> None:
        self.client = Client(ClusterConfig(server.url), request_timeout=2.0)
        self.config = SpotConfig()
        self.cache = make_cache(self.client, projections={NODES: node_projection(self.config,
                                                                                 (DRAIN_STARTED, CORDONED_BY))})
        defaults: dict[str, Any] = {"drain_timeout": 5.0, "backoff": 0.05, "max_backoff": 0.2}
        self.controller = SpotController(self.client, self.cache, self.config, SpotSettings(**{**defaults, **settings}))
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Running:
        await self.cache.start()
        assert await self.cache.wait_synced(3.0)
        self.task = asyncio.create_task(self.controller.run(self.stop, resync=0.2))
        return self

    async def close(self) -> None:
        self.stop.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 5.0)
        await asyncio.wait_for(self.cache.stop(), 3.0)
        await self.client.close()


@pytest.fixture
async def running(server: FakeApiServer) -> AsyncIterator[Callable[..., Any]]:
    started: list[Running] = []

    async def start(**settings: Any) -> Running:
        one = await Running(server, **settings).start()
        started.append(one)
        return one

    yield start
    for one in started:
        await one.close()


def get(server: FakeApiServer, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    found = server.get_object(kind, name, namespace)
    return found if found is not None else {}


def taint(server: FakeApiServer, name: str, taints: list[dict[str, Any]]) -> None:
    server.patch_object("Node", name, {"spec": {"taints": taints}})


def replace_evicted(server: FakeApiServer, names: list[str]) -> Callable[[], None]:
    """Play the ReplicaSet controller: each evicted web pod comes back on the on-demand node."""
    def step() -> None:
        for name in names:
            if server.get_object("Pod", name, "shop") is None and server.get_object("Pod", f"{name}-new", "shop") is None:
                server.apply_object(web(f"{name}-new", "od-1"))
                server.sync_pdbs()
    return step


async def evicted_with_replacements(server: FakeApiServer, names: tuple[str, ...] = ("web-1", "web-2", "web-3")) -> None:
    """Play the ReplicaSet controller until every one of ``names`` has been evicted (10 s at most)."""
    replace = replace_evicted(server, list(names))
    for _ in range(200):
        replace()
        if all(server.get_object("Pod", n, "shop") is None for n in names):
            break
        await asyncio.sleep(0.05)
    assert all(server.get_object("Pod", n, "shop") is None for n in names)


def events(server: FakeApiServer, reason: str) -> list[dict[str, Any]]:
    return [e for ns in ("default", "shop", "kube-system") for e in server.list_objects("Event", ns)
            if e.get("reason") == reason]


async def test_a_reclaim_taint_cordons_the_node_and_evicts_its_pods_within_the_budget(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    controller = (await running()).controller
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: get(server, "Node", "spot-1")["spec"].get("unschedulable") is True, what="the cordon")
    annotations = get(server, "Node", "spot-1")["metadata"]["annotations"]
    assert annotations[CORDONED_BY] == "spot-controller" and DRAIN_STARTED in annotations
    # The budget (minAvailable 2 of 3) allows one eviction at a time; each replacement lets the next go.
    await evicted_with_replacements(server)
    assert server.get_object("Pod", "agent-x", "kube-system") is not None, "DaemonSet pods are left alone"
    evictions = [r for r in server.requests if r.method == "POST" and r.path.endswith("/eviction")]
    assert {r.path.split("/")[-2] for r in evictions} == {"web-1", "web-2", "web-3"}
    assert not [r for r in server.requests if r.method == "DELETE" and "/pods/" in r.path], "only evictions"
    await until(lambda: bool(events(server, "Drained")), what="the Drained event")
    assert controller.metrics.evictions.labels("blocked")._value.get() >= 1, "the budget made it wait"
    assert events(server, "SpotReclaim")[0]["involvedObject"]["kind"] == "Node"
    assert {e["involvedObject"]["name"] for e in events(server, "Evicted")} == {"web-1", "web-2", "web-3"}


async def test_at_the_deadline_the_pods_a_budget_kept_are_reported(server: FakeApiServer,
                                                                    running: Callable[..., Any]) -> None:
    controller = (await running(drain_timeout=1.0)).controller
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: bool(events(server, "DrainTimeout")), timeout=5.0, what="the deadline")
    (timeout,) = events(server, "DrainTimeout")
    assert "kept by a PodDisruptionBudget" in timeout["message"]
    assert sum(f"shop/web-{i}" in timeout["message"] for i in (1, 2, 3)) == 2, "one went, two were kept"
    assert controller.metrics.blocked._value.get() == 2


async def test_a_signal_that_goes_away_is_a_false_alarm_and_the_cordon_is_undone(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    await running(drain_timeout=30.0)
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: get(server, "Node", "spot-1")["spec"].get("unschedulable") is True, what="the cordon")
    taint(server, "spot-1", [])
    await until(lambda: not get(server, "Node", "spot-1")["spec"].get("unschedulable"), what="the uncordon")
    assert not (get(server, "Node", "spot-1")["metadata"].get("annotations") or {}).get(DRAIN_STARTED)
    await until(lambda: bool(events(server, "SpotReclaimCancelled")), what="the event")


async def test_a_node_someone_else_cordoned_stays_cordoned_after_a_false_alarm(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.patch_object("Node", "spot-1", {"spec": {"unschedulable": True}})
    await running(drain_timeout=30.0)
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: DRAIN_STARTED in (get(server, "Node", "spot-1")["metadata"].get("annotations") or {}),
                what="the drain to start")
    assert CORDONED_BY not in get(server, "Node", "spot-1")["metadata"]["annotations"]
    taint(server, "spot-1", [])
    await until(lambda: not (get(server, "Node", "spot-1")["metadata"].get("annotations") or {}).get(DRAIN_STARTED),
                what="the false alarm to be handled")
    assert get(server, "Node", "spot-1")["spec"]["unschedulable"] is True


async def test_a_restarted_controller_resumes_the_drain_without_cordoning_again(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    first = await running(drain_timeout=30.0)
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: server.get_object("Pod", "web-1", "shop") is None
                or server.get_object("Pod", "web-2", "shop") is None
                or server.get_object("Pod", "web-3", "shop") is None, what="a first eviction")
    started = get(server, "Node", "spot-1")["metadata"]["annotations"][DRAIN_STARTED]
    await first.close()
    server.clear_requests()
    second = await running(drain_timeout=30.0)
    await until(lambda: "spot-1" in second.controller.drains, what="the drain to resume")
    assert get(server, "Node", "spot-1")["metadata"]["annotations"][DRAIN_STARTED] == started
    node_patches = [r for r in server.requests if r.method == "PATCH" and r.path.endswith("/nodes/spot-1")]
    assert node_patches == [], "it neither cordons again nor restarts the clock"


async def test_a_pod_under_two_budgets_is_reported_not_retried_and_not_deleted(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.apply_object(pdb("web-too", "shop", match={"app": "web"}, max_unavailable=1))
    server.sync_pdbs()
    controller = (await running(drain_timeout=2.0)).controller
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: bool(events(server, "DrainTimeout")), timeout=5.0, what="the end of the drain")
    assert "more than one PodDisruptionBudget" in events(server, "DrainTimeout")[0]["message"]
    assert all(server.get_object("Pod", f"web-{i}", "shop") is not None for i in (1, 2, 3))
    evictions = [r for r in server.requests if r.path.endswith("/eviction")]
    assert len(evictions) == 3, "each tried once"
    assert controller.metrics.evictions.labels("failed")._value.get() == 3


async def test_excluded_namespaces_and_terminating_pods_are_left_alone(server: FakeApiServer,
                                                                         running: Callable[..., Any]) -> None:
    await running(exclude_namespaces=("shop",))
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: bool(events(server, "Drained")), what="the drain to end")
    assert not [r for r in server.requests if r.path.endswith("/eviction")]


async def test_a_dry_run_plan_says_what_it_would_do_and_writes_nothing(server: FakeApiServer) -> None:
    taint(server, "spot-1", [SPOT_ITN])
    one = Running(server, dry_run=True)
    await one.cache.start()
    try:
        assert await one.cache.wait_synced(3.0)
        lines = plan(one.controller)
    finally:
        await one.cache.stop()
        await one.client.close()
    assert lines[0] == "node spot-1: taint aws-node-termination-handler/spot-itn: cordon it, then evict:"
    assert "  kube-system/agent-x (skipped: a DaemonSet pod)" in lines and "  shop/web-1" in lines
    assert not [r for r in server.requests if r.method in ("PATCH", "POST")]


async def test_the_api_server_going_away_mid_drain_is_survived(server: FakeApiServer,
                                                                running: Callable[..., Any]) -> None:
    await running(drain_timeout=10.0)
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: get(server, "Node", "spot-1")["spec"].get("unschedulable") is True, what="the cordon")
    server.go_away("unavailable")
    await asyncio.sleep(0.5)
    server.come_back()
    await evicted_with_replacements(server)


async def test_two_controllers_at_once_evict_each_pod_and_never_delete_one(server: FakeApiServer,
                                                                             running: Callable[..., Any]) -> None:
    first, second = await running(), await running()
    taint(server, "spot-1", [SPOT_ITN])
    await evicted_with_replacements(server)
    assert not [r for r in server.requests if r.method == "DELETE" and "/pods/" in r.path]
    evicted = first.controller.metrics.evictions.labels("evicted")._value.get() + \
        second.controller.metrics.evictions.labels("evicted")._value.get()
    assert evicted == 3, "each pod evicted once; the other controller's tries were blocked or found it gone"


async def test_a_node_without_a_capacity_label_is_drained_on_a_taint_but_not_for_being_not_ready(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.apply_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare", "labels": {}},
                         "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "Unknown",
                                                                "lastTransitionTime": "2020-01-01T00:00:00Z"}]}})
    controller = (await running()).controller
    await asyncio.sleep(0.5)
    assert "bare" not in controller.drains, "not known to be spot: NotReady alone is not a reclaim"
    taint(server, "bare", [SPOT_ITN])
    await until(lambda: "bare" in controller.drains or bool(events(server, "Drained")), what="the taint to count")


async def test_a_mirror_pod_is_left_alone_and_a_blocked_pod_is_told_once(server: FakeApiServer,
                                                                           running: Callable[..., Any]) -> None:
    mirror = pod("etcd-spot-1", "kube-system", node_name="spot-1")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    server.apply_object(mirror)
    await running(drain_timeout=1.5)
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: bool(events(server, "DrainTimeout")), timeout=5.0, what="the deadline")
    assert not [r for r in server.requests if r.path.endswith("/etcd-spot-1/eviction")]
    blocked = [e["involvedObject"]["name"] for e in events(server, "EvictionBlocked")]
    assert sorted(blocked) == sorted(set(blocked)) and len(blocked) == 2, "one Event per blocked pod"
