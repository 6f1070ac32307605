"""Reloading what a component reads from mounted files, by polling.

Secret and ConfigMap volumes give no reliable change events (the kubelet writes a new hidden
``..<timestamp>`` folder and swaps the ``..data`` symlink every visible file points through), so
a source (``tls.CertificateSource``, the server's policy set) is polled and compares the digest
of its files' content; ``every`` is the poll loop, and ``periodically`` runs it as long as a
component runs.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from webhook.runtime.run import Context

__all__ = ["DEFAULT_INTERVAL", "Step", "every", "periodically"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0

Step = Callable[[], Awaitable[None]]


async def every(interval: float, step: Step) -> None:
    """Run ``step`` every ``interval`` seconds until cancelled; a failing step is logged, not fatal."""
    while True:
        await asyncio.sleep(interval)
        try:
            await step()
        except Exception:  # a reloader that dies would silently freeze the config
            log.exception("periodic reload failed")


def periodically(step: Step, *, interval: float, name: str, first: Step | None = None) -> Context:
    """A cleanup context: ``first`` (else ``step``) once before the component serves, which may
    refuse to start; then ``step`` every ``interval`` seconds until the component stops."""

    async def context(_: web.Application) -> AsyncIterator[None]:
        await (first or step)()
        task = asyncio.create_task(every(interval, step), name=name)
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    return context
