"""Leader election on a coordination.k8s.io/v1 Lease against the fake API server.

Timings are short (lease 0.6 s -- written as 1 s, renew deadline 0.4 s, retry 0.1 s). Waits are
bounded; the only time-based asserts are lower bounds that a slow machine makes only more true.
The record-level rules (expiry, transitions, conflicts), and whatever must NOT happen before a
time has passed, are checked with an injected clock (and sleep) that the test moves: no test
sleeps and then asserts.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.kit.clock import FakeClock
from tests.kit.fakeapi import FakeApiServer
from webhook.cluster.client import ApiError, Client
from webhook.cluster.config import ClusterConfig
from webhook.runtime.leader import (
    LeaderElectionConfig,
    LeaderElectionRecord,
    LeaderElector,
    default_identity,
    record_from_spec,
    spec_from_record,
)

Until = Callable[..., Any]
NS, NAME = "kube-system", "placement-writer"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}"
MICRO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def config(identity: str, **overrides: Any) -> LeaderElectionConfig:
    options: dict[str, Any] = {"lease_duration": 0.6, "renew_deadline": 0.4, "retry_period": 0.1,
                               "field_manager": "leader-test"}
    options.update(overrides)
    return LeaderElectionConfig(NS, NAME, identity, **options)


def spec_of(server: FakeApiServer) -> dict[str, Any]:
    lease = server.get_object("Lease", NAME, NS)
    assert lease is not None, "no lease"
    spec: dict[str, Any] = lease["spec"]
    return spec


def put_lease(server: FakeApiServer, spec: Any) -> None:
    server.apply_object({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                         "metadata": {"name": NAME, "namespace": NS}, "spec": spec})


class Work:
    """A lead() callback that records what happened to it. ``stubborn`` ignores the stop event."""

    def __init__(self, stubborn: bool = False, on_enter: Callable[[], None] | None = None) -> None:
        self.stubborn = stubborn
        self.on_enter = on_enter
        self.entries = 0
        self.running = False
        self.returned = 0
        self.cancelled = 0
        self.stop_was_set_when_cancelled: bool | None = None

    async def __call__(self, stop: asyncio.Event) -> None:
        self.entries += 1
        self.running = True
        if self.on_enter is not None:
            self.on_enter()
        try:
            if self.stubborn:
                await asyncio.sleep(3600)
            else:
                await stop.wait()
            self.returned += 1
        except asyncio.CancelledError:
            self.cancelled += 1
            self.stop_was_set_when_cancelled = stop.is_set()
            raise
        finally:
            self.running = False


@pytest.fixture
async def make_client(server: FakeApiServer) -> AsyncIterator[Callable[[], Client]]:
    made: list[Client] = []

    def make() -> Client:
        api = Client(ClusterConfig(server.url), request_timeout=2.0, watch_grace=2.0)
        made.append(api)
        return api

    yield make
    for api in made:
        await api.close()


async def stop_task(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 5.0)


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there any more: connections are refused


async def test_the_first_candidate_creates_the_lease_and_leads(server: FakeApiServer,
                                                               make_client: Callable[[], Client],
                                                               until: Until) -> None:
    assert server.get_object("Lease", NAME, NS) is None
    elector = LeaderElector(make_client(), config("replica-a"))
    assert not elector.is_leader and elector.status()["holder"] == ""
    work = Work()
    task = asyncio.create_task(elector.run(work))
    try:
        await until(lambda: elector.is_leader and work.entries == 1, what="leading")
        spec = spec_of(server)
        assert spec["holderIdentity"] == "replica-a"
        assert spec["leaseDurationSeconds"] == 1  # 0.6 s rounded up: the API refuses 0
        assert spec["leaseTransitions"] == 0
        assert MICRO.fullmatch(spec["acquireTime"]) and MICRO.fullmatch(spec["renewTime"])
        (create,) = [r for r in server.requests if r.method == "POST" and r.path.endswith("/leases")]
        assert create.query == {"fieldManager": "leader-test"}
        assert create.json()["metadata"] == {"name": NAME, "namespace": NS}
        # it keeps renewing: renewTime moves, acquireTime and the transitions do not
        first = spec
        await until(lambda: spec_of(server)["renewTime"] > first["renewTime"], what="a renewal")
        later = spec_of(server)
        assert later["acquireTime"] == first["acquireTime"] and later["leaseTransitions"] == 0
        puts = [r for r in server.requests if r.method == "PUT" and r.path == LEASE_PATH]
        assert puts and all(r.query == {"fieldManager": "leader-test"} for r in puts)
        assert all(r.json()["metadata"].get("resourceVersion") for r in puts)  # every update is conditional
        status = elector.status()
        assert status["leader"] is True and status["holder"] == "replica-a" and status["transitions"] == 0
        assert status["lease"] == f"{NS}/{NAME}" and status["lost"] is False
        assert status["last_renew"] is not None and 0 <= status["last_renew"] < 5
        assert work.running
    finally:
        await stop_task(task)
    assert not elector.is_leader and work.returned == 1 and not work.running


async def test_a_second_candidate_waits_while_the_leader_renews(server: FakeApiServer,
                                                                make_client: Callable[[], Client],
                                                                until: Until) -> None:
    a, b = LeaderElector(make_client(), config("replica-a")), LeaderElector(make_client(), config("replica-b"))
    work_a, work_b = Work(), Work()
    tasks = [asyncio.create_task(a.run(work_a)), asyncio.create_task(b.run(work_b))]
    try:
        await until(lambda: a.is_leader or b.is_leader, what="a leader")
        leader, follower = (a, b) if a.is_leader else (b, a)
        both = samples = 0
        loop = asyncio.get_running_loop()
        end = loop.time() + 2.0  # over three lease durations: a follower that did not wait would take over
        while loop.time() < end:
            samples += 1
            both += a.is_leader and b.is_leader
            assert leader.is_leader and not follower.is_leader
            await asyncio.sleep(0.01)
        assert both == 0 and samples > 20
        assert work_a.entries + work_b.entries == 1
        assert spec_of(server)["holderIdentity"] == leader.identity
        assert spec_of(server)["leaseTransitions"] == 0
        assert follower.status()["holder"] == leader.identity and follower.status()["leader"] is False
        assert not any(t.done() for t in tasks)
    finally:
        for task in tasks:
            await stop_task(task)


async def test_a_new_leader_takes_over_within_the_lease_duration_when_the_leader_stops_renewing(
        server: FakeApiServer, make_client: Callable[[], Client], until: Until) -> None:
    hung_client = make_client()
    a, b = LeaderElector(hung_client, config("replica-a")), LeaderElector(make_client(), config("replica-b"))
    work_a = Work()
    a_work_running_when_b_started: list[bool] = []
    work_b = Work(on_enter=lambda: a_work_running_when_b_started.append(work_a.running))
    task_a = asyncio.create_task(a.run(work_a))
    await until(lambda: a.is_leader, what="a leading")
    task_b = asyncio.create_task(b.run(work_b))
    try:
        await until(lambda: b.status()["holder"] == "replica-a", what="b seeing a")
        hung_client.config = ClusterConfig(dead_url())  # a can no longer reach the API server
        both = 0
        loop = asyncio.get_running_loop()
        end = loop.time() + 5.0
        while not b.is_leader and loop.time() < end:
            both += a.is_leader and b.is_leader
            await asyncio.sleep(0.01)
        assert b.is_leader, b.status()
        assert both == 0
        # the hung leader gave up on its own: stop event, its work ended, run() returned
        await asyncio.wait_for(task_a, 2.0)
        assert a.status()["lost"] is True and not a.is_leader
        assert work_a.returned == 1 and work_a.cancelled == 0
        assert a_work_running_when_b_started == [False]  # never two leaders working at once
        spec = spec_of(server)
        assert spec["holderIdentity"] == "replica-b" and spec["leaseTransitions"] == 1
    finally:
        await stop_task(task_a)
        await stop_task(task_b)


async def moved(clock: FakeClock, seconds: float, until: Until, *, sleeps: int = 1) -> None:
    """Move ``clock`` on and wait until what slept on it has had its turn and sleeps again:
    ``sleeps`` new sleeps (a try to acquire sleeps once after it; a renewal twice, its own
    deadline while it runs and the retry period after it)."""
    began = clock.sleeps
    clock.advance(seconds)
    await until(lambda: clock.sleeps >= began + sleeps, what=f"a turn after {seconds} s")


async def test_a_leader_that_stops_without_releasing_is_taken_over_only_after_its_lease(
        server: FakeApiServer, make_client: Callable[[], Client], until: Until) -> None:
    a = LeaderElector(make_client(), config("replica-a", release_on_cancel=False))
    clock = FakeClock()
    b = LeaderElector(make_client(), config("replica-b"), clock=clock, sleep=clock.sleep)
    task_a = asyncio.create_task(a.run(Work()))
    await until(lambda: a.is_leader, what="a leading")
    work_b = Work()
    task_b = asyncio.create_task(b.run(work_b))
    try:
        await until(lambda: b.status()["holder"] == "replica-a" and clock.sleeps == 1, what="b seeing a")
        await stop_task(task_a)  # a crash: no release
        assert spec_of(server)["holderIdentity"] == "replica-a"
        # b has seen a's last record by now (when it first looked, or at this try): the lease's 1 s
        # runs from then, and b must wait it out
        await moved(clock, 0.5, until)
        assert not b.is_leader and work_b.entries == 0
        await moved(clock, 0.4, until)  # 0.9 s since b first saw a: less than the lease
        assert not b.is_leader and work_b.entries == 0
        clock.advance(0.7)  # over 1 s since b last saw the record change
        await until(lambda: b.is_leader, what="b taking over")
        assert spec_of(server)["holderIdentity"] == "replica-b" and spec_of(server)["leaseTransitions"] == 1
    finally:
        await stop_task(task_b)


async def test_a_released_lease_is_taken_over_at_once(server: FakeApiServer, make_client: Callable[[], Client],
                                                     until: Until) -> None:
    # A 5 s lease: a takeover within 3 s can only come from the release, not from expiry.
    a = LeaderElector(make_client(), config("replica-a", lease_duration=5.0))
    b = LeaderElector(make_client(), config("replica-b", lease_duration=5.0))
    work_a, work_b = Work(), Work()
    task_a = asyncio.create_task(a.run(work_a))
    await until(lambda: a.is_leader, what="a leading")
    task_b = asyncio.create_task(b.run(work_b))
    try:
        await until(lambda: b.status()["holder"] == "replica-a", what="b seeing a")
        await stop_task(task_a)
        assert work_a.returned == 1 and not a.is_leader
        released = [r.json()["spec"] for r in server.requests if r.method == "PUT" and r.path == LEASE_PATH
                    and r.json()["spec"]["holderIdentity"] == ""]
        assert len(released) == 1
        assert released[0]["leaseDurationSeconds"] == 1 and released[0]["leaseTransitions"] == 0
        assert MICRO.fullmatch(released[0]["renewTime"]) and MICRO.fullmatch(released[0]["acquireTime"])
        await until(lambda: b.is_leader and work_b.entries == 1, timeout=3.0, what="b taking over the release")
        spec = spec_of(server)
        assert spec["holderIdentity"] == "replica-b" and spec["leaseTransitions"] == 1
        assert spec["leaseDurationSeconds"] == 5
    finally:
        await stop_task(task_b)


async def test_losing_the_renew_deadline_sets_the_stop_event_and_cancels_the_work(
        server: FakeApiServer, make_client: Callable[[], Client], until: Until) -> None:
    elector = LeaderElector(make_client(), config("replica-a"))
    work = Work(stubborn=True)  # ignores the stop event: it has to be cancelled
    task = asyncio.create_task(elector.run(work))
    try:
        await until(lambda: elector.is_leader and work.running, what="leading")
        server.fail_next("*", r"/leases", 503, times=1_000_000)
        await asyncio.wait_for(task, 5.0)  # run() returns, no exception: the caller decides what next
        assert task.done() and not task.cancelled() and task.exception() is None
        assert work.cancelled == 1 and work.stop_was_set_when_cancelled is True and not work.running
        assert not elector.is_leader
        assert elector.status()["lost"] is True and elector.status()["leader"] is False
        assert spec_of(server)["holderIdentity"] == "replica-a"  # the release could not be written either
    finally:
        await stop_task(task)


async def test_a_brief_api_failure_while_renewing_is_not_a_loss(server: FakeApiServer,
                                                                make_client: Callable[[], Client],
                                                                until: Until) -> None:
    clock = FakeClock()
    elector = LeaderElector(make_client(), config("replica-a"), clock=clock, sleep=clock.sleep)
    work = Work()
    task = asyncio.create_task(elector.run(work))
    try:
        # acquired, renewed at once (client-go's wait.Until runs first, then waits): two sleeps
        await until(lambda: elector.is_leader and clock.sleeps == 2, what="leading, and waiting to renew")
        before = spec_of(server)["renewTime"]
        server.fail_next("*", r"/leases", 503, times=2)  # the optimistic PUT and the GET after it
        await moved(clock, 0.1, until, sleeps=2)  # a renewal that fails, then a wait of one retry period
        assert server.app.faults == [] and spec_of(server)["renewTime"] == before
        await moved(clock, 0.1, until, sleeps=2)  # the retry, well within the 0.4 s renew deadline
        assert spec_of(server)["renewTime"] > before
        for _ in range(5):  # renewing on: the failure cost nothing
            await moved(clock, 0.1, until, sleeps=2)
        assert elector.is_leader and work.running and work.entries == 1 and not task.done()
        assert elector.status()["lost"] is False
    finally:
        await stop_task(task)


async def test_api_errors_while_acquiring_are_retried(server: FakeApiServer, make_client: Callable[[], Client],
                                                      until: Until) -> None:
    server.fail_next("GET", r"/leases/", 500, times=3)
    server.fail_next("POST", r"/leases", 429, times=1)
    elector = LeaderElector(make_client(), config("replica-a"))
    task = asyncio.create_task(elector.run(Work()))
    try:
        await until(lambda: elector.is_leader, timeout=5.0, what="leading after the errors")
        assert not server.app.faults
        assert len([r for r in server.requests if r.method == "POST"]) == 2
    finally:
        await stop_task(task)


async def test_a_conflict_on_update_is_not_a_crash(server: FakeApiServer, make_client: Callable[[], Client]) -> None:
    put_lease(server, {"holderIdentity": "ghost", "leaseDurationSeconds": 15, "leaseTransitions": 4})
    clock = FakeClock()
    a = LeaderElector(make_client(), config("replica-a"), clock=clock)
    b = LeaderElector(make_client(), config("replica-b"), clock=clock)
    assert await a.try_acquire_or_renew() is False and await b.try_acquire_or_renew() is False  # ghost holds it
    clock.now += 16  # the ghost has not renewed for longer than its 15 s
    results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
    assert sorted(results) == [False, True]  # both may try; the resourceVersion lets only one win
    winner, loser = (a, b) if results[0] else (b, a)
    spec = spec_of(server)
    assert spec["holderIdentity"] == winner.identity and spec["leaseTransitions"] == 5

    # A guaranteed 409: someone writes between the loser's GET and its PUT.
    assert await loser.try_acquire_or_renew() is False  # the loser sees the winner's record...
    clock.now += 16  # ...which then stays unchanged for longer than 15 s
    conflicts: list[int] = []
    real_replace = loser.client.replace

    async def racing_replace(path: str, body: Mapping[str, Any], *, field_manager: str = "") -> dict[str, Any]:
        server.patch_object("Lease", NAME, {"spec": {"holderIdentity": "intruder"}}, namespace=NS)
        try:
            return await real_replace(path, body, field_manager=field_manager)
        except ApiError as exc:
            conflicts.append(exc.status)
            raise

    loser.client.replace = racing_replace  # type: ignore[method-assign]
    assert await loser.try_acquire_or_renew() is False
    assert conflicts == [409]
    assert spec_of(server)["holderIdentity"] == "intruder"
    loser.client.replace = real_replace  # type: ignore[method-assign]
    # the next round sees the intruder's write as fresh: not expired, not taken
    assert await loser.try_acquire_or_renew() is False
    assert loser.status()["holder"] == "intruder" and not loser.is_leader


async def test_lease_transitions_count_changes_of_holder(server: FakeApiServer,
                                                         make_client: Callable[[], Client]) -> None:
    clock = FakeClock()
    a = LeaderElector(make_client(), config("replica-a"), clock=clock)
    b = LeaderElector(make_client(), config("replica-b"), clock=clock)
    assert await a.try_acquire_or_renew() is True
    first = spec_of(server)
    assert (first["holderIdentity"], first["leaseTransitions"]) == ("replica-a", 0)
    await asyncio.sleep(0.002)
    assert await a.try_acquire_or_renew() is True  # a renewal is not a transition
    renewed = spec_of(server)
    assert renewed["leaseTransitions"] == 0 and renewed["acquireTime"] == first["acquireTime"]
    assert renewed["renewTime"] > first["renewTime"]

    assert await b.try_acquire_or_renew() is False
    clock.now += 2  # a stops renewing for longer than the lease's 1 s
    assert await b.try_acquire_or_renew() is True
    taken = spec_of(server)
    assert (taken["holderIdentity"], taken["leaseTransitions"]) == ("replica-b", 1)
    assert taken["acquireTime"] > first["acquireTime"]

    assert await a.try_acquire_or_renew() is False  # a notices it lost the lease
    assert a.status()["holder"] == "replica-b" and a.status()["transitions"] == 1

    assert await b.release() is True
    released = spec_of(server)
    assert (released["holderIdentity"], released["leaseTransitions"], released["leaseDurationSeconds"]) == ("", 1, 1)
    assert await a.try_acquire_or_renew() is True  # free: no waiting
    again = spec_of(server)
    assert (again["holderIdentity"], again["leaseTransitions"]) == ("replica-a", 2)
    assert await b.release() is True  # b does not hold it: nothing written
    assert spec_of(server) == again


@pytest.mark.parametrize(("lease", "renew", "retry", "message"), [
    (0.4, 0.4, 0.1, "leaseDuration .* must be greater than renewDeadline"),
    (0.3, 0.4, 0.1, "leaseDuration .* must be greater than renewDeadline"),
    (15.0, 1.2, 1.0, "renewDeadline .* must be greater than retryPeriod\\*JitterFactor"),
    (15.0, 10.0, 9.0, "renewDeadline .* must be greater than retryPeriod\\*JitterFactor"),
    (15.0, 10.0, 0.0, "retryPeriod must be greater than zero"),
    (15.0, -1.0, 2.0, "renewDeadline must be greater than zero"),
    (float("nan"), 10.0, 2.0, "leaseDuration must be greater than zero"),
])
async def test_timing_that_cannot_work_is_refused(lease: float, renew: float, retry: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(NS, NAME, "me", lease_duration=lease, renew_deadline=renew, retry_period=retry)


async def test_a_config_needs_an_identity_and_the_defaults_are_client_gos() -> None:
    with pytest.raises(ValueError, match="identity is empty"):
        LeaderElectionConfig(NS, NAME, "")
    with pytest.raises(ValueError, match="namespace and a name"):
        LeaderElectionConfig(NS, "", "me")
    defaults = LeaderElectionConfig(NS, NAME, "me")
    assert (defaults.lease_duration, defaults.renew_deadline, defaults.retry_period) == (15.0, 10.0, 2.0)
    assert defaults.release_on_cancel is True
    identity = default_identity()
    host, _, suffix = identity.rpartition("_")
    assert host == socket.gethostname() and len(suffix) >= 8 and identity != default_identity()


GARBLED = [
    {"holderIdentity": "someone", "leaseDurationSeconds": "fifteen", "acquireTime": "yesterday", "renewTime": 12,
     "leaseTransitions": "many"},
    {"holderIdentity": "someone"},
    {"holderIdentity": "someone", "leaseDurationSeconds": 0.25, "leaseTransitions": -3},
    {"holderIdentity": "someone", "leaseDurationSeconds": -1, "renewTime": "2024-13-45T99:00:00Z"},
    {"holderIdentity": ["someone"], "leaseDurationSeconds": True, "leaseTransitions": None},
]


@pytest.mark.parametrize("spec", GARBLED)
async def test_a_lease_with_a_garbled_spec_is_taken_over_after_its_duration(
        server: FakeApiServer, make_client: Callable[[], Client], spec: dict[str, Any]) -> None:
    put_lease(server, spec)
    clock = FakeClock()
    elector = LeaderElector(make_client(), config("replica-a"), clock=clock)
    assert await elector.try_acquire_or_renew() is False  # somebody holds it: wait out our 0.6 s
    clock.now += 0.5
    assert await elector.try_acquire_or_renew() is False
    # the holder rewrites it (garbled still): that is a sign of life, the wait starts again
    server.patch_object("Lease", NAME, {"spec": {"renewTime": "later"}}, namespace=NS)
    clock.now += 0.3
    assert await elector.try_acquire_or_renew() is False
    clock.now += 0.7
    assert await elector.try_acquire_or_renew() is True
    taken = spec_of(server)
    assert taken["holderIdentity"] == "replica-a" and taken["leaseTransitions"] == 1
    assert taken["leaseDurationSeconds"] == 1
    assert MICRO.fullmatch(taken["acquireTime"]) and MICRO.fullmatch(taken["renewTime"])


@pytest.mark.parametrize("spec", [None, "garbage", {}, {"holderIdentity": ""}, {"holderIdentity": None}])
async def test_a_lease_without_a_holder_is_taken_at_once(server: FakeApiServer, make_client: Callable[[], Client],
                                                         spec: Any) -> None:
    put_lease(server, spec)
    elector = LeaderElector(make_client(), config("replica-a"), clock=FakeClock())
    assert await elector.try_acquire_or_renew() is True
    assert spec_of(server)["holderIdentity"] == "replica-a" and spec_of(server)["leaseTransitions"] == 1


async def test_when_the_work_returns_or_fails_run_stops_and_releases(server: FakeApiServer,
                                                                     make_client: Callable[[], Client]) -> None:
    elector = LeaderElector(make_client(), config("replica-a"))

    async def quick(stop: asyncio.Event) -> None:
        await asyncio.sleep(0.05)

    await asyncio.wait_for(elector.run(quick), 5.0)
    assert not elector.is_leader and spec_of(server)["holderIdentity"] == ""

    async def broken(stop: asyncio.Event) -> None:
        await asyncio.sleep(0.05)
        raise RuntimeError("the controller crashed")

    with pytest.raises(RuntimeError, match="controller crashed"):
        await asyncio.wait_for(elector.run(broken), 5.0)
    spec = spec_of(server)
    assert spec["holderIdentity"] == "" and spec["leaseTransitions"] == 1 and not elector.is_leader


async def test_the_record_maps_to_the_lease_spec_and_back() -> None:
    acquired = datetime(2006, 1, 2, 15, 4, 5, 123456, tzinfo=UTC)
    record = LeaderElectionRecord("me", 15, acquired, acquired + timedelta(seconds=3), 7)
    spec = spec_from_record(record)
    assert spec == {"holderIdentity": "me", "leaseDurationSeconds": 15, "acquireTime": "2006-01-02T15:04:05.123456Z",
                    "renewTime": "2006-01-02T15:04:08.123456Z", "leaseTransitions": 7}
    assert record_from_spec(spec) == record


async def never(stop: asyncio.Event) -> None:  # pragma: no cover - a lead() that must not run
    raise AssertionError("lead() ran")


async def test_cancelling_a_candidate_that_never_led_writes_nothing(server: FakeApiServer,
                                                                   make_client: Callable[[], Client],
                                                                   until: Until) -> None:
    put_lease(server, {"holderIdentity": "someone-else", "leaseDurationSeconds": 60})
    before = spec_of(server)
    clock = FakeClock()
    elector = LeaderElector(make_client(), config("replica-a"), clock=clock, sleep=clock.sleep)
    lead: Callable[[asyncio.Event], Awaitable[None]] = never
    task = asyncio.create_task(elector.run(lead))
    await until(lambda: clock.sleeps == 1, what="a first try")
    for _ in range(3):  # tries, each seeing the lease held (for 60 s yet)
        await moved(clock, 0.3, until)
    assert not elector.is_leader and elector.status()["holder"] == "someone-else"
    await stop_task(task)
    assert spec_of(server) == before
    assert not [r for r in server.requests if r.method in ("PUT", "POST") and "/leases" in r.path]
