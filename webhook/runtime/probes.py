"""The probes of a long-lived component: ``/metrics``, ``/healthz`` and ``/readyz``.

``label-nodes`` and the other controllers serve them on a port of their own, the extender beside
its verbs; a readiness check that fails says why, in the JSON error shape every server of the
project answers errors in (``errors``).
"""
from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from webhook.runtime import errors

__all__ = ["app", "routes"]


def routes(*, metrics: Callable[[], bytes], not_ready: Callable[[], list[str]],
           warnings: Callable[[], list[str]] = list) -> list[web.RouteDef]:
    """``GET /metrics``, ``/healthz`` and ``/readyz``, for an app of the caller's own (the
    extender serves them beside its verbs) or for ``app``. ``warnings`` are what is wrong
    without making the process unready: ``/readyz`` says them under its ``ok``."""

    async def metrics_handler(_: web.Request) -> web.Response:
        return web.Response(body=metrics(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        problems = not_ready()
        if problems:
            return errors.error_response(503, "not ready: " + "; ".join(problems))
        return web.Response(text="\n".join(["ok", *(f"warning: {w}" for w in warnings())]))

    return [web.get("/metrics", metrics_handler), web.get("/healthz", healthz), web.get("/readyz", readyz)]


def app(*, metrics: Callable[[], bytes], not_ready: Callable[[], list[str]]) -> web.Application:
    """An application serving only the probes (a controller's; ``run`` serves it)."""
    probes = errors.install(web.Application())
    probes.add_routes(routes(metrics=metrics, not_ready=not_ready))
    return probes
