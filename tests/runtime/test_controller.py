"""A controller run as a component: not ready until its view has listed the cluster, its work only
after that (and only under the Lease when asked), a failing work or a lost Lease ending the run
with exit code 1, and a stop releasing the Lease."""
from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import generate_latest

from tests.cluster.conftest import make_cache
from tests.kit.fakeapi import FakeApiServer
from tests.runtime.test_errors import exchange, free_port
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.exitcodes import Exit
from webhook.runtime import controller, run

NAME = "test-controller"
LEASE = controller.Election("test-lease", "default", lease_duration=0.6, renew_deadline=0.4, retry_period=0.1)
READYZ = b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.leader = Gauge("leader", "1 while this replica acts.", registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def watch_cluster(self, status: Callable[[], Any]) -> None:
        self.status = status


class Work:
    """A controller's loop that notes when it ran, and fails when told to."""

    def __init__(self, *, fail: bool = False) -> None:
        self.started = asyncio.Event()
        self.stopped = False
        self.fail = fail

    async def __call__(self, stop: asyncio.Event) -> None:
        self.started.set()
        if self.fail:
            raise RuntimeError("a bug in the work")
        await stop.wait()
        self.stopped = True


def a_controller(server: FakeApiServer, work: Work, *, port: int | None = None,
                 election: controller.Election | None = None) -> tuple[run.Component, asyncio.Event]:
    """The controller on a fast cache of ``server``, and an event set once it serves."""
    client = Client(ClusterConfig(server.url), request_timeout=2.0, watch_grace=2.0)
    config = controller.ControllerConfig(cluster=client.config, election=election,
                                         probes=controller.Address("127.0.0.1", port) if port else None)
    built = controller.component(name=NAME, log=logging.getLogger("tests.controller"), cache=make_cache(client),
                                 work=work, metrics=Metrics(), config=config)
    ready = asyncio.Event()
    return dataclasses.replace(built, on_ready=ready.set), ready


def holder(server: FakeApiServer) -> str:
    lease = server.get_object("Lease", LEASE.name, "default") or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def test_it_is_not_ready_and_does_not_work_until_its_view_has_listed_the_cluster(
        server: FakeApiServer) -> None:
    server.go_away("refuse")
    work, port = Work(), free_port()
    component, ready = a_controller(server, work, port=port)
    task = asyncio.create_task(run.run(component))
    await asyncio.wait_for(ready.wait(), 10)
    status, _, body = await exchange(port, READYZ)
    assert status == 503 and json.loads(body)["error"].startswith("not ready: nodes not synced")
    assert not work.started.is_set()
    server.come_back()
    await asyncio.wait_for(work.started.wait(), 10)
    status, _, body = await exchange(port, READYZ)
    assert (status, body) == (200, b"ok")
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(task, 10) == Exit.OK and work.stopped


async def test_a_signal_while_the_view_waits_for_its_first_lists_stops_it_at_once_and_cleanly(
        server: FakeApiServer, caplog: pytest.LogCaptureFixture) -> None:
    server.go_away("refuse")
    work = Work()
    component, ready = a_controller(server, work)
    task = asyncio.create_task(run.run(component))
    await asyncio.wait_for(ready.wait(), 10)
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(task, 2) == Exit.OK  # not after the 30 s between its waiting lines
    assert not work.started.is_set()
    gc.collect()  # a future left with an exception nobody read says so when it is collected
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


async def test_a_work_that_fails_ends_the_run_with_exit_code_one_saying_why(
        server: FakeApiServer, caplog: pytest.LogCaptureFixture) -> None:
    component, _ = a_controller(server, Work(fail=True))
    with caplog.at_level(logging.ERROR, logger="tests.controller"):
        assert await asyncio.wait_for(run.run(component), 10) == Exit.FINDINGS
    (line,) = [r for r in caplog.records if r.name == "tests.controller"]
    assert line.getMessage() == f"the {NAME} stopped" and line.exc_info and line.exc_info[0] is RuntimeError


async def test_under_the_lease_a_stop_ends_the_work_and_releases_the_lease(server: FakeApiServer) -> None:
    work = Work()
    component, _ = a_controller(server, work, election=LEASE)
    task = asyncio.create_task(run.run(component))
    await asyncio.wait_for(work.started.wait(), 10)
    assert holder(server) != ""
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(task, 10) == Exit.OK and work.stopped
    assert holder(server) == "", "released on the way out"


async def test_losing_the_lease_ends_the_run_with_exit_code_one(
        server: FakeApiServer, caplog: pytest.LogCaptureFixture) -> None:
    work = Work()
    component, _ = a_controller(server, work, election=LEASE)
    task = asyncio.create_task(run.run(component))
    await asyncio.wait_for(work.started.wait(), 10)
    server.patch_object("Lease", LEASE.name, {"spec": {"holderIdentity": "someone-else"}}, namespace="default")
    with caplog.at_level(logging.ERROR, logger="tests.controller"):
        assert await asyncio.wait_for(task, 10) == Exit.FINDINGS
    assert work.stopped
    assert "lost the lease: exiting" in [r.getMessage() for r in caplog.records if r.name == "tests.controller"]
