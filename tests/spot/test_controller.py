"""The spot controller against the fake API server: cordon, evict under budgets, undo false alarms, resume."""
from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.cluster.conftest import make_cache, until
from tests.kit.clock import FakeClock
from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import pdb, pod
from webhook.cli import build_parser
from webhook.cluster.cache import NODES
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.kube.times import format_time, timestamp
from webhook.spot.config import SpotConfig
from webhook.spot.controller import CORDONED_BY, DRAIN_STARTED, SpotController, SpotSettings, plan
from webhook.spot.drain import SYSTEM_CLOCK, Clock
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
    """A controller on its own client and cache, run until ``stop``; on the real clock unless
    given one (a ``FakeClock`` moves only when the test says)."""

    def __init__(self, server: FakeApiServer, *, clock: Clock = SYSTEM_CLOCK, resync: float = 0.2,
                 config: SpotConfig | None = None, **settings: Any) -> None:
        self.client = Client(ClusterConfig(server.url), request_timeout=2.0)
        self.config = config or SpotConfig()
        self.cache = make_cache(self.client, projections={NODES: node_projection(self.config,
                                                                                 (DRAIN_STARTED, CORDONED_BY))})
        defaults: dict[str, Any] = {"drain_timeout": 5.0, "backoff": 0.05, "max_backoff": 0.2}
        self.controller = SpotController(self.client, self.cache, self.config, SpotSettings(**{**defaults, **settings}),
                                         clock=clock)
        self.resync = resync
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Running:
        await self.cache.start()
        assert await self.cache.wait_synced(3.0)
        self.task = asyncio.create_task(self.controller.run(self.stop, resync=self.resync))
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


async def kept_two(server: FakeApiServer, clock: FakeClock, *, backoff: float = 0.05) -> None:
    """Wait for the budget (one eviction of the three web pods) to refuse the two others. One
    eviction per controller is in flight at a time: after the first is evicted the second is
    refused, and the third, seeing its sibling refused, waits with it instead of asking; at its
    backoff on ``clock`` it asks and is refused too."""
    await until(lambda: len(events(server, "EvictionBlocked")) == 1, what="the budget to refuse a pod")
    clock.advance(backoff)
    await until(lambda: len(events(server, "EvictionBlocked")) == 2, what="the budget to keep two pods")


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
    clock = FakeClock()
    controller = (await running(drain_timeout=3600.0, clock=clock)).controller
    taint(server, "spot-1", [SPOT_ITN])
    await kept_two(server, clock)
    assert not events(server, "DrainTimeout") and "spot-1" in controller.drains
    clock.advance(3600.0)  # an hour passes in no time: the deadline is on the controller's clock
    await until(lambda: bool(events(server, "DrainTimeout")), what="the deadline")
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
    controller = (await running(drain_timeout=10.0)).controller
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: get(server, "Node", "spot-1")["spec"].get("unschedulable") is True, what="the cordon")
    server.go_away("unavailable")
    await until(lambda: controller.metrics.evictions.labels("retry")._value.get() >= 1,
                what="an eviction to meet the outage")
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
    await until(lambda: controller.rounds >= 1, what="a first look at every node")
    assert "bare" not in controller.drains, "not known to be spot: NotReady alone is not a reclaim"
    taint(server, "bare", [SPOT_ITN])
    await until(lambda: "bare" in controller.drains or bool(events(server, "Drained")), what="the taint to count")


async def test_a_mirror_pod_is_left_alone_and_a_blocked_pod_is_told_once(server: FakeApiServer,
                                                                           running: Callable[..., Any]) -> None:
    mirror = pod("etcd-spot-1", "kube-system", node_name="spot-1")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    server.apply_object(mirror)
    clock = FakeClock()
    await running(drain_timeout=60.0, clock=clock)
    taint(server, "spot-1", [SPOT_ITN])
    await kept_two(server, clock)
    for _ in range(5):  # their retries, at the backoff: refused again, and not told again
        tries = len([r for r in server.requests if r.path.endswith("/eviction")])
        clock.advance(0.2)
        await until(lambda: len([r for r in server.requests if r.path.endswith("/eviction")]) >= tries + 2,
                    what="both blocked pods tried again")
    clock.advance(60.0)
    await until(lambda: bool(events(server, "DrainTimeout")), what="the deadline")
    assert not [r for r in server.requests if r.path.endswith("/etcd-spot-1/eviction")]
    blocked = [e["involvedObject"]["name"] for e in events(server, "EvictionBlocked")]
    assert sorted(blocked) == sorted(set(blocked)) and len(blocked) == 2, "one Event per blocked pod"


OWNER_API = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api-xyz", "uid": "rs-2", "controller": True}


def api_pods(count: int, on: str = "spot-1") -> list[dict[str, Any]]:
    """Pods of a second ReplicaSet, under no budget."""
    return [pod(f"api-{i}", "shop", node_name=on, labels={"app": "api"}, owner=OWNER_API) for i in range(count)]


def evictions(server: FakeApiServer) -> list[str]:
    return [r.path.split("/")[-2] for r in server.requests if r.method == "POST" and r.path.endswith("/eviction")]


def lone_pods(count: int, on: str = "spot-1") -> list[dict[str, Any]]:
    """Pods of a ReplicaSet each, under no budget."""
    return [pod(f"api-{i}", "shop", node_name=on, labels={"app": "api"},
                owner={**OWNER_API, "name": f"api-{i}", "uid": f"rs-api-{i}"}) for i in range(count)]


async def test_evictions_run_in_parallel_but_never_more_at_once_than_the_bound(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.load(lone_pods(8))  # eight controllers: one eviction in flight for each at most
    server.latency = 0.05  # a round trip long enough for the evictions to overlap
    controller = (await running(parallel_evictions=3)).controller
    in_flight, most = 0, 0
    evict = controller.evictor.evict

    async def counted(one: Any) -> tuple[str, str]:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            return await evict(one)
        finally:
            in_flight -= 1

    controller.evictor.evict = counted  # type: ignore[method-assign]
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: all(server.get_object("Pod", f"api-{i}", "shop") is None for i in range(8)),
                what="the pods without a budget to go")
    assert most == 3, "three at once: in parallel, and no more than the bound"


async def test_a_slow_event_never_holds_up_an_eviction(server: FakeApiServer, running: Callable[..., Any]) -> None:
    controller = (await running()).controller
    gate = asyncio.Event()
    write = controller.events.client.create

    async def stuck(path: str, body: Any, **kwargs: Any) -> dict[str, Any]:
        await gate.wait()  # the API server takes its time over every Event
        return await write(path, body, **kwargs)

    controller.events.client = Client(controller.client.config)
    controller.events.client.create = stuck  # type: ignore[method-assign]
    taint(server, "spot-1", [SPOT_ITN])
    await evicted_with_replacements(server)  # every pod goes while not one Event is written
    assert not events(server, "SpotReclaim") and not events(server, "Evicted")
    gate.set()
    await until(lambda: len(events(server, "Evicted")) == 3, what="the Events, once the server takes them")
    await controller.events.client.close()


async def test_a_node_event_looks_at_that_node_alone(server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.load([node(f"spare-{i}", "on-demand") for i in range(5)])
    clock = FakeClock()  # no resync while the test looks: the time does not move
    controller = (await running(clock=clock)).controller
    await until(lambda: controller.rounds >= 1, what="the first round")
    looked: list[str] = []
    signal = controller.detector.signal

    def recorded(one: Any, now: float) -> Any:
        looked.append(one["metadata"]["name"])
        return signal(one, now)

    controller.detector.signal = recorded  # type: ignore[method-assign]
    rounds = controller.rounds
    server.patch_object("Node", "spare-3", {"metadata": {"labels": {"team": "b"}}})
    await until(lambda: controller.rounds > rounds, what="a round for the change")
    assert looked == ["spare-3"], "one node changed: one node looked at, not all eight"


async def test_the_drain_is_stamped_and_told_on_the_controllers_one_clock(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    clock = FakeClock(timestamp("2031-03-04T05:06:07Z") or 0.0)
    await running(clock=clock)
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: bool(events(server, "SpotReclaim")), what="the drain to start")
    assert get(server, "Node", "spot-1")["metadata"]["annotations"][DRAIN_STARTED] == "2031-03-04T05:06:07Z"
    assert events(server, "SpotReclaim")[0]["firstTimestamp"] == "2031-03-04T05:06:07Z"


async def test_a_restarted_controller_works_to_the_same_deadline(server: FakeApiServer,
                                                                 running: Callable[..., Any]) -> None:
    clock = FakeClock()
    first = await running(drain_timeout=600.0, clock=clock)
    taint(server, "spot-1", [SPOT_ITN])
    await kept_two(server, clock)
    deadline = first.controller.drains["spot-1"].deadline
    assert deadline == float(int(clock.now)) + 600.0
    await first.close()
    clock.advance(500.0)  # down for 500 s of the 600
    second = await running(drain_timeout=600.0, clock=clock)
    await until(lambda: "spot-1" in second.controller.drains, what="the drain to resume")
    assert second.controller.drains["spot-1"].deadline == deadline
    clock.advance(99.0)
    await until(lambda: second.controller.drains["spot-1"].pods is not None and clock.waiting >= 1,
                what="the resumed drain to wait on its pods")
    assert not events(server, "DrainTimeout")
    clock.advance(1.0)
    await until(lambda: bool(events(server, "DrainTimeout")), what="the deadline, 600 s after the first start")


async def test_a_not_ready_spot_node_is_drained_when_its_time_runs_out_with_no_event_to_wake_it(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    clock = FakeClock()
    since = format_time(datetime.datetime.fromtimestamp(clock.now - 60, datetime.UTC))
    server.patch_object("Node", "spot-1", {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "lastTransitionTime": since}]}})
    controller = (await running(clock=clock, resync=3600.0)).controller  # no resync to lean on
    await until(lambda: controller.rounds >= 1, what="a first look")
    assert "spot-1" not in controller.drains, "NotReady for 60 s of the 120 allowed"
    clock.advance(61.0)
    await until(lambda: "spot-1" in controller.drains, what="the node to count as reclaimed")
    assert controller.drains["spot-1"].signal.kind == "NOT_READY"


async def test_a_blocked_pod_is_tried_again_as_soon_as_a_pod_of_its_controller_is_ready(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    await running(clock=FakeClock(), backoff=3600.0, max_backoff=3600.0)  # its backoff never ends here
    taint(server, "spot-1", [SPOT_ITN])
    await evicted_with_replacements(server)  # each replacement, once Ready, lets the next one go


async def test_a_pod_whose_sibling_a_budget_refused_waits_with_it_instead_of_asking(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.load([*api_pods(5), pdb("api", "shop", match={"app": "api"}, min_available=4)])  # one at a time
    server.sync_pdbs()
    clock = FakeClock()
    controller = (await running(clock=clock, parallel_evictions=1)).controller
    taint(server, "spot-1", [SPOT_ITN])
    await until(lambda: sum(n.startswith("api-") for n in evictions(server)) >= 2, what="two api evictions")
    await until(lambda: clock.waiting >= 7, what="every pod not evicted to wait")
    api = [n for n in evictions(server) if n.startswith("api-")]
    assert len(api) == 2, "one evicted, one refused; the other three wait for a replacement instead of asking"
    assert controller.metrics.evictions.labels("blocked")._value.get() == 2  # the refused api pod and web's
    clock.advance(1.0)  # their own backoff: now every waiting pod asks
    await until(lambda: {n for n in evictions(server) if n.startswith("api-")} == {f"api-{i}" for i in range(5)},
                what="the others to ask")


async def test_a_providers_notice_is_the_deadline(server: FakeApiServer, running: Callable[..., Any]) -> None:
    clock = FakeClock()
    config = SpotConfig.model_validate({"reclaim": {"annotations": {"example.com/reclaim-at": ""}}})
    controller = (await running(clock=clock, config=config, drain_timeout=3600.0)).controller
    at = format_time(datetime.datetime.fromtimestamp(clock.now + 30, datetime.UTC))
    server.patch_object("Node", "spot-1", {"metadata": {"annotations": {"example.com/reclaim-at": at}}})
    await until(lambda: "spot-1" in controller.drains, what="the drain")
    assert controller.drains["spot-1"].deadline == timestamp(at), "the notice, not the hour of --drain-timeout"
    await kept_two(server, clock)
    clock.advance(30.0)
    await until(lambda: bool(events(server, "DrainTimeout")), what="the deadline the provider gave")


def test_the_bound_on_evictions_in_flight_is_a_flag_of_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    parse = build_parser().parse_args
    assert parse(["spot-controller"]).parallel_evictions == SpotSettings().parallel_evictions == 10
    assert parse(["spot-controller", "--parallel-evictions", "110"]).parallel_evictions == 110
    with pytest.raises(SystemExit):
        parse(["spot-controller", "--parallel-evictions", "0"])
    assert "--parallel-evictions: must be at least 1" in capsys.readouterr().err
