"""Reloading what a component reads from mounted files, by polling.

Secret and ConfigMap volumes give no reliable change events (the kubelet writes a new hidden
``..<timestamp>`` folder and swaps the ``..data`` symlink every visible file points through), so
a source (``tls.CertificateSource``, the server's policy set) is polled and compares the digest
of its files' content; ``every`` is the poll loop.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["DEFAULT_INTERVAL", "every"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0


async def every(interval: float, step: Callable[[], Awaitable[None]]) -> None:
    """Run ``step`` every ``interval`` seconds until cancelled; a failing step is logged, not fatal."""
    while True:
        await asyncio.sleep(interval)
        try:
            await step()
        except Exception:  # a reloader that dies would silently freeze the config
            log.exception("periodic reload failed")
