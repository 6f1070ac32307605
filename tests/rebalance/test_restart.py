"""A rebalancer killed in the middle of a pass, and the one that starts after it, deciding with the
real ``decide.plan``: what is safe to move is read from the cluster, so the second never evicts a
pod of an owner the first one disrupted until that owner is whole and Ready again."""
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from tests.cluster.conftest import FAST, until
from tests.kit.clock import FakeClock
from tests.kit.fakeapi import FakeApiServer
from tests.rebalance.conftest import evictions, web
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.rebalance import component, decide
from webhook.rebalance.controller import Rebalancer, RebalanceSettings
from webhook.spot.config import SpotConfig
from webhook.spot.drain import ready


def rebalancer(server: FakeApiServer, clock: FakeClock) -> Rebalancer:
    client = Client(ClusterConfig(server.url), request_timeout=2.0)
    spot = SpotConfig()
    cache = component.view(client, spot, "policy/v1beta1", page_size=50, watch_timeout=5.0, backoff=FAST,
                           min_watch_duration=0.0, version_timeout=2.0)
    return Rebalancer(client, cache, spot, RebalanceSettings(policy=decide.Settings(),
                                                             eviction_version="policy/v1beta1"), clock=clock)


async def started(one: Rebalancer) -> Rebalancer:
    await one.cache.start()
    assert await one.cache.wait_synced(3.0)
    return one


async def stopped(one: Rebalancer) -> None:
    await one.events.close()
    await one.cache.stop()
    await one.client.close()


async def killed_after_its_first_eviction(one: Rebalancer) -> None:
    """Run a pass and kill it the moment the API server has answered its first eviction: no
    Event written, nothing followed, the rest of the pass never made."""
    answered = asyncio.Event()
    evict = one.evictor.evict

    async def then_killed(pod: Mapping[str, Any]) -> tuple[str, str]:
        answer = await evict(pod)
        answered.set()
        await asyncio.Event().wait()  # the process dies here
        return answer

    one.evictor.evict = then_killed  # type: ignore[method-assign]
    task = asyncio.create_task(one.run_pass())
    await asyncio.wait_for(answered.wait(), 5.0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_restarted_rebalancer_never_evicts_twice_from_an_owner_a_killed_one_disrupted(
        server: FakeApiServer, clock: FakeClock) -> None:
    first = await started(rebalancer(server, clock))
    await killed_after_its_first_eviction(first)
    await stopped(first)
    assert evictions(server) == ["web-1"]

    second = await started(rebalancer(server, clock))
    try:
        await until(lambda: second.pods.node_of("shop/web-1") is None, what="the view without the evicted pod")
        report = await second.run_pass()
        assert evictions(server) == ["web-1"], "three of four replicas: the owner is busy"
        assert {d.candidate.name: d.verdict.value for d in report.decisions} == \
            {"web-2": "skip", "web-3": "skip", "web-4": "skip"}

        server.apply_object(web("web-1b", node="spot-1", ready=False))  # its replacement, not Ready yet
        server.sync_pdbs()
        await until(lambda: second.pods.node_of("shop/web-1b") == "spot-1", what="the replacement in the view")
        await second.run_pass()
        assert evictions(server) == ["web-1"], "a replacement that is not Ready keeps the owner busy"

        server.patch_object("Pod", "web-1b", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "shop")
        server.sync_pdbs()
        await until(lambda: ready(second.cache.informers["pods"].get("shop/web-1b")), what="the Ready replacement")
        await second.run_pass()
        assert len(evictions(server)) == 2 and evictions(server)[0] == "web-1", "whole again: the next may go"
    finally:
        await stopped(second)


async def test_two_passes_of_one_rebalancer_in_a_row_move_one_pod_of_an_owner(
        server: FakeApiServer, clock: FakeClock) -> None:
    one = await started(rebalancer(server, clock))
    try:
        first = await one.run_pass()
        second = await one.run_pass()  # the view may not have heard of the eviction yet
        assert list(first.answers.values()) == ["evicted"] and second.answers == {}
        assert evictions(server) == ["web-1"]
    finally:
        await stopped(one)
