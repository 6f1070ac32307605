"""The rebalancer against the fake API server (a v1.20 one: policy/v1beta1 Evictions and budgets):
moves made through the Eviction API with an Event, refusals and faults counted and never raised,
each replacement followed to its node, mispredictions backed off, nothing decided unsynced.

``plan`` is a stub here, saying what a test needs it to say: these tests are about what the
controller does with decisions (decide's own tests are about making them); the restart tests
in test_restart.py run the real one."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.cluster.conftest import FAST, until
from tests.kit.clock import FakeClock
from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import pdb
from tests.rebalance.conftest import ON_DEMAND_NODE, SPOT_NODES, Stub, events, evictions, move, web
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.rebalance import component, decide
from webhook.rebalance.controller import Rebalancer, RebalanceSettings
from webhook.rebalance.model import Verdict
from webhook.spot.config import SpotConfig


class Running:
    """A rebalancer on its own client and view, on a fake clock, deciding with ``plan``."""

    def __init__(self, server: FakeApiServer, plan: Stub, clock: FakeClock, **settings: Any) -> None:
        self.client = Client(ClusterConfig(server.url), request_timeout=2.0)
        spot = SpotConfig()
        cache = component.view(self.client, spot, "policy/v1beta1", page_size=50, watch_timeout=5.0, backoff=FAST,
                               min_watch_duration=0.0, version_timeout=2.0)
        options = {"eviction_version": "policy/v1beta1", "interval": 50.0, "backoff": 2.0, "max_backoff": 8.0,
                   "follow_timeout": 600.0, **settings}
        self.rebalancer = Rebalancer(self.client, cache, spot,
                                     RebalanceSettings(policy=decide.Settings(max_evictions=2), **options),
                                     clock=clock, plan=plan)
        self.cache = cache

    @property
    def metrics(self) -> Any:
        return self.rebalancer.metrics

    async def start(self) -> Running:
        await self.cache.start()
        assert await self.cache.wait_synced(3.0)
        return self

    async def close(self) -> None:
        await self.rebalancer.events.close()
        await asyncio.wait_for(self.cache.stop(), 3.0)
        await self.client.close()


@pytest.fixture
async def running(server: FakeApiServer, clock: FakeClock) -> AsyncIterator[Callable[..., Any]]:
    started: list[Running] = []

    async def start(plan: Stub, *, synced: bool = True, **settings: Any) -> Running:
        one = Running(server, plan, clock, **settings)
        started.append(one)
        return await one.start() if synced else one

    yield start
    for one in started:
        await one.close()


def counted(metric: Any, *labels: str) -> float:
    return float((metric.labels(*labels) if labels else metric)._value.get())


async def test_a_move_is_an_eviction_and_an_event_saying_from_where_to_where_and_the_gain(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    one = await running(Stub([move(server, "web-1", to="spot-1")]))
    report = await one.rebalancer.run_pass()
    assert report.answers == {"shop/web-1": "evicted"}
    assert server.get_object("Pod", "web-1", "shop") is None
    (request,) = [r for r in server.requests if r.path.endswith("/eviction")]
    assert request.path == "/api/v1/namespaces/shop/pods/web-1/eviction"
    await until(lambda: bool(events(server, "Rebalanced")), what="the Rebalanced Event")
    (event,) = events(server, "Rebalanced")
    assert event["type"] == "Normal" and event["involvedObject"]["name"] == "web-1"
    assert event["source"]["component"] == "rebalance"
    assert event["message"] == "evicted from od-1 to move it: expected on spot-1, 0 -> 100 preference points (+100)"
    assert counted(one.metrics.evictions, "evicted") == 1 and counted(one.metrics.gain) == 100
    assert not [r for r in server.requests if r.method == "DELETE"], "only ever the Eviction API"


async def test_a_budget_refusal_a_pod_already_gone_and_a_fault_are_answers_counted_never_raised(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.apply_object(pdb("web", "shop", match={"app": "web"}, max_unavailable=0, api_version="policy/v1beta1"))
    server.sync_pdbs()
    plan = Stub([move(server, "web-1", to="spot-1"), move(server, "web-2", to="spot-1", owner="rs-2")])
    one = await running(plan)
    server.fail_next("POST", r"/pods/web-2/eviction$", 404, message='pods "web-2" not found')
    report = await one.rebalancer.run_pass()
    assert report.answers == {"shop/web-1": "blocked", "shop/web-2": "gone"}
    assert counted(one.metrics.evictions, "blocked") == 1 and counted(one.metrics.evictions, "gone") == 1
    plan.decisions = [move(server, "web-3", to="spot-1", owner="rs-3")]
    server.fail_next("POST", r"/pods/web-3/eviction$", 500, message="etcd is sad")
    assert (await one.rebalancer.run_pass()).answers == {"shop/web-3": "retry"}
    assert counted(one.metrics.passes, "done") == 2 and counted(one.metrics.passes, "failed") == 0
    assert not events(server, "Rebalanced") and one.rebalancer.following == {}, "nothing moved, nothing awaited"


async def test_a_pod_that_left_the_view_is_not_asked_about(server: FakeApiServer, running: Callable[..., Any]) -> None:
    decision = move(server, "web-1", to="spot-1")
    one = await running(Stub([decision]))
    server.delete_object("Pod", "web-1", "shop")
    await until(lambda: one.rebalancer.pods.node_of("shop/web-1") is None, what="the view to lose the pod")
    assert (await one.rebalancer.run_pass()).answers == {"shop/web-1": "gone"}
    assert evictions(server) == []


async def test_nothing_is_decided_while_the_view_is_not_synced(server: FakeApiServer,
                                                               running: Callable[..., Any]) -> None:
    plan = Stub([move(server, "web-1", to="spot-1")])
    one = await running(plan, synced=False)
    report = await one.rebalancer.run_pass()
    assert not report.synced and plan.calls == [] and evictions(server) == []
    assert counted(one.metrics.passes, "not-synced") == 1


async def test_the_world_is_the_view_the_pods_as_decide_projects_them_and_the_clock_s_time(
        server: FakeApiServer, running: Callable[..., Any], clock: FakeClock) -> None:
    plan = Stub([])
    one = await running(plan)
    await one.rebalancer.run_pass()
    ((world, settings, backoff),) = plan.calls
    assert sorted(n["metadata"]["name"] for n in world.nodes) == sorted([ON_DEMAND_NODE, *SPOT_NODES])
    assert sorted(p["metadata"]["name"] for p in world.pods) == ["web-1", "web-2", "web-3", "web-4"]
    assert world.pods[0]["metadata"]["ownerReferences"][0]["uid"].startswith("rs-"), "owner uids are kept"
    assert [p["metadata"]["name"] for p in world.pdbs] == ["web"]
    # A List's items carry no apiVersion; the budget's is stamped, since an empty selector
    # selects no pod under policy/v1beta1 and every pod under policy/v1.
    assert [p.get("apiVersion") for p in world.pdbs] == ["policy/v1beta1"]
    assert world.now == clock.now and backoff == frozenset() and settings.max_evictions == 2


async def test_at_most_max_evictions_moves_a_pass_and_one_per_owner_awaited(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.load([web("other-2", owner="rs-2", app="other"), web("other-3", owner="rs-3", app="other")])
    plan = Stub([move(server, "web-1", to="spot-1"), *(move(server, f"other-{i}", to="spot-1", owner=f"rs-{i}")
                                                       for i in (2, 3))])
    one = await running(plan)
    assert (await one.rebalancer.run_pass()).answers == {"shop/web-1": "evicted", "shop/other-2": "evicted"}, \
        "max_evictions=2"
    plan.decisions = [move(server, "web-3", to="spot-1")]  # rs-1's replacement is not bound yet
    assert (await one.rebalancer.run_pass()).answers == {}, "an owner is not moved again while awaited"


async def test_a_replacement_bound_where_the_simulation_said_holds_the_prediction(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    one = await running(Stub([move(server, "web-1", to="spot-1")]))
    await one.rebalancer.run_pass()
    server.apply_object(web("web-1b", node=""))  # the ReplicaSet's replacement, pending
    server.patch_object("Pod", "web-2", {"status": {"phase": "Running"}}, "shop")  # a sibling changes: not it
    await until(lambda: one.rebalancer.pods.node_of("shop/web-2") is not None, what="the sibling's change")
    assert one.rebalancer.following, "a pending pod and an old sibling are not the replacement"
    server.patch_object("Pod", "web-1b", {"spec": {"nodeName": "spot-1"}}, "shop")  # the scheduler binds it
    await until(lambda: not one.rebalancer.following, what="the replacement to be seen")
    assert counted(one.metrics.replacements, "as-simulated") == 1 and counted(one.metrics.mispredictions) == 0


async def test_the_replacement_is_of_the_moved_pod_s_own_controller_and_the_backoff_of_plan_s_owner(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    plan = Stub([move(server, "web-1", to="spot-1", owner="deploy-1")])  # plan's owner: the Deployment above rs-1
    one = await running(plan)
    await one.rebalancer.run_pass()
    plan.decisions = [move(server, "web-2", to="spot-1", owner="deploy-1")]
    assert (await one.rebalancer.run_pass()).answers == {}, "the Deployment is not moved again while awaited"
    server.apply_object(web("web-1b", node=ON_DEMAND_NODE))  # the ReplicaSet's replacement
    await until(lambda: not one.rebalancer.following, what="the replacement to be seen")
    assert counted(one.metrics.mispredictions) == 1
    await one.rebalancer.run_pass()
    assert plan.calls[-1][2] == frozenset({"deploy-1"}), "plan hears of the owner it named"


async def test_a_replacement_on_a_node_tied_with_the_target_is_as_simulated(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    one = await running(Stub([move(server, "web-1", to="spot-1", ties=frozenset({"spot-2"}))]))
    await one.rebalancer.run_pass()
    await until(lambda: bool(events(server, "Rebalanced")), what="the Rebalanced Event")
    assert "expected on spot-1 (or spot-2, tied), 0 -> 100" in events(server, "Rebalanced")[0]["message"]
    server.apply_object(web("web-1b", node="spot-2"))
    await until(lambda: not one.rebalancer.following, what="the replacement to be seen")
    assert counted(one.metrics.replacements, "as-simulated") == 1 and counted(one.metrics.mispredictions) == 0


async def test_a_replacement_elsewhere_is_a_misprediction_told_counted_and_backed_off_intervals_doubling_to_a_cap(
        server: FakeApiServer, running: Callable[..., Any], clock: FakeClock) -> None:
    plan = Stub([move(server, "web-1", to="spot-1")])
    one = await running(plan)
    for strike, backoff in enumerate((100.0, 200.0, 400.0, 400.0), start=1):
        await one.rebalancer.run_pass()
        assert plan.calls[-1][2] == frozenset(), "not backed off once its time is over"
        server.apply_object(web(f"web-1-{strike}", node=ON_DEMAND_NODE))  # not where the simulation said
        await until(lambda: not one.rebalancer.following, what="the replacement to be seen")
        assert counted(one.metrics.mispredictions) == strike
        await one.rebalancer.run_pass()
        assert plan.calls[-1][2] == frozenset({"rs-1"}), "the owner is passed to plan as backed off"
        clock.advance(backoff - 1)
        await one.rebalancer.run_pass()
        assert plan.calls[-1][2] == frozenset({"rs-1"}), f"still backed off after {backoff - 1:g} of {backoff:g} s"
        clock.advance(1)
        plan.decisions = [move(server, f"web-1-{strike}", to="spot-1")]
    assert counted(one.metrics.replacements, "mispredicted") == 4
    await until(lambda: len(events(server, "RebalanceMispredicted")) == 4, what="the Warning Events")
    first = next(e for e in events(server, "RebalanceMispredicted") if e["involvedObject"]["name"] == "web-1-1")
    assert first["type"] == "Warning"
    assert first["message"] == ("the scheduler bound the replacement of shop/web-1 to od-1, not to spot-1 as "
                                "simulated: ReplicaSet web-rs-1 is left alone for 100 s")


async def test_a_prediction_that_holds_forgives_the_owner(server: FakeApiServer, running: Callable[..., Any],
                                                          clock: FakeClock) -> None:
    plan = Stub([move(server, "web-1", to="spot-1")])
    one = await running(plan)
    await one.rebalancer.run_pass()
    server.apply_object(web("web-1b", node=ON_DEMAND_NODE))
    await until(lambda: not one.rebalancer.following, what="the misprediction")
    clock.advance(100)
    plan.decisions = [move(server, "web-1b", to="spot-1")]
    await one.rebalancer.run_pass()
    server.apply_object(web("web-1c", node="spot-1"))
    await until(lambda: not one.rebalancer.following, what="the prediction to hold")
    assert one.rebalancer.strikes == {}, "the next misprediction starts again at the first backoff"


async def test_a_replacement_never_seen_is_no_longer_awaited_after_the_follow_timeout(
        server: FakeApiServer, running: Callable[..., Any], clock: FakeClock) -> None:
    plan = Stub([move(server, "web-1", to="spot-1")])
    one = await running(plan)
    await one.rebalancer.run_pass()
    plan.decisions = []
    clock.advance(599)
    await one.rebalancer.run_pass()
    assert one.rebalancer.following
    clock.advance(1)
    await one.rebalancer.run_pass()
    assert not one.rebalancer.following and counted(one.metrics.replacements, "not-seen") == 1


async def test_a_pass_every_interval_on_the_clock_and_a_failing_pass_does_not_stop_the_loop(
        server: FakeApiServer, running: Callable[..., Any], clock: FakeClock) -> None:
    plan = Stub([], fail_once=True)
    one = await running(plan, interval=30.0)
    stop = asyncio.Event()
    task = asyncio.create_task(one.rebalancer.run(stop))
    await until(lambda: len(plan.calls) == 1 and clock.waiting == 1, what="the first pass")
    assert counted(one.metrics.passes, "failed") == 1
    clock.advance(29)
    await asyncio.sleep(0)
    assert len(plan.calls) == 1, "not before the interval"
    clock.advance(1)
    await until(lambda: len(plan.calls) == 2, what="the second pass")
    assert counted(one.metrics.passes, "done") == 1
    stop.set()
    await asyncio.wait_for(task, 3.0)


async def test_the_metrics_say_the_verdicts_and_the_share_of_interruptible_pods_on_spot(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    server.apply_object(web("web-5", node="spot-1"))  # one of five interruptible pods is on spot
    stay = move(server, "web-2", to="spot-1", verdict=Verdict.STAY)
    one = await running(Stub([move(server, "web-1", to="spot-1"), stay]))
    await one.rebalancer.run_pass()
    assert [counted(one.metrics.candidates, v) for v in ("move", "stay", "skip")] == [1, 1, 0]
    assert counted(one.metrics.spot_share) == pytest.approx(1 / 5)
    text = one.metrics.render().decode()
    for name in ("placement_webhook_rebalance_evictions_total{result=\"evicted\"} 1.0",
                 "placement_webhook_rebalance_mispredictions_total 0.0",
                 "placement_webhook_rebalance_interruptible_on_spot_ratio 0.2",
                 "placement_webhook_rebalance_gain_points_total 100.0"):
        assert name in text


async def test_the_api_server_going_away_mid_pass_is_an_answer_logged_and_counted_and_the_next_pass_moves(
        server: FakeApiServer, running: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    plan = Stub([move(server, "web-1", to="spot-1")])
    one = await running(plan)
    server.go_away("refuse")
    with caplog.at_level(logging.INFO, logger="webhook.rebalance.controller"):
        assert (await one.rebalancer.run_pass()).answers == {"shop/web-1": "retry"}
    (said,) = [r for r in caplog.records if r.getMessage() == "rebalance: not evicted"]
    fields = said.__dict__["fields"]
    assert (fields["pod"], fields["result"]) == ("shop/web-1", "retry") and fields["message"]
    assert counted(one.metrics.evictions, "retry") == 1 and one.rebalancer.following == {}
    server.come_back()
    assert (await one.rebalancer.run_pass()).answers == {"shop/web-1": "evicted"}


async def test_a_budget_s_refusal_is_logged_with_the_api_server_s_words(
        server: FakeApiServer, running: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    server.apply_object(pdb("web", "shop", match={"app": "web"}, max_unavailable=0, api_version="policy/v1beta1"))
    server.sync_pdbs()
    one = await running(Stub([move(server, "web-1", to="spot-1")]))
    with caplog.at_level(logging.INFO, logger="webhook.rebalance.controller"):
        await one.rebalancer.run_pass()
    (said,) = [r for r in caplog.records if r.getMessage() == "rebalance: not evicted"]
    assert said.levelno == logging.INFO and said.__dict__["fields"]["result"] == "blocked"
    assert "disruption budget" in said.__dict__["fields"]["message"]


async def test_a_pod_without_a_controller_is_never_awaited_nor_taken_for_a_replacement(
        server: FakeApiServer, running: Callable[..., Any]) -> None:
    lone = web("lone", app="lone")
    del lone["metadata"]["ownerReferences"]
    server.load([lone])
    one = await running(Stub([move(server, "lone", to="spot-1", owner="")]))
    assert (await one.rebalancer.run_pass()).answers == {"shop/lone": "evicted"}
    assert one.rebalancer.following == {}, "nothing would replace it"
    bare = web("other", app="lone", node="spot-2")
    del bare["metadata"]["ownerReferences"]
    server.apply_object(bare)
    await until(lambda: one.rebalancer.pods.node_of("shop/other") == "spot-2", what="another ownerless pod")
    assert counted(one.metrics.replacements, "as-simulated") + counted(one.metrics.mispredictions) == 0
