"""The rebalancer: every interval, the cluster view as a ``decide.World``, ``decide.plan`` on it,
the moves made through the Eviction API, and each moved pod's replacement followed to its node.

What is safe to move is ``plan``'s to say, from the world alone (an owner busy while one of its
pods is not Ready or terminating, a PodDisruptionBudget without a disruption to spare, the rate
limit, one pod per owner): a controller restarted in the middle of a pass sees the evicted pod
terminating, or its replacement not Ready yet, and leaves that owner alone, so it never evicts
twice. Nothing is decided while the view is not synced: a half-listed cluster would look empty.

Evictions are the drain's (``spot.drain.Evictor``: a 429 from a budget, a 404 for a pod already
gone, a refusal, an outage are answers, counted and logged, never raised); they go one after
another, at most ``max_evictions`` a pass. A moved pod gets a ``Rebalanced`` Event saying where
it was, where the simulation expects its replacement, and the points it gains.

Then the owner is followed: the first pod of the moved pod's own controller (its ReplicaSet,
where ``plan``'s owner is the Deployment above it) that was not there at the eviction and is
bound to a node is the replacement. On the node the simulation chose, the
prediction held; anywhere else it is a misprediction: counted, told in a Warning Event
(``RebalanceMispredicted``) on the replacement, and the owner is backed off, left out of the
next passes (``plan``'s ``backoff``) for ``backoff`` intervals, doubled with each further
misprediction up to ``max_backoff`` intervals (2 and 64 by default: 2 minutes to about an hour
at the default interval); a prediction that holds forgives the owner. A replacement
not seen within ``follow_timeout`` is counted as such and no longer awaited.

Every time comes from one ``Clock`` (``spot.drain``'s), which tests replace.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.cluster.client import Client
from webhook.cluster.cache import NAMESPACES, NODES, PRIORITY_CLASSES, ClusterCache
from webhook.cluster.pods import PODS
from webhook.cluster.snapshot import DEPLOYMENTS, PDBS, REPLICASETS, STATEFULSETS
from webhook.rebalance import decide
from webhook.rebalance.metrics import RebalanceMetrics
from webhook.rebalance.model import Decision, Verdict
from webhook.spot.config import SpotConfig
from webhook.spot.controller import EventRecorder
from webhook.spot.drain import SYSTEM_CLOCK, Clock, Evictor, controller_uid, pod_key
from webhook.spot.nodes import SPOT, capacity, classify

__all__ = ["COMPONENT", "PassReport", "Planner", "RebalanceSettings", "Rebalancer", "expected_nodes", "spot_share"]

log = logging.getLogger(__name__)

COMPONENT = "rebalance"
# decide.plan's shape: the world, the settings, and the owners backed off.
Planner = Callable[..., list[Decision]]


@dataclass(frozen=True)
class RebalanceSettings:
    """The controller's own settings; what to move is ``policy``'s (``decide.Settings``)."""

    policy: decide.Settings
    interval: float = 60.0  # seconds between passes
    dry_run: bool = False
    eviction_version: str = "policy/v1"
    backoff: float = 2.0  # intervals an owner is left alone after its first misprediction
    max_backoff: float = 64.0  # intervals at most, however many mispredictions in a row
    follow_timeout: float = 600.0  # seconds a moved pod's replacement is awaited


@dataclass
class _Follow:
    """A moved pod's controller, until its replacement is bound: ``known`` are the uids of the
    controller's pods at the eviction; ``early`` a replacement bound before the eviction's answer
    came. The decision's owner (what ``plan`` backs off) may be the controller's own owner."""

    decision: Decision
    since: float
    known: frozenset[str]
    evicted: bool = False
    early: tuple[Mapping[str, Any], str] | None = None


@dataclass
class PassReport:
    """One pass: every decision, and the eviction answers of the moves by pod key."""

    decisions: list[Decision] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    synced: bool = True


class Rebalancer:
    """Follows ``cache`` (nodes, pods, PodDisruptionBudgets, priority classes, namespaces) and
    moves what ``plan`` says, one interval at a time."""

    def __init__(self, client: Client, cache: ClusterCache, spot: SpotConfig, settings: RebalanceSettings, *,
                 metrics: RebalanceMetrics | None = None, clock: Clock = SYSTEM_CLOCK,
                 plan: Planner = decide.plan) -> None:
        self.client = client
        self.cache = cache
        self.spot = spot
        self.settings = settings
        self.metrics = metrics or RebalanceMetrics()
        self.clock = clock
        self.plan = plan
        self.evictor = Evictor(client, api_version=settings.eviction_version, dry_run=settings.dry_run)
        self.events = EventRecorder(client, clock=clock, metrics=self.metrics, dry_run=settings.dry_run,
                                    component=COMPONENT)
        self.pods = cache.pods_by_node(functools.partial(decide.project_pod, spot=spot))
        self.pods.listen(self._on_pod)
        self.following: dict[str, _Follow] = {}  # by the moved pod's controller uid
        self.strikes: dict[str, int] = {}  # mispredictions in a row, by the decisions' owner uid
        self.backed_off_until: dict[str, float] = {}  # by the decisions' owner uid, Unix time
        self.passes = 0  # passes done: tests wait for one instead of sleeping

    # -- the loop --
    async def run(self, stop: asyncio.Event) -> None:
        """A pass every ``interval`` seconds until ``stop``."""
        try:
            while not stop.is_set():
                try:
                    await self.run_pass()
                except Exception:  # noqa: BLE001 - a bug in one pass must not stop the controller
                    self.metrics.passes.labels("failed").inc()
                    log.exception("rebalance pass failed")
                await self.clock.wait(stop, self.settings.interval)
        finally:
            await self.events.close()

    def synced(self) -> bool:
        return all(informer.synced for informer in self.cache.informers.values())

    async def run_pass(self) -> PassReport:
        """Decide on the view as it is now and make the moves; nothing while it is not synced."""
        if not self.synced():
            self.metrics.passes.labels("not-synced").inc()
            log.warning("the cluster view is not synced: no rebalance this interval")
            self.passes += 1
            return PassReport(synced=False)
        now = self.clock.time()
        self._expire(now)
        report = PassReport(self.decisions(now))
        awaited = {follow.decision.candidate.owner.uid for follow in self.following.values()}
        moves = [d for d in report.decisions if d.verdict is Verdict.MOVE and d.candidate.owner.uid not in
                 awaited][:self.settings.policy.max_evictions]
        for decision in moves:
            report.answers[decision.candidate.key] = await self._move(decision)
        self.metrics.passes.labels("done").inc()
        log.info("rebalance pass", extra={"fields": {
            "candidates": len(report.decisions), "moves": len(moves),
            "evicted": sum(answer == "evicted" for answer in report.answers.values()),
            "backedOff": len(self.backed_off(now))}})
        self.passes += 1
        return report

    def decisions(self, now: float | None = None) -> list[Decision]:
        """``plan`` on the view as it is now (the owners backed off at ``now`` left out); the
        metrics of what it found."""
        now = self.clock.time() if now is None else now
        world = self.world(now)
        backoff = self.backed_off(now)
        decisions = self.plan(world, self.settings.policy, backoff=backoff)
        self.metrics.decided(decisions)
        self.metrics.spot_share.set(spot_share(world, self.spot))
        self.metrics.backed_off.set(len(backoff))
        return decisions

    def world(self, now: float) -> decide.World:
        """The view as plain dicts (a resource the API server does not serve: none of it)."""
        informers = self.cache.informers

        def values(name: str) -> Sequence[Mapping[str, Any]]:
            return informers[name].values() if name in informers else []

        return decide.World(nodes=values(NODES), pods=values(PODS), pdbs=values(PDBS),
                            priority_classes=values(PRIORITY_CLASSES), namespaces=values(NAMESPACES),
                            replicasets=values(REPLICASETS), deployments=values(DEPLOYMENTS),
                            statefulsets=values(STATEFULSETS), now=now)

    def backed_off(self, now: float) -> frozenset[str]:
        return frozenset(uid for uid, until in self.backed_off_until.items() if until > now)

    # -- a move --
    async def _move(self, decision: Decision) -> str:
        """Evict the candidate (as the view holds it now); the Eviction API's answer."""
        candidate = decision.candidate
        pod = self.pods.assigned_to(candidate.node).get(candidate.key)
        if pod is None or (pod.get("metadata") or {}).get("uid") != candidate.uid:
            self.metrics.evictions.labels("gone").inc()
            log.info("rebalance: the pod left before its eviction", extra={"fields": {"pod": candidate.key}})
            return "gone"
        controller = controller_uid(pod)
        # Followed before the eviction is sent: its replacement may be in the view before the answer.
        # (plan never moves a pod without a controller; were it to, nothing would replace it.)
        follow = _Follow(decision, self.clock.time(), self._owned_by(controller))
        if controller:
            self.following[controller] = follow
        result, message = await self.evictor.evict(pod)
        self.metrics.evictions.labels(result).inc()
        fields = {"pod": candidate.key, "owner": f"{candidate.owner.kind}/{candidate.owner.name}",
                  "from": candidate.node, "to": decision.target, "gain": decision.gain, "result": result}
        if result != "evicted":
            self.following.pop(controller, None)
            level = logging.WARNING if result == "failed" else logging.INFO
            log.log(level, "rebalance: not evicted", extra={"fields": {**fields, "message": message}})
            return result
        follow.evicted = True
        self.metrics.gain.inc(max(0, decision.gain))
        self.events.record(pod, "Pod", "Normal", "Rebalanced", moved_message(decision))
        log.info("rebalance: evicted", extra={"fields": fields})
        if follow.early is not None:
            self._placed(controller, *follow.early)
        return result

    def _owned_by(self, controller: str) -> frozenset[str]:
        return frozenset(str((p.get("metadata") or {}).get("uid")) for p in self.cache.informers[PODS].values()
                         if controller_uid(p) == controller)

    # -- following the owner --
    def _on_pod(self, key: str, before: str | None, after: str | None, old: Mapping[str, Any] | None,
                new: Mapping[str, Any] | None) -> None:
        if new is None or after is None or not self.following:
            return
        controller = controller_uid(new)
        follow = self.following.get(controller)
        if follow is None or str((new.get("metadata") or {}).get("uid")) in follow.known:
            return
        if not follow.evicted:
            follow.early = follow.early or (new, after)
            return
        self._placed(controller, new, after)

    def _placed(self, controller: str, pod: Mapping[str, Any], node: str) -> None:
        """The replacement of ``controller``'s moved pod is bound to ``node``: was that the simulation's?"""
        decision = self.following.pop(controller).decision
        owner = decision.candidate.owner.uid
        expected = expected_nodes(decision)
        fields = {"pod": pod_key(pod), "owner": f"{decision.candidate.owner.kind}/{decision.candidate.owner.name}",
                  "expected": sorted(expected), "node": node}
        if node in expected:
            self.metrics.replacements.labels("as-simulated").inc()
            self.strikes.pop(owner, None)
            self.backed_off_until.pop(owner, None)
            log.info("rebalance: the replacement is where the simulation said", extra={"fields": fields})
            return
        strikes = self.strikes[owner] = self.strikes.get(owner, 0) + 1
        wait = self.settings.interval * min(self.settings.max_backoff, self.settings.backoff * 2 ** (strikes - 1))
        self.backed_off_until[owner] = self.clock.time() + wait
        self.metrics.replacements.labels("mispredicted").inc()
        self.metrics.mispredictions.inc()
        self.events.record(pod, "Pod", "Warning", "RebalanceMispredicted",
                           f"the scheduler bound the replacement of {decision.candidate.key} to {node}, not to "
                           f"{' or '.join(sorted(expected))} as simulated: {decision.candidate.owner.kind} "
                           f"{decision.candidate.owner.name} is left alone for {wait:g} s")
        log.warning("rebalance: misprediction", extra={"fields": {**fields, "backoff": wait}})

    def _expire(self, now: float) -> None:
        """Replacements awaited longer than ``follow_timeout`` are no longer awaited."""
        for controller, follow in list(self.following.items()):
            if now - follow.since >= self.settings.follow_timeout:
                del self.following[controller]
                self.metrics.replacements.labels("not-seen").inc()
                log.info("rebalance: no replacement seen in time", extra={"fields": {
                    "pod": follow.decision.candidate.key, "seconds": self.settings.follow_timeout}})


def expected_nodes(decision: Decision) -> frozenset[str]:
    """Where the simulation would put the replacement: its target (and the nodes tied with it)."""
    return frozenset(n for n in (decision.target, *decision.ties) if n)


def moved_message(decision: Decision) -> str:
    """The Rebalanced Event's words: from where, where the simulation expects the replacement (or
    a node tied with it), and the points."""
    tied = f" (or {', '.join(sorted(decision.ties))}, tied)" if decision.ties else ""
    return (f"evicted from {decision.candidate.node} to move it: expected on {decision.target}{tied}, "
            f"{decision.score_now} -> {decision.score_there} preference points ({decision.gain:+d})")


def spot_share(world: decide.World, spot: SpotConfig) -> float:
    """Of the bound, running interruptible pods, the share on spot nodes (1.0 when there are none)."""
    nodes = {str((n.get("metadata") or {}).get("name")): n for n in world.nodes}
    classes = {str((c.get("metadata") or {}).get("name")): c for c in world.priority_classes}
    on_spot = interruptible = 0
    for pod in world.pods:
        node = nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if node is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if classify(pod, spot, classes).interruptible:
            interruptible += 1
            on_spot += capacity(node, spot) == SPOT
    return on_spot / interruptible if interruptible else 1.0
