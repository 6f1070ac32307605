"""Running a cluster-side controller (``label-nodes``, ``spot-controller``) as client-go
components run: SIGTERM and SIGINT stop it, ``/metrics``, ``/healthz`` and ``/readyz`` are served
while it runs, it waits for its cluster view's first lists, and with leader election it works
only while it holds the Lease and exits when it loses it, so that its restart starts clean.

Following the cluster, it waits for the first lists however long the API server stays away (the
client logs each distinct cause once; every 30 s a line says what is still missing, naming the
server and the last cause). A one-shot pass (``--once``, ``--dry-run``) waits at most its sync
timeout, and stops at once when waiting cannot help (``client.final``: a refused connection, an
unknown host, a failed TLS verification, no credentials, 401, 403), as kubectl does.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from webhook.cluster import config as cluster_config
from webhook.runtime import probes
from webhook.cluster.cache import ClusterCache
from webhook.cluster.client import Client, describe, final
from webhook.runtime.leader import LeaderElectionConfig, LeaderElector, default_identity
from webhook.exitcodes import Exit

__all__ = ["Election", "first", "first_lists", "follow", "not_synced"]

log = logging.getLogger(__name__)

# The controller's loop: it runs until the event is set.
Work = Callable[[asyncio.Event], Awaitable[None]]
POLL = 0.05  # how often a one-shot pass looks for a failure that waiting cannot cure


@dataclass(frozen=True)
class Election:
    """Where the Lease is and client-go's timings (``--lease-*`` flags)."""

    name: str
    namespace: str | None = None  # None: the pod's own namespace, else "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


async def first(*events: asyncio.Event, timeout: float | None = None) -> None:
    """Wait until one of ``events`` is set, or ``timeout`` seconds have passed."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def not_synced(cache: ClusterCache) -> str:
    """Why the view is not synced, in one line naming the API server: the one cause every
    unsynced informer shares, else each informer's last error."""
    host = cache.client.config.host
    failing = {name: informer.last_error for name, informer in cache.informers.items() if not informer.synced}
    causes = set(failing.values())
    if causes == {""} or not causes:
        return f"no answer from the API server at {host} yet"
    if len(causes) == 1 and host in next(iter(causes)):
        return next(iter(causes))
    return f"at {host}: " + "; ".join(f"{name}: {error or 'not listed yet'}" for name, error in failing.items())


async def first_lists(cache: ClusterCache, *, timeout: float, what: str = "nodes and pods") -> tuple[str, int] | None:
    """Wait for the first lists of a one-shot pass: None once every informer listed, else the
    one-line error and the exit code: at once and 2 (a usage error: the kubeconfig, the network or
    RBAC must change) when waiting cannot help, at ``timeout`` and 1 otherwise."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await cache.wait_synced(max(0.0, min(POLL, deadline - loop.time()))):
        for informer in cache.informers.values():
            if not informer.synced and final(informer.last_exception):
                assert informer.last_exception is not None
                return describe(informer.last_exception, cache.client.config.host), Exit.USAGE
        if loop.time() >= deadline:
            return f"could not list the cluster's {what} within {timeout:g} s: {not_synced(cache)}", Exit.FINDINGS
    return None


async def follow(work: Work, cache: ClusterCache, client: Client, *, component: str, leader: Any,
                 metrics: Callable[[], bytes], metrics_host: str = "0.0.0.0", metrics_port: int = 0,
                 election: Election | None = None) -> int:
    """Run ``work`` until a signal; 0 when stopped, 1 when the Lease was lost or the work failed.
    ``leader`` is the metrics gauge saying whether this replica acts."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    runner = None
    if metrics_port:
        def not_ready() -> list[str]:
            return [f"{name} not synced" for name, s in cache.status().items() if not s["synced"]]

        runner = await probes.start(metrics_host, metrics_port, metrics=metrics, not_ready=not_ready)
    try:
        while not stop.is_set() and not await cache.wait_synced(30.0):  # the informers retry for ever
            log.warning(f"waiting for the cluster view: {not_synced(cache)}", extra={"fields": {
                name: s["last_error"] for name, s in cache.status().items() if not s["synced"]}})
        if election is None:
            leader.set(1)
            await work(stop)
            return 0
        return await _lead(work, client, component, leader, election, stop)
    finally:
        if runner is not None:
            await runner.cleanup()


async def _lead(work: Work, client: Client, component: str, leader: Any, election: Election,
                stop: asyncio.Event) -> int:
    lease = LeaderElectionConfig(
        namespace=election.namespace or cluster_config.pod_namespace() or "default", name=election.name,
        identity=default_identity(), lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
        retry_period=election.retry_period, field_manager=component)

    async def lead(lost: asyncio.Event) -> None:
        leader.set(1)
        either = asyncio.Event()

        async def relay() -> None:
            await first(stop, lost)
            either.set()

        relay_task = asyncio.create_task(relay())
        try:
            await work(either)
        finally:
            relay_task.cancel()
            leader.set(0)

    election_task = asyncio.create_task(LeaderElector(client, lease).run(lead))
    stop_task = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({election_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    if stop_task in done:
        election_task.cancel()  # releases the Lease
        with contextlib.suppress(asyncio.CancelledError):
            await election_task
        return 0
    stop_task.cancel()
    error = election_task.exception()
    if error is not None:
        log.error(f"the {component} stopped", exc_info=error)
    else:
        log.error("lost the lease: exiting")
    return 1
