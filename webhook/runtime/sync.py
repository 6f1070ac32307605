"""A component's cluster view while it runs: watched from start to stop, its readiness, and the
waits for its first lists.

Following the cluster, a component waits for the first lists however long the API server stays
away (the client logs each distinct cause once; every 30 s a line says what is still missing,
naming the server and the last cause). A one-shot pass (``--once``, ``--dry-run``) waits at most
its sync timeout, and stops at once when waiting cannot help (``client.final``: a refused
connection, an unknown host, a failed TLS verification, no credentials, 401, 403), as kubectl does.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from webhook.cluster.cache import ClusterCache
from webhook.cluster.client import describe, final
from webhook.exitcodes import Exit
from webhook.runtime.run import Context

__all__ = ["NotSynced", "first", "first_lists", "not_ready", "not_synced", "synced", "watched", "watching"]

POLL = 0.05  # how often a one-shot pass looks for a failure that waiting cannot cure
PATIENCE = 30.0  # seconds between the lines saying what a following component still waits for


@contextlib.asynccontextmanager
async def watched(cache: ClusterCache) -> AsyncIterator[ClusterCache]:
    """The cache's informers running: started on entry; stopped, and its client closed, on exit."""
    await cache.start()
    try:
        yield cache
    finally:
        await cache.stop()
        await cache.client.close()


def watching(cache: ClusterCache) -> Context:
    """``watched`` as a cleanup context: the view runs as long as the component."""

    async def context(_: web.Application) -> AsyncIterator[None]:
        async with watched(cache):
            yield

    return context


def not_ready(cache: ClusterCache) -> list[str]:
    """``/readyz``'s reasons: each resource not listed yet."""
    return [f"{name} not synced" for name, status in cache.status().items() if not status["synced"]]


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


async def synced(cache: ClusterCache, stop: asyncio.Event, log: logging.Logger) -> bool:
    """Wait for the view's first lists however long it takes, saying every ``PATIENCE`` seconds
    what is missing; False when ``stop`` came first."""
    listed = asyncio.ensure_future(_listed(cache))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        while True:
            await asyncio.wait({listed, stopping}, timeout=PATIENCE, return_when=asyncio.FIRST_COMPLETED)
            if stopping.done():
                return False
            if listed.done():
                return True
            log.warning(f"waiting for the cluster view: {not_synced(cache)}", extra={"fields": {
                name: s["last_error"] for name, s in cache.status().items() if not s["synced"]}})
    finally:
        # Plain waits, cancelled and awaited: nothing is left behind with an error to report.
        for task in (listed, stopping):
            task.cancel()
        await asyncio.gather(listed, stopping, return_exceptions=True)


async def _listed(cache: ClusterCache) -> None:
    for informer in list(cache.informers.values()):
        await informer.synced_event.wait()


@dataclass(frozen=True)
class NotSynced:
    """Why a one-shot pass could not start, in one line, and the exit code it ends with."""

    message: str
    code: int


async def first_lists(cache: ClusterCache, *, timeout: float, what: str = "nodes and pods") -> NotSynced | None:
    """Wait for the first lists of a one-shot pass: None once every informer listed, else why
    not: at once and exit code 2 (a usage error: the kubeconfig, the network or RBAC must change)
    when waiting cannot help, at ``timeout`` and 1 otherwise."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await cache.wait_synced(max(0.0, min(POLL, deadline - loop.time()))):
        for informer in cache.informers.values():
            if not informer.synced and final(informer.last_exception):
                assert informer.last_exception is not None
                return NotSynced(describe(informer.last_exception, cache.client.config.host), Exit.USAGE)
        if loop.time() >= deadline:
            return NotSynced(f"could not list the cluster's {what} within {timeout:g} s: {not_synced(cache)}",
                             Exit.FINDINGS)
    return None
