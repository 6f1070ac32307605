"""Every error answer of every server is JSON ``{"error": "...", "status": N}``: what the handlers
say, what aiohttp's router and body reader raise, what a bug lets escape, and what aiohttp's HTTP
parser refuses before any application code runs (on the real listening sockets, TLS included)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.kit.server import Pki
from tests.server.garbage import assert_error_shape
from webhook.runtime import probes, run
from webhook.server import app as server
from webhook.runtime import errors

Client = TestClient[web.Request, web.Application]
# What aiohttp's parser refuses: not HTTP, a header line over 8 KiB, a broken chunk, a bad length.
NOT_HTTP = [
    b"garbage\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 9000 + b"\r\n\r\n",
    b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def exchange(port: int, request: bytes, *, context: ssl.SSLContext | None = None) -> tuple[int, str, bytes]:
    """Send raw bytes, read the answer up to the server closing: status, content type, body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                   server_hostname="localhost" if context else None)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)  # the server closes after a parse error
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), fields.get("Content-Type", ""), body


async def assert_parse_errors_are_json(port: int, *, context: ssl.SSLContext | None = None) -> None:
    for request in NOT_HTTP:
        status, content_type, body = await exchange(port, request, context=context)
        assert status == 400 and content_type.startswith("application/json"), (request[:40], body)
        assert_error_shape(status, body)
        assert json.loads(body)["error"].startswith("bad HTTP request: ")


# --- the middleware --------------------------------------------------------------------------------------------

async def boom(_: web.Request) -> web.Response:
    raise KeyError("spec")


async def moved(_: web.Request) -> web.Response:
    raise web.HTTPFound("/elsewhere")


async def teapot(_: web.Request) -> web.Response:
    raise web.HTTPTooManyRequests(headers={"Retry-After": "3"})


@pytest.fixture
async def app_client(aiohttp_client: Callable[..., Awaitable[Client]]) -> Client:
    app = errors.install(web.Application(client_max_size=1024))

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    app.add_routes([web.get("/boom", boom), web.get("/moved", moved), web.get("/busy", teapot),
                    web.post("/echo", echo)])
    return await aiohttp_client(app)


async def test_a_bug_is_a_logged_500_in_json_naming_only_the_exception_type(
    app_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="webhook.runtime.errors"):
        resp = await app_client.get("/boom")
    assert resp.status == 500
    assert await resp.json() == {"error": "internal error: KeyError", "status": 500}
    assert any(r.exc_info and r.exc_info[0] is KeyError for r in caplog.records)


async def test_an_error_aiohttp_raises_keeps_its_status_and_headers_in_json(app_client: Client) -> None:
    busy = await app_client.get("/busy")
    assert busy.status == 429 and busy.headers["Retry-After"] == "3"
    assert await busy.json() == {"error": "too many requests", "status": 429}
    big = await app_client.post("/echo", data=b"x" * 2048)
    assert big.status == 413
    assert "1024" in (await big.json())["error"]


async def test_a_redirect_is_no_error_and_passes_unchanged(app_client: Client) -> None:
    resp = await app_client.get("/moved", allow_redirects=False)
    assert resp.status == 302 and resp.headers["Location"] == "/elsewhere"


# --- parse errors on the real sockets --------------------------------------------------------------------------

@pytest.fixture
async def serving(pki: Pki, policy_dir: Path) -> AsyncIterator[tuple[int, int]]:
    """``serve`` itself, in process, on two free ports: (TLS, metrics); cancelled afterwards."""
    config = server.ServerConfig(policies=(policy_dir,), tls_cert=pki.cert, tls_key=pki.key, host="127.0.0.1",
                                 port=free_port(), metrics_port=free_port(), reload_interval=3600,
                                 shutdown_grace=0.5)
    ready = asyncio.Event()
    task = asyncio.create_task(server.serve(config, on_ready=lambda _: ready.set()))
    await asyncio.wait_for(ready.wait(), 30)
    try:
        yield config.port, config.metrics_port
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_server_answers_what_its_http_parser_refuses_in_json_on_both_ports(
    serving: tuple[int, int], pki: Pki
) -> None:
    tls_port, metrics_port = serving
    await assert_parse_errors_are_json(metrics_port)
    await assert_parse_errors_are_json(tls_port, context=pki.client_context())


@contextlib.asynccontextmanager
async def probes_served(port: int, *, not_ready: Callable[[], list[str]]) -> AsyncIterator[None]:
    """The probes alone, run as a controller runs them; cancelled afterwards."""
    ready = asyncio.Event()
    app = probes.app(metrics=lambda: b"", not_ready=not_ready)
    served = run.Component(name="probes", log=logging.getLogger("tests.probes"),
                           endpoints=(run.Endpoint(app, "127.0.0.1", port),), on_ready=ready.set)
    task = asyncio.create_task(run.run(served))
    await asyncio.wait_for(ready.wait(), 10)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_probe_server_answers_every_error_in_json() -> None:
    port = free_port()
    async with probes_served(port, not_ready=lambda: ["nodes not synced"]):
        for request, status, message in [
            (b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404, "no endpoint at /nope"),
            (b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 405,
             "method POST is not allowed on /metrics; allowed: GET, HEAD"),
            (b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 503, "not ready: nodes not synced"),
        ]:
            answer = await exchange(port, request)
            assert answer[:2] == (status, "application/json")
            assert json.loads(answer[2]) == {"error": message, "status": status}
        await assert_parse_errors_are_json(port)


async def test_a_request_the_parser_refuses_is_logged_as_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    async with probes_served(port, not_ready=list):
        with caplog.at_level(logging.DEBUG):
            await exchange(port, NOT_HTTP[1])
    (line,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert (line.name, line.getMessage(), line.exc_info) == ("webhook.runtime.errors", "bad HTTP request", None)
    assert line.fields["status"] == 400  # type: ignore[attr-defined]
