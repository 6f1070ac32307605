"""The server's background audit: every ``interval`` seconds, and after each change of the policy
set, read the cluster once, hold every workload against the policies in force, and write the
verdicts as PolicyReports (``reports``, ``writer``). Only the holder of the server's Lease runs it.

Admission never waits for it and never slows for long because of it: it runs in a task of its
own; the cluster is read as ``explain --kubeconfig`` reads it (``cluster.snapshot.read_once``:
paginated lists, each page decoded between other work on the event loop); the CPU-heavy part,
building the scheduler's model and auditing every workload, runs in a worker thread; and the
reports are written one request at a time. A pass that fails (the cluster cannot be read, the
audit raises, a write is refused) is logged and counted, and the next pass comes at its time.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from webhook.audit import reports
from webhook.audit.model import RULE_ROLLOUT, Result, Status
from webhook.audit.scan import Auditor, AuditState, Options
from webhook.audit.reports import Reports
from webhook.audit.writer import ReportWriter, Written
from webhook.cluster.config import ClusterConfig
from webhook.cluster.discovery import Unlisted
from webhook.cluster.snapshot import Snapshot, read_once
from webhook.kube.kinds import Target, Targets
from webhook.policy.policyset import PolicySet
from webhook.runtime import sync
from webhook.scheduler.plan import Options as SchedulerOptions

__all__ = ["Audit", "BackgroundAudit", "Pass", "SnapshotAudit", "out_of_policy", "read_cluster",
           "rollout_risks"]

log = logging.getLogger(__name__)

READ_TIMEOUT = 120.0  # seconds a pass may spend reading the cluster
FREED_AT_ONCE = 1000  # objects of the snapshot freed in one step after a pass

# The audit proper, run in a worker thread: the snapshot and the policy set in, the verdicts out.
Audit = Callable[[Snapshot, PolicySet], list[Result]]
Read = Callable[[ClusterConfig], Awaitable[Snapshot | str]]


class Sink(Protocol):
    """Where a pass's figures go (the server's ``Metrics``)."""

    def observe_audit(self, *, result: str, seconds: float, out_of_policy: Mapping[tuple[str, str], int],
                      rollout_risks: Mapping[str, int]) -> None: ...


@dataclass
class Pass:
    """One pass: ``result`` is success, or why it stopped (``unread``, ``failed``)."""

    result: str
    seconds: float
    results: list[Result] = field(default_factory=list)
    written: Written | None = None


def out_of_policy(results: Iterable[Result]) -> dict[tuple[str, str], int]:
    """(policy, namespace) -> the workloads failing it ("" for cluster-scoped ones)."""
    failing = {(r.policy, r.resource.namespace or "", r.resource) for r in results if r.status is Status.FAIL}
    counted: dict[tuple[str, str], int] = {}
    for policy, namespace, _ in failing:
        counted[(policy, namespace)] = counted.get((policy, namespace), 0) + 1
    return counted


def rollout_risks(results: Iterable[Result]) -> dict[str, int]:
    """namespace -> the workloads whose next rolling update would not finish (a ``fail`` or ``warn``
    of the rollout rule)."""
    risky = {r.resource for r in results if r.rule == RULE_ROLLOUT and r.status in (Status.FAIL, Status.WARN)}
    counted: dict[str, int] = {}
    for resource in risky:
        counted[resource.namespace or ""] = counted.get(resource.namespace or "", 0) + 1
    return counted


async def read_cluster(where: ClusterConfig, *, kinds: Iterable[Target] = ()) -> Snapshot | str:
    """The cluster as a pass reads it (``read_once``: the projections keep the workloads'
    annotations and resourceVersion, which admission and the Auditor's cache read), with every
    workload kind of ``kinds`` (the server's: built-in and declared) listed where served."""
    return await read_once(where, timeout=READ_TIMEOUT, kinds=kinds)


class SnapshotAudit:
    """The audit of a snapshot (``scan.Auditor`` over an ``AuditState``), run in the worker
    thread, its scheduling messages worded as the cluster's kube-scheduler release words them.
    One Auditor is kept while the policy set (the same object) and the server's version stay, so
    that a workload whose resourceVersion, namespace labels and view did not change keeps its
    policy verdicts."""

    def __init__(self, targets: Targets) -> None:
        self.targets = targets
        self._auditor: Auditor | None = None
        self._version: tuple[int, int] | None = None

    def __call__(self, snapshot: Snapshot, policies: PolicySet) -> list[Result]:
        if self._auditor is None or self._auditor.policies is not policies or self._version != snapshot.server_version:
            options = Options(scheduler=SchedulerOptions.for_version(snapshot.server_version))
            self._auditor = Auditor(policies, targets=self.targets, options=options)
            self._version = snapshot.server_version
        # A full collection holds the interpreter for as long as it walks every object, the event
        # loop's thread included: over a large snapshot that took 0.6 s. The snapshot and the state
        # built from it are only read during the pass, so they are frozen (left out of collections)
        # and given back to the collector after it.
        gc.freeze()
        try:
            state = AuditState.from_objects(snapshot.objects, targets=self.targets,
                                            match_label_keys=snapshot.match_label_keys)
            gc.freeze()
            return self._auditor.full(state)
        finally:
            gc.unfreeze()


def _now() -> datetime:
    return datetime.now(UTC)


class BackgroundAudit:
    """Audits the cluster at ``where`` against ``policies()`` and writes the reports with ``writer``."""

    def __init__(self, writer: ReportWriter, *, where: ClusterConfig, policies: Callable[[], PolicySet | None],
                 audit: Audit, sink: Sink, read: Read | None = None, now: Callable[[], datetime] = _now,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.writer = writer
        self.where = where
        self.policies = policies
        self.audit = audit
        self.sink = sink
        self._read = read if read is not None else read_cluster
        self._now = now
        self._clock = clock
        self.wake = asyncio.Event()  # the policy set changed: audit again now
        self._unread = ""  # the last read failure logged at WARNING
        self._unlisted: tuple[Unlisted, ...] = ()  # the kinds last said not listed

    async def once(self) -> Pass:
        """One pass: read, audit (in a thread), write; its figures go to the sink."""
        started = self._clock()
        outcome = await self._pass(started)
        self.sink.observe_audit(result=outcome.result, seconds=outcome.seconds,
                                out_of_policy=out_of_policy(outcome.results) if outcome.result == "success" else {},
                                rollout_risks=rollout_risks(outcome.results) if outcome.result == "success" else {})
        return outcome

    async def _pass(self, started: float) -> Pass:
        policy_set = self.policies()
        if policy_set is None or not policy_set.loaded:
            return Pass("no_policies", self._clock() - started)
        snapshot = await self._read(self.where)
        if isinstance(snapshot, str):
            level = logging.DEBUG if snapshot == self._unread else logging.WARNING
            self._unread = snapshot
            log.log(level, f"audit: the cluster was not read: {snapshot}")
            return Pass("unread", self._clock() - started)
        self._unread = ""
        self._say_unlisted(snapshot.unlisted)
        # The thread takes the snapshot over: its last reference dies there, not on the loop.
        handed = [snapshot]
        del snapshot
        try:  # the reports are built in the thread too: thousands of results take a while
            results, built = await asyncio.to_thread(self._audit, handed, policy_set, self._now())
        except Exception:  # noqa: BLE001 - a bug in the audit must not stop the server
            log.exception("audit: the audit failed; the reports are left as they were")
            return Pass("failed", self._clock() - started)
        written = await self.writer.write(built)
        seconds = self._clock() - started
        log.info("audit written as policy reports", extra={"fields": {
            "results": len(results), "seconds": round(seconds, 3), **written.fields()}})
        return Pass("success", seconds, results, written)

    def _say_unlisted(self, unlisted: tuple[Unlisted, ...]) -> None:
        """The kinds a pass did not list, logged when they change: refused ones (their objects are
        in no report) at WARNING, each with the permission wanted; those not served at INFO."""
        if unlisted == self._unlisted:
            return
        self._unlisted = unlisted
        for u in unlisted:
            if u.refused:
                log.warning(f"audit: {u.shown()} not audited: {u.reason}")
        unserved = [u.shown() for u in unlisted if not u.refused]
        if unserved:
            log.info(f"audit: not served by the API server, so none to audit: {', '.join(unserved)}")

    def _audit(self, handed: list[Snapshot], policies: PolicySet, now: datetime) -> tuple[list[Result], Reports]:
        """In the worker thread: audit the snapshot handed over, build the reports, and free the
        snapshot's objects a slice at a time (one ``del`` of a whole cluster holds the interpreter
        until every object is gone; between slices the event loop gets its turn)."""
        snapshot = handed.pop()
        try:
            results = self.audit(snapshot, policies)
            return results, reports.build(results, now=now)
        finally:
            objects = snapshot.objects
            while objects:
                del objects[-FREED_AT_ONCE:]

    async def run(self, stop: asyncio.Event, *, interval: float) -> None:
        """Passes until ``stop``: at once, then every ``interval`` seconds and on ``wake``."""
        while not stop.is_set():
            self.wake.clear()
            await self.once()
            await sync.first(stop, self.wake, timeout=interval)
