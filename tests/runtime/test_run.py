"""``run``: contexts entered in order and left in reverse, endpoints listening between, SIGTERM a
graceful stop, a context's exit code ending the run, and a failed start stopping what started."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from tests.runtime.test_errors import exchange, free_port
from webhook.exitcodes import Exit
from webhook.runtime import run

LOG = logging.getLogger("tests.run")


class Journal:
    """What happened, in order: contexts entered and left, endpoints drained, the stop hook."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def context(self, name: str, *, fail: bool = False) -> run.Context:
        async def context(_: web.Application) -> AsyncIterator[None]:
            if fail:
                raise run.CannotStart(f"{name} cannot start", code=Exit.USAGE)
            self.entries.append(f"enter {name}")
            yield
            self.entries.append(f"leave {name}")

        return context

    def drain(self, name: str) -> run.Drain:
        async def drain(_: web.AppRunner) -> None:
            self.entries.append(f"drain {name}")

        return drain

    def endpoint(self, name: str, port: int | None) -> run.Endpoint:
        app = web.Application()

        async def hello(_: web.Request) -> web.Response:
            return web.Response(text=name)

        app.add_routes([web.get("/", hello)])
        app.cleanup_ctx.append(self.context(f"{name} app"))
        return run.Endpoint(app, "127.0.0.1", port, drain=self.drain(name))


def component(journal: Journal, *, contexts: tuple[run.Context, ...], endpoints: tuple[run.Endpoint, ...] = (),
              on_ready: Callable[[], None] = lambda: None) -> run.Component:
    return run.Component(name="test", log=LOG, endpoints=endpoints, contexts=contexts, on_ready=on_ready,
                         on_stop=lambda: journal.entries.append("on stop"))


async def test_sigterm_stops_gracefully_tearing_down_in_the_reverse_order_of_set_up() -> None:
    journal = Journal()
    ready = asyncio.Event()
    port = free_port()
    task = asyncio.create_task(run.run(component(
        journal, contexts=(journal.context("view"), journal.context("worker")),
        endpoints=(journal.endpoint("metrics", port), journal.endpoint("unlistened", None)), on_ready=ready.set)))
    await asyncio.wait_for(ready.wait(), 10)
    status, _, body = await exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (status, body) == (200, b"metrics")
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(task, 10) == Exit.OK
    assert journal.entries == [
        "enter view", "enter worker", "enter metrics app", "enter unlistened app",
        "on stop",  # the instant the signal came, once
        "drain unlistened", "leave unlistened app", "drain metrics", "leave metrics app",
        "leave worker", "leave view"]
    with pytest.raises(OSError):  # nothing listens any more
        await asyncio.open_connection("127.0.0.1", port)


async def test_the_signal_handlers_are_the_runs_own_and_go_with_it() -> None:
    before = signal.getsignal(signal.SIGTERM)
    during: list[object] = []

    async def look_then_stop(app: web.Application) -> AsyncIterator[None]:
        during.append(signal.getsignal(signal.SIGTERM))
        app[run.STOP].set()
        yield

    assert await asyncio.wait_for(run.run(component(Journal(), contexts=(look_then_stop,))), 10) == Exit.OK
    assert during != [before] and signal.getsignal(signal.SIGTERM) == before


async def test_a_context_ending_the_run_sets_its_exit_code_and_a_later_signal_does_not_change_it() -> None:
    journal = Journal()

    async def lost_the_lease(app: web.Application) -> AsyncIterator[None]:
        app[run.STOP].set(Exit.FINDINGS)
        app[run.STOP].set(Exit.OK)  # the first reason counts
        yield

    code = await asyncio.wait_for(run.run(component(journal, contexts=(journal.context("view"), lost_the_lease))), 10)
    assert code == Exit.FINDINGS
    assert journal.entries == ["enter view", "on stop", "leave view"]


async def test_a_context_that_cannot_start_leaves_the_ones_entered_and_nothing_listens() -> None:
    journal = Journal()
    port = free_port()
    with pytest.raises(run.CannotStart, match="certificate cannot start") as refused:
        await asyncio.wait_for(run.run(component(
            journal, contexts=(journal.context("view"), journal.context("certificate", fail=True),
                               journal.context("worker")),
            endpoints=(journal.endpoint("metrics", port),))), 10)
    assert refused.value.code == Exit.USAGE
    assert journal.entries == ["enter view", "on stop", "leave view"]
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_a_port_in_use_propagates_after_the_contexts_were_left() -> None:
    journal = Journal()
    with contextlib.closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            await asyncio.wait_for(run.run(component(journal, contexts=(journal.context("view"),),
                                                     endpoints=(journal.endpoint("metrics", port),))), 10)
    assert journal.entries == ["enter view", "enter metrics app", "on stop", "drain metrics", "leave metrics app",
                               "leave view"]
