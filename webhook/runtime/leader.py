"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that several replicas of a writer
(``label-nodes``, ``spot-controller``) never act twice.

client-go's ``tools/leaderelection`` with ``resourcelock.LeaseLock``, in asyncio, on the
project's async ``Client``. Functions followed (staging/src/k8s.io/client-go/tools/leaderelection):

* ``NewLeaderElector``: LeaseDuration > RenewDeadline > JitterFactor (1.2) * RetryPeriod, every
  duration positive, a non-empty identity -- ``ValueError`` otherwise.
* ``LeaderElector.tryAcquireOrRenew``: (1) the leader's fast path -- while it holds a lease it
  still deems valid, it PUTs its cached Lease (conditional on its resourceVersion) without a
  GET, falling back to the slow path on any error; (2) GET the Lease, 404 -> create it with
  ourselves as holder; (3) if the record differs from the one last observed, remember it with the
  LOCAL time of that observation (``setObservedRecord``); a record held by someone else whose
  observed time plus its leaseDurationSeconds is still in the future (``isLeaseValid``) is not
  ours to take; (4) otherwise write ourselves as holder: keep acquireTime and leaseTransitions
  when we already hold it, else acquireTime = now and leaseTransitions + 1. The PUT carries the
  observed resourceVersion, so two candidates racing for one expired lease cannot both win
  (the loser gets 409 and simply has not acquired it this round).
* ``acquire``: ``wait.JitterUntil(tryAcquireOrRenew, RetryPeriod, JitterFactor, sliding)`` --
  try at once, then wait RetryPeriod + rand * 1.2 * RetryPeriod (``wait.Jitter``) between tries.
* ``renew``: ``wait.Until`` every RetryPeriod of a ``PollImmediateUntil(RetryPeriod,
  tryAcquireOrRenew)`` bounded by RenewDeadline; a round that does not succeed within the
  deadline loses leadership. Each attempt is cancelled at the deadline (client-go passes the
  timeout context down to the request).
* ``release`` (ReleaseOnCancel): write an empty holder with leaseDurationSeconds 1, acquire and
  renew times now and the transitions kept, so another candidate takes over at once.
* ``resourcelock.LeaseSpecToLeaderElectionRecord`` / ``LeaderElectionRecordToLeaseSpec``: the
  record <-> Lease spec mapping (holderIdentity, leaseDurationSeconds, acquireTime, renewTime as
  RFC 3339 MicroTime, leaseTransitions); ``LeaseLock.Update`` PUTs the cached Lease with the new
  spec, so every update is conditional on the resourceVersion last read or written.

Expiry is judged only on the local monotonic clock (when the record was last seen to change),
never on the remote renewTime, so clock skew between replicas does not matter. That clock and
the waits measured on it (``clock`` and ``sleep``: the retry periods, the renew deadline) can
be given, as client-go's elector takes a ``clock.Clock``, so tests move time instead of waiting.

Where this differs from client-go, on purpose:

* leaseDurationSeconds is written rounded UP to whole seconds (client-go truncates): the API
  server rejects 0 (``ValidateLeaseSpec``: "must be greater than 0") and truncation could write a
  duration shorter than RenewDeadline, breaking the safety margin between the leader giving up
  and a candidate taking over.
* A record whose leaseDurationSeconds is missing or not a positive integer (a real API server
  cannot store one, the fake one can; client-go would read nil as 0 and take over at once) is
  given the configured lease duration: another holder may be alive, so it is taken over only
  after the record has stayed unchanged that long. Unparseable times and transitions read as
  missing; nothing in a strange spec raises.
* While renewing, seeing the lease held by another identity loses leadership at once instead of
  at the end of the renew deadline (client-go keeps its callback running until then).
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from webhook.cluster.client import ApiError, Client
from webhook.kube.times import format_micro_time, parse_time

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2  # leaderelection.JitterFactor
API_VERSION = "coordination.k8s.io/v1"
_SPEC_FIELDS = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions")


def default_identity() -> str:
    """``hostname_<uuid4>``: unique per process even when two replicas share a hostname
    (client-go users conventionally combine ``os.Hostname()`` with a UUID)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Which Lease, who we are, and client-go's timings (seconds): core components default to
    15 / 10 / 2. ``field_manager`` names the writer in the Lease's managedFields."""

    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True
    field_manager: str = "placement-webhook"

    def __post_init__(self) -> None:
        validate(self)


def validate(config: LeaderElectionConfig) -> None:
    """``NewLeaderElector``'s checks: timings that cannot work are refused."""
    if not config.namespace or not config.name:
        raise ValueError("the lease needs a namespace and a name")
    if not config.identity:
        raise ValueError("the lock identity is empty")
    for label, value in (("leaseDuration", config.lease_duration), ("renewDeadline", config.renew_deadline),
                         ("retryPeriod", config.retry_period)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{label} must be greater than zero (got {value!r})")
    if config.lease_duration <= config.renew_deadline:
        raise ValueError(f"leaseDuration ({config.lease_duration}s) must be greater than renewDeadline "
                         f"({config.renew_deadline}s)")
    if config.renew_deadline <= JITTER_FACTOR * config.retry_period:
        raise ValueError(f"renewDeadline ({config.renew_deadline}s) must be greater than retryPeriod*JitterFactor "
                         f"({config.retry_period}s * {JITTER_FACTOR})")


@dataclass(frozen=True)
class LeaderElectionRecord:
    """resourcelock.LeaderElectionRecord; ``lease_duration_seconds`` is None when the Lease's value
    is missing or not a positive integer."""

    holder_identity: str = ""
    lease_duration_seconds: int | None = None
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    leader_transitions: int = 0


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def record_from_spec(spec: Any) -> LeaderElectionRecord:
    """resourcelock.LeaseSpecToLeaderElectionRecord, tolerant: a field of the wrong type reads as
    missing (a non-string holder as its JSON text, so it still counts as somebody)."""
    if not isinstance(spec, Mapping):
        return LeaderElectionRecord()
    holder = spec.get("holderIdentity")
    if holder is not None and not isinstance(holder, str):
        holder = json.dumps(holder, sort_keys=True, default=str)
    duration = _int(spec.get("leaseDurationSeconds"))
    transitions = _int(spec.get("leaseTransitions"))
    return LeaderElectionRecord(
        holder_identity=holder or "",
        lease_duration_seconds=duration if duration is not None and duration > 0 else None,
        acquire_time=parse_time(spec.get("acquireTime")),
        renew_time=parse_time(spec.get("renewTime")),
        leader_transitions=transitions if transitions is not None and transitions >= 0 else 0)


def spec_from_record(record: LeaderElectionRecord) -> dict[str, Any]:
    """resourcelock.LeaderElectionRecordToLeaseSpec."""
    now = datetime.now(UTC)
    return {"holderIdentity": record.holder_identity,
            "leaseDurationSeconds": record.lease_duration_seconds or 1,
            "acquireTime": format_micro_time(record.acquire_time or now),
            "renewTime": format_micro_time(record.renew_time or now),
            "leaseTransitions": record.leader_transitions}


def _raw(spec: Any) -> str:
    """The record as observed, for change detection (client-go compares ``observedRawRecord``):
    the record's fields of the spec as they are, garbled or not, so any rewrite counts."""
    fields = {k: spec.get(k) for k in _SPEC_FIELDS} if isinstance(spec, Mapping) else {"spec": spec}
    return json.dumps(fields, sort_keys=True, default=str)


def jitter(period: float, max_factor: float) -> float:
    """wait.Jitter: a duration between ``period`` and ``period * (1 + max_factor)``."""
    if max_factor <= 0.0:
        max_factor = 1.0
    return period + random.random() * max_factor * period


class LeaderElector:
    """One candidate for one Lease. ``run(lead)`` acquires, runs ``lead`` while renewing, and
    returns when leadership is lost (or ``lead`` returns); cancelling it releases the lease."""

    def __init__(self, client: Client, config: LeaderElectionConfig, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, stop_grace: float | None = None) -> None:
        validate(config)
        self.client = client
        self.config = config
        self._clock = clock
        self._sleep = sleep
        # How long lead() may take to wind down once its stop event is set before it is cancelled:
        # well inside the margin between our giving up (renew deadline) and a takeover (lease duration).
        self.stop_grace = (min(1.0, (config.lease_duration - config.renew_deadline) / 2)
                           if stop_grace is None else stop_grace)
        self._collection = f"/apis/{API_VERSION}/namespaces/{config.namespace}/leases"
        self._path = f"{self._collection}/{config.name}"
        # Rounded up (see the module docstring); always > renew_deadline, as the config is.
        self._duration_seconds = max(1, math.ceil(config.lease_duration))
        # client-go's bookkeeping: the record last observed, its raw form and the local time it
        # was observed (changed); the Lease object last read or written (LeaseLock.lease).
        self._observed = LeaderElectionRecord()
        self._observed_raw: str | None = None
        self._observed_time = float("-inf")
        self._lease: dict[str, Any] | None = None
        self._reported_leader = ""
        self._leading = False
        self._lost = False
        self._renewed_at: float | None = None
        self._last_error = ""

    # -- state --
    @property
    def describe(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def is_leader(self) -> bool:
        """Leading now: acquired, not yet lost or released, and the last observed holder is us."""
        return self._leading and self._holds()

    @property
    def leader(self) -> str:
        """GetLeader: the holder last observed ("" when none)."""
        return self._observed.holder_identity

    def status(self) -> dict[str, Any]:
        """For metrics and logs."""
        renew = self._observed.renew_time
        return {"lease": self.describe, "identity": self.identity, "leader": self.is_leader,
                "holder": self._observed.holder_identity, "transitions": self._observed.leader_transitions,
                "renew_time": format_micro_time(renew) if renew else None,
                "last_renew": None if self._renewed_at is None else max(0.0, self._clock() - self._renewed_at),
                "lost": self._lost}

    def _holds(self) -> bool:
        """client-go's IsLeader: the observed record names us."""
        return self._observed.holder_identity == self.identity

    def _lease_valid(self, now: float) -> bool:
        """isLeaseValid: observed time + the record's lease duration is still ahead. A record
        without a usable duration gets ours."""
        seconds = self._observed.lease_duration_seconds
        duration = float(seconds) if seconds is not None else self.config.lease_duration
        return self._observed_time + duration > now

    def _set_observed(self, record: LeaderElectionRecord, raw: str) -> None:
        """setObservedRecord: remember the record and the local time we saw it."""
        self._observed = record
        self._observed_raw = raw
        self._observed_time = self._clock()

    def _report_transition(self) -> None:
        """maybeReportTransition (OnNewLeader): log a change of the observed holder once."""
        holder = self._observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if holder and holder != self.identity:
            log.info("lease %s: new leader %s", self.describe, holder)

    def _note_error(self, what: str, exc: BaseException) -> None:
        """Log an API failure once per distinct message (a dead API server is not a log flood)."""
        message = f"lease {self.describe}: {what}: {type(exc).__name__}: {exc}"
        if isinstance(exc, ApiError) and exc.status == 409:
            log.debug("%s", message)  # contention: another candidate wrote first
        elif message != self._last_error:
            log.warning("%s", message)
        else:
            log.debug("%s", message)
        self._last_error = message

    # -- the lock (resourcelock.LeaseLock) --
    async def _update(self, record: LeaderElectionRecord) -> None:
        """LeaseLock.Update: PUT the cached Lease with the record as its spec; conditional on the
        cached resourceVersion (409 if someone wrote in between)."""
        if self._lease is None:
            raise RuntimeError("lease not initialized, call get or create first")
        body = dict(self._lease)
        body["apiVersion"], body["kind"] = API_VERSION, "Lease"
        body["spec"] = spec_from_record(record)
        answer = await self.client.replace(self._path, body, field_manager=self.config.field_manager)
        self._lease = answer
        self._set_observed(record, _raw(body["spec"]))

    async def _create(self, record: LeaderElectionRecord) -> None:
        """LeaseLock.Create."""
        spec = spec_from_record(record)
        body = {"apiVersion": API_VERSION, "kind": "Lease",
                "metadata": {"name": self.config.name, "namespace": self.config.namespace}, "spec": spec}
        self._lease = await self.client.create(self._collection, body, field_manager=self.config.field_manager)
        self._set_observed(record, _raw(spec))

    # -- tryAcquireOrRenew --
    async def try_acquire_or_renew(self) -> bool:
        """One round of ``tryAcquireOrRenew``: True when we hold the lease afterwards. API and
        connection errors are logged and answer False; they never raise."""
        try:
            acquired = await self._try_acquire_or_renew()
        finally:
            self._report_transition()
        if acquired:
            self._renewed_at = self._clock()
            self._last_error = ""
        return acquired

    async def _try_acquire_or_renew(self) -> bool:
        now = datetime.now(UTC)
        mine = LeaderElectionRecord(holder_identity=self.identity, lease_duration_seconds=self._duration_seconds,
                                    acquire_time=now, renew_time=now)
        # 1. Fast path: the leader updates optimistically, assuming the record observed last time
        # is still current (its resourceVersion makes the PUT fail if it is not).
        if self._holds() and self._lease is not None and self._lease_valid(self._clock()):
            old = self._observed
            try:
                await self._update(replace(mine, acquire_time=old.acquire_time or now,
                                           leader_transitions=old.leader_transitions))
                return True
            except Exception as exc:  # noqa: BLE001 - ApiError, connection errors: take the slow path
                self._note_error("optimistic update failed, falling back to the slow path", exc)

        # 2. Obtain or create the record.
        try:
            lease = await self.client.get(self._path)
        except ApiError as exc:
            if exc.status != 404:
                self._note_error("error retrieving the lease", exc)
                return False
            try:
                await self._create(mine)
            except Exception as create_exc:  # noqa: BLE001 - e.g. 409 AlreadyExists: another won
                self._note_error("error initially creating the lease", create_exc)
                return False
            return True
        except Exception as exc:  # noqa: BLE001 - connection refused, timeouts, bad JSON
            self._note_error("error retrieving the lease", exc)
            return False
        self._lease = lease

        # 3. Record obtained: a change (judged on our own clock) means the holder is alive.
        spec = lease.get("spec")
        raw = _raw(spec)
        if raw != self._observed_raw:
            self._set_observed(record_from_spec(spec), raw)
        old = self._observed
        if old.holder_identity and self._lease_valid(self._clock()) and not self._holds():
            log.debug("lease %s is held by %s and has not yet expired", self.describe, old.holder_identity)
            return False

        # 4. Take it over (or renew it on the slow path).
        if self._holds():
            record = replace(mine, acquire_time=old.acquire_time or now, leader_transitions=old.leader_transitions)
        else:
            record = replace(mine, leader_transitions=old.leader_transitions + 1)
        try:
            await self._update(record)
        except Exception as exc:  # noqa: BLE001 - 409: another candidate updated first
            self._note_error("failed to update the lease", exc)
            return False
        return True

    async def release(self) -> bool:
        """release: if we hold the lease, hand it back (empty holder, 1 s) so a candidate takes
        over at once. True when there was nothing to release or the release was written."""
        self._leading = False
        if not self._holds() or self._lease is None:
            return True
        now = datetime.now(UTC)
        record = LeaderElectionRecord(holder_identity="", lease_duration_seconds=1, acquire_time=now,
                                      renew_time=now, leader_transitions=self._observed.leader_transitions)
        try:
            await self._update(record)
        except Exception as exc:  # noqa: BLE001 - the lease then expires by itself
            log.error("lease %s: failed to release the lock: %s: %s", self.describe, type(exc).__name__, exc)
            return False
        log.info("lease %s: released by %s", self.describe, self.identity)
        return True

    # -- loops --
    async def _acquire(self) -> None:
        """acquire: try now, then every RetryPeriod jittered by JitterFactor, until it succeeds."""
        log.info("attempting to acquire leader lease %s as %s...", self.describe, self.identity)
        while not await self.try_acquire_or_renew():
            await self._sleep(jitter(self.config.retry_period, JITTER_FACTOR))
        log.info("successfully acquired lease %s as %s", self.describe, self.identity)

    async def _renew(self) -> None:
        """renew: every RetryPeriod, retry tryAcquireOrRenew every RetryPeriod until it succeeds;
        returns (leadership lost) when a round does not succeed within RenewDeadline."""
        while await self._renew_round():
            await self._sleep(self.config.retry_period)

    async def _renew_round(self) -> bool:
        """PollImmediateUntil(RetryPeriod, tryAcquireOrRenew) under a RenewDeadline timeout, on
        the elector's clock: True once renewed, False when the deadline passes first (the attempt
        under way is cancelled then) or the lease is seen held by another."""
        retry = self.config.retry_period
        deadline = self._clock() + self.config.renew_deadline
        while not await self._within(deadline - self._clock(), self.try_acquire_or_renew()):
            holder = self._observed.holder_identity
            if holder and holder != self.identity:
                log.info("lease %s: lost, it is now held by %s", self.describe, holder)
                return False
            left = deadline - self._clock()
            if left > 0:
                await self._sleep(min(retry, left))
            if self._clock() >= deadline:
                log.info("lease %s: failed to renew within %ss, leadership lost", self.describe,
                         self.config.renew_deadline)
                return False
        return True

    async def _within(self, seconds: float, attempt: Awaitable[bool]) -> bool:
        """``attempt``'s answer, or False when it has not answered within ``seconds`` (``sleep``'s
        seconds) and is cancelled."""
        work = asyncio.ensure_future(attempt)
        timer = asyncio.ensure_future(self._sleep(max(0.0, seconds)))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not work.done():
                work.cancel()
            await asyncio.gather(work, timer, return_exceptions=True)
        return not work.cancelled() and work.result()

    async def run(self, lead: Callable[[asyncio.Event], Awaitable[None]]) -> None:
        """Acquire, then run ``lead(stop_event)`` while renewing.

        When leadership is lost the event is set, ``lead`` gets ``stop_grace`` seconds to return
        and is then cancelled, and run() returns (callers usually exit the process then, as
        client-go components do, so a restart starts clean). When ``lead`` returns by itself,
        renewal stops and run() returns; when it raises, run() raises its exception.
        Cancelling run() stops ``lead`` the same way and then releases the lease
        (``release_on_cancel``); the lease is released after ``lead`` has ended, never before.
        """
        self._lost = False
        await self._acquire()
        self._leading = True
        stop = asyncio.Event()

        async def work() -> None:
            await lead(stop)

        worker = asyncio.create_task(work(), name=f"lead {self.describe}")
        renewer = asyncio.create_task(self._renew(), name=f"renew {self.describe}")
        try:
            await asyncio.wait({worker, renewer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost = renewer.done() and not renewer.cancelled()
            if lost:
                self._leading = False
                self._lost = True
            stop.set()
            ended = await self._stop_work(worker)
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
            self._leading = False
            if not lost:
                log.info("lease %s: stopped leading", self.describe)
            if self.config.release_on_cancel and ended:
                try:
                    await asyncio.wait_for(self.release(), self.config.renew_deadline)
                except TimeoutError:
                    log.error("lease %s: the release timed out; the lease will expire", self.describe)
        failure = worker.exception() if worker.done() and not worker.cancelled() else None
        if failure is not None:
            raise failure

    async def _stop_work(self, worker: asyncio.Task[None]) -> bool:
        """Let the work end within the grace, then cancel it; True once it has ended."""
        if not worker.done():
            await asyncio.wait({worker}, timeout=self.stop_grace)
        if not worker.done():
            worker.cancel()
            await asyncio.wait({worker}, timeout=max(self.config.renew_deadline, self.stop_grace))
        if not worker.done():
            log.error("lease %s: the leader's work ignores cancellation; not releasing the lease", self.describe)
            return False
        return True


__all__ = ["JITTER_FACTOR", "LeaderElectionConfig", "LeaderElectionRecord", "LeaderElector", "default_identity",
           "record_from_spec", "spec_from_record"]
