"""The plain-HTTP side of a cluster-side command: ``/metrics``, ``/healthz`` and ``/readyz``.

``label-nodes`` and the other controllers run one each; a readiness check that fails says
why in the body, as the server's does.
"""
from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["routes", "start"]


def routes(*, metrics: Callable[[], bytes], not_ready: Callable[[], list[str]]) -> list[web.RouteDef]:
    """``GET /metrics``, ``/healthz`` and ``/readyz``, for an app of the caller's own (the
    extender serves them beside its verbs) or for ``start``."""

    async def metrics_handler(_: web.Request) -> web.Response:
        return web.Response(body=metrics(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        problems = not_ready()
        return web.Response(status=503 if problems else 200, text="; ".join(problems) if problems else "ok")

    return [web.get("/metrics", metrics_handler), web.get("/healthz", healthz), web.get("/readyz", readyz)]


async def start(host: str, port: int, *, metrics: Callable[[], bytes],
                not_ready: Callable[[], list[str]]) -> web.AppRunner:
    """Serve the probes on ``host:port`` until the returned runner is cleaned up."""
    app = web.Application()
    app.add_routes(routes(metrics=metrics, not_ready=not_ready))
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
