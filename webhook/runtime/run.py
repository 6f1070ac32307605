"""One way to run a long-lived component: ``serve``, ``extender``, ``label-nodes`` and
``spot-controller`` all run through ``run``.

A ``Component`` says what it serves (``Endpoint``: an aiohttp application, its address, its
certificate) and what it holds while it runs (``contexts``: aiohttp cleanup contexts, such as the
cluster view, the reloaders, the worker under leader election). ``run``:

- enters the contexts in order, on an application of its own, before anything listens; then sets
  up each endpoint's application (with its own cleanup contexts) and listens on each, in order;
- stops on SIGTERM or SIGINT (exit 0: a graceful stop), or when a context ends the run with an
  exit code (``Stop.set``: the worker that lost its Lease says 1, so that the restart starts
  clean, as client-go components exit);
- tears down in reverse: each endpoint is drained when it says how (the admission server lets the
  reviews in flight finish) and closed, the last first; then the contexts are left in reverse.

A context that was entered is always left, even when a later one failed to start (aiohttp's
``cleanup_ctx`` rule); a startup failure (``CannotStart``, a port in use) propagates after that.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from webhook.exitcodes import Exit
from webhook.runtime import errors
from webhook.runtime.tls import CertificateSource

__all__ = ["STOP", "CannotStart", "Component", "Context", "Endpoint", "Stop", "run"]

# An aiohttp cleanup context: set up to its ``yield``, torn down after it.
Context = Callable[[web.Application], AsyncIterator[None]]
# Lets what is in flight on an endpoint finish before its runner is cleaned up.
Drain = Callable[[web.AppRunner], Awaitable[None]]
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stop:
    """When and why a component stops: a signal (exit 0), or a context ending the run with its
    exit code. The first reason given is the one that counts."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.code = int(Exit.OK)

    def set(self, code: int = Exit.OK) -> None:
        if not self.event.is_set():
            self.code = code
            self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


# The run's ``Stop``, for the contexts: on the application ``run`` enters them on.
STOP = web.AppKey("stop", Stop)


class CannotStart(Exception):
    """A context cannot start (a certificate that does not load): ``run`` stops what had started
    and raises it; the command says ``message`` and exits with ``code``."""

    def __init__(self, message: str, *, code: int = Exit.USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Endpoint:
    """An aiohttp application and where it listens; ``port`` None: set up, not listening."""

    app: web.Application
    host: str
    port: int | None
    tls: CertificateSource | None = None  # HTTPS with the certificate this source keeps current
    shutdown_timeout: float = 1.0  # bounds the cancellation of requests still unfinished at cleanup
    drain: Drain | None = None


def _nothing() -> None:
    return None


def _no_fields() -> Mapping[str, object]:
    return {}


@dataclass(frozen=True)
class Component:
    """What ``run`` runs. ``log`` says ``serving``, ``shutting down`` (with ``stopping``) and
    ``stopped``; ``describe`` gives the ``serving`` line's fields once every endpoint listens.
    ``on_ready`` is called then; ``on_stop`` once, the instant the component starts stopping (the
    admission server's readiness turns off)."""

    name: str
    log: logging.Logger
    endpoints: tuple[Endpoint, ...] = ()
    contexts: tuple[Context, ...] = ()
    describe: Callable[[], Mapping[str, object]] = _no_fields
    stopping: Mapping[str, object] = field(default_factory=dict)
    on_ready: Callable[[], None] = _nothing
    on_stop: Callable[[], None] = _nothing


async def run(component: Component) -> int:
    """Run ``component`` until a signal or its contexts stop it; the exit code."""
    stop = Stop()
    root = web.Application()
    root[STOP] = stop
    root.cleanup_ctx.extend(component.contexts)
    runners: list[tuple[Endpoint | None, web.AppRunner]] = []
    stopping: list[bool] = []

    def begin_stopping() -> None:
        if not stopping:
            stopping.append(True)
            component.on_stop()

    def on_signal() -> None:
        begin_stopping()
        stop.set()

    signals = _handle_signals(on_signal)
    try:
        await _set_up(root, component, runners)
        if any(endpoint is not None and endpoint.port is not None for endpoint, _ in runners):
            component.log.info("serving", extra={"fields": dict(component.describe())})
        component.on_ready()
        await stop.wait()
        component.log.info("shutting down", extra={"fields": dict(component.stopping)})
    finally:
        begin_stopping()
        _restore(signals)
        for endpoint, runner in reversed(runners):
            if endpoint is not None and endpoint.drain is not None:
                await endpoint.drain(runner)
            await runner.cleanup()
    component.log.info("stopped")
    return stop.code


async def _set_up(root: web.Application, component: Component,
                  runners: list[tuple[Endpoint | None, web.AppRunner]]) -> None:
    """Enter the contexts, set up every endpoint's application, then listen on each in order.
    ``runners`` grows as each is made, so that what started is torn down whatever fails."""
    runner = web.AppRunner(root, handle_signals=False)
    runners.append((None, runner))
    await runner.setup()
    for endpoint in component.endpoints:
        runner = web.AppRunner(endpoint.app, handle_signals=False, access_log=None,
                               shutdown_timeout=endpoint.shutdown_timeout)
        runners.append((endpoint, runner))
        await runner.setup()
        errors.answer_parse_errors_in_json(runner)
    for (_, runner), listening in zip(runners[1:], component.endpoints, strict=True):
        if listening.port is not None:
            context = listening.tls.context if listening.tls is not None else None
            await web.TCPSite(runner, listening.host, listening.port, ssl_context=context).start()


def _handle_signals(handler: Callable[[], None]) -> list[signal.Signals]:
    """SIGTERM and SIGINT call ``handler``; the signals it could take (none off the main thread)."""
    loop = asyncio.get_running_loop()
    taken = []
    for sig in SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, handler)
            taken.append(sig)
    return taken


def _restore(signals: list[signal.Signals]) -> None:
    loop = asyncio.get_running_loop()
    for sig in signals:
        loop.remove_signal_handler(sig)
