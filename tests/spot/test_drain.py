"""One node's drain (``NodeDrain``) against scripted eviction answers, on a clock the test moves."""
from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.clock import FakeClock
from webhook.spot.drain import NodeDrain, pod_key

SETTLING = ("evicted", "gone", "failed")  # the answers after which a pod is never asked again
FOREVER = 10_000  # a budget that never gives way: the pod is still blocked at the deadline


def a_pod(name: str, owner: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop"}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": owner, "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": "spot-1"}, "status": {"phase": "Running"}}


class ScriptedEvictor:
    """Answers each pod's evictions from its script: ``refusals`` times ``refusal``, then ``last``."""

    def __init__(self, scripts: dict[str, tuple[int, str, str]]) -> None:
        self.scripts = scripts
        self.asked: Counter[str] = Counter()
        self.in_flight = 0
        self.most = 0

    async def evict(self, pod: Any) -> tuple[str, str]:
        key = pod_key(pod)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0)  # the round trip: others may be sent meanwhile
            await asyncio.sleep(0)
        finally:
            self.in_flight -= 1
        refusals, refusal, last = self.scripts[key]
        self.asked[key] += 1
        return (refusal, "not now") if self.asked[key] <= refusals else (last, last)


async def settle() -> None:
    """Let every runnable task run until nothing is left to do now."""
    for _ in range(50):
        await asyncio.sleep(0)


answers = st.tuples(st.sampled_from([0, 1, 2, 3, FOREVER]), st.sampled_from(["blocked", "retry"]),
                    st.sampled_from(SETTLING))


@settings(max_examples=60, deadline=None)
@given(scripts=st.lists(st.tuples(st.sampled_from(["", "rs-a", "rs-b"]), answers), min_size=1, max_size=12),
       bound=st.integers(min_value=1, max_value=4))
def test_every_pod_ends_as_its_answers_say_and_never_more_than_the_bound_are_in_flight(
        scripts: list[tuple[str, tuple[int, str, str]]], bound: int) -> None:
    pods = [a_pod(f"p{i}", owner) for i, (owner, _) in enumerate(scripts)]
    evictor = ScriptedEvictor({f"shop/p{i}": script for i, (_, script) in enumerate(scripts)})

    async def drain() -> Any:
        clock = FakeClock()
        node = NodeDrain(evictor, clock.now + 300.0, clock=clock, slots=asyncio.Semaphore(bound),  # type: ignore[arg-type]
                         backoff=1.0, max_backoff=8.0)
        running = asyncio.create_task(node.run(pods))
        while not running.done():
            await settle()
            clock.advance(8.0)  # the longest backoff: every waiting pod asks again
        return running.result()

    report = asyncio.run(drain())
    assert evictor.most <= bound
    for i, (_, (refusals, refusal, last)) in enumerate(scripts):
        key = f"shop/p{i}"
        if refusals == FOREVER:
            assert (key in report.blocked, key in report.failed) == (refusal == "blocked", refusal == "retry"), \
                "kept at the deadline, for the last reason given"
            continue
        assert evictor.asked[key] == refusals + 1, "asked until the answer settled it, and never after"
        where = {"evicted": report.evicted, "gone": report.gone, "failed": report.failed}[last]
        assert key in where and key not in report.blocked and (last == "failed" or key not in report.failed)


async def test_a_blocked_pod_never_holds_up_the_others() -> None:
    clock = FakeClock()
    evictor = ScriptedEvictor({"shop/kept": (FOREVER, "blocked", "evicted"),
                               **{f"shop/free-{i}": (0, "blocked", "evicted") for i in range(4)}})
    pods = [a_pod("kept", "rs-kept"), *(a_pod(f"free-{i}", f"rs-{i}") for i in range(4))]
    node = NodeDrain(evictor, clock.now + 60.0, clock=clock, slots=asyncio.Semaphore(1),  # type: ignore[arg-type]
                     backoff=5.0, max_backoff=5.0)
    running = asyncio.create_task(node.run(pods))
    await settle()
    assert sorted(node.report.evicted) == [f"shop/free-{i}" for i in range(4)], "without waiting out any backoff"
    assert node.report.blocked == {"shop/kept": "not now"} and not running.done()
    clock.advance(60.0)
    report = await running
    assert report.blocked == {"shop/kept": "not now"}


async def test_a_pod_that_leaves_the_node_is_no_longer_asked_about() -> None:
    clock = FakeClock()
    evictor = ScriptedEvictor({"shop/a": (FOREVER, "blocked", "evicted")})
    node = NodeDrain(evictor, clock.now + 60.0, clock=clock, slots=asyncio.Semaphore(2),  # type: ignore[arg-type]
                     backoff=1.0)
    running = asyncio.create_task(node.run([a_pod("a", "rs-a")]))
    await settle()
    node.offer("shop/a", None)  # deleted by someone else
    report = await asyncio.wait_for(running, 1.0)
    assert evictor.asked["shop/a"] == 1 and report.blocked == {} and report.evicted == []


async def test_an_eviction_whose_pod_leaves_before_its_answer_comes_is_still_counted() -> None:
    """The watch can tell of the evicted pod terminating before the eviction's answer arrives."""
    clock = FakeClock()
    heard: list[tuple[str, str]] = []

    class WatchOutrunsAnswer:
        async def evict(self, pod: Any) -> tuple[str, str]:
            node.offer(pod_key(pod), None)  # the pod's deletionTimestamp, seen first
            await settle()  # the answer takes its time
            return "evicted", "evicted"

    node = NodeDrain(WatchOutrunsAnswer(), clock.now + 60.0, clock=clock,  # type: ignore[arg-type]
                     slots=asyncio.Semaphore(2), on_result=lambda pod, result, _: heard.append((pod_key(pod), result)))
    report = await asyncio.wait_for(node.run([a_pod("a", "rs-a"), a_pod("b", "rs-b")]), 1.0)
    assert sorted(report.evicted) == ["shop/a", "shop/b"] and heard == [("shop/a", "evicted"), ("shop/b", "evicted")]


async def test_one_eviction_per_controller_is_in_flight_at_a_time_and_controllers_go_side_by_side() -> None:
    """Evictions of one controller's pods meet at its budget: sent together, all but one lose the
    race for the budget's status (the API server retries each after 500 ms, ``EvictionsRetry``)
    and an eviction still waiting there when its sender dies is carried out later without it.
    The next pod of a controller is asked once the last one's answer is back; other
    controllers' pods are asked meanwhile."""
    clock = FakeClock()
    in_flight: Counter[str] = Counter()
    most: Counter[str] = Counter()

    class Budgets:
        async def evict(self, pod: Any) -> tuple[str, str]:
            owner = pod["metadata"]["ownerReferences"][0]["uid"]
            in_flight[owner] += 1
            most[owner] = max(most[owner], in_flight[owner])
            most["all"] = max(most["all"], sum(in_flight.values()))
            await settle()  # the round trip
            in_flight[owner] -= 1
            return "evicted", "evicted"

    pods = [a_pod(f"{owner}-{i}", owner) for i in range(6) for owner in ("rs-a", "rs-b")]
    node = NodeDrain(Budgets(), clock.now + 60.0, clock=clock, slots=asyncio.Semaphore(10),  # type: ignore[arg-type]
                     backoff=1.0)
    report = await asyncio.wait_for(node.run(pods), 1.0)
    assert len(report.evicted) == 12, "without waiting out any backoff"
    assert most["rs-a"] == most["rs-b"] == 1 and most["all"] == 2
