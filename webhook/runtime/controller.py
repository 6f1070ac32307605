"""A cluster-side controller (``label-nodes``, ``spot-controller``) as a component, run as
client-go components run: SIGTERM and SIGINT stop it, ``/metrics``, ``/healthz`` and ``/readyz``
(not ready while the cluster view is not synced) are served while it runs, its work waits for the
view's first lists, and with leader election it works only while it holds the Lease and exits
(code 1) when it loses it, so that its restart starts clean.

Torn down in reverse: the probes close, the work stops (and the Lease is released), the view stops.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from webhook.cluster import config as cluster_config
from webhook.cluster.cache import ClusterCache
from webhook.cluster.config import ClusterConfig
from webhook.exitcodes import Exit
from webhook.runtime import probes, sync
from webhook.runtime.leader import LeaderElectionConfig, LeaderElector, default_identity
from webhook.runtime.run import STOP, Component, Context, Endpoint

__all__ = ["Address", "ControllerConfig", "Election", "Metrics", "Work", "component", "worker"]

# The controller's loop: it runs until the event is set.
Work = Callable[[asyncio.Event], Awaitable[None]]
Status = Callable[[], Mapping[str, Mapping[str, Any]]]


@dataclass(frozen=True)
class Election:
    """Where the Lease is and client-go's timings (``--lease-*`` flags)."""

    name: str
    namespace: str | None = None  # None: the pod's own namespace, else "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True)
class Address:
    host: str
    port: int


@dataclass(frozen=True)
class ControllerConfig:
    """What every controller's common flags say: where the cluster is, the Lease (None: no leader
    election), where the probes listen (None: nowhere), and how long a one-shot pass waits for
    the first lists."""

    cluster: ClusterConfig
    election: Election | None = None
    probes: Address | None = Address("0.0.0.0", 8080)
    sync_timeout: float = 60.0


class Gauge(Protocol):
    def set(self, value: float) -> None: ...


class Metrics(Protocol):
    """What the run reads of a controller's metrics: the ``leader`` gauge (1 while this replica
    acts), the exposition, and where the cluster view's own figures come from."""

    @property
    def leader(self) -> Gauge: ...

    def render(self) -> bytes: ...

    def watch_cluster(self, status: Status) -> None: ...


def component(*, name: str, log: logging.Logger, cache: ClusterCache, work: Work, metrics: Metrics,
              config: ControllerConfig) -> Component:
    """The controller ``name`` doing ``work`` on ``cache``'s view, as ``config`` says."""
    metrics.watch_cluster(cache.status)
    endpoints: tuple[Endpoint, ...] = ()
    if config.probes is not None:
        app = probes.app(metrics=metrics.render, not_ready=lambda: sync.not_ready(cache))
        endpoints = (Endpoint(app, config.probes.host, config.probes.port),)
    address = config.probes
    return Component(
        name=name, log=log, endpoints=endpoints,
        contexts=(sync.watching(cache), worker(work, name=name, cache=cache, leader=metrics.leader,
                                               election=config.election, log=log)),
        describe=lambda: {"probes": f"{address.host}:{address.port}" if address else None,
                          "leaderElection": config.election is not None})


def worker(work: Work, *, name: str, cache: ClusterCache, leader: Gauge, election: Election | None,
           log: logging.Logger) -> Context:
    """A cleanup context running ``work`` once the view has synced (under the Lease when
    ``election`` says so); its end stops the run with its exit code. Torn down, it tells the work
    to stop, waits for it, and releases the Lease."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        halt = asyncio.Event()
        task = asyncio.create_task(_follow(work, name=name, cache=cache, leader=leader, election=election,
                                           halt=halt, log=log), name=f"{name}-worker")
        stop = app[STOP]
        task.add_done_callback(lambda done: stop.set(Exit.OK if done.cancelled() else done.result()))
        try:
            yield
        finally:
            halt.set()
            await asyncio.gather(task, return_exceptions=True)

    return context


async def _follow(work: Work, *, name: str, cache: ClusterCache, leader: Gauge, election: Election | None,
                  halt: asyncio.Event, log: logging.Logger) -> int:
    """0 when halted, 1 when the Lease was lost or the work failed."""
    try:
        if not await sync.synced(cache, halt, log):
            return Exit.OK
        if election is None:
            leader.set(1)
            await work(halt)
            return Exit.OK
        return await _lead(work, name=name, cache=cache, leader=leader, election=election, halt=halt, log=log)
    except Exception:  # noqa: BLE001 - the run ends, and says why
        log.exception(f"the {name} stopped")
        return Exit.FINDINGS


async def _lead(work: Work, *, name: str, cache: ClusterCache, leader: Gauge, election: Election,
                halt: asyncio.Event, log: logging.Logger) -> int:
    lease = LeaderElectionConfig(
        namespace=election.namespace or cluster_config.pod_namespace() or "default", name=election.name,
        identity=default_identity(), lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
        retry_period=election.retry_period, field_manager=name)

    async def lead(lost: asyncio.Event) -> None:
        leader.set(1)
        either = asyncio.Event()

        async def relay() -> None:
            await sync.first(halt, lost)
            either.set()

        relay_task = asyncio.create_task(relay())
        try:
            await work(either)
        finally:
            relay_task.cancel()
            leader.set(0)

    election_task = asyncio.create_task(LeaderElector(cache.client, lease).run(lead))
    halt_task = asyncio.create_task(halt.wait())
    done, _ = await asyncio.wait({election_task, halt_task}, return_when=asyncio.FIRST_COMPLETED)
    if halt_task in done:
        election_task.cancel()  # releases the Lease
        with contextlib.suppress(asyncio.CancelledError):
            await election_task
        return Exit.OK
    halt_task.cancel()
    error = election_task.exception()
    if error is not None:
        log.error(f"the {name} stopped", exc_info=error)
    else:
        log.error("lost the lease: exiting")
    return Exit.FINDINGS
