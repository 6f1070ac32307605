"""Real TLS round trips: hostname verification, TLS 1.2 minimum, mutual TLS, rotation under load."""
from __future__ import annotations

import asyncio
import ssl
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography import x509

from tests.kit.reviews import admission_review, decode_patch
from tests.kit.server import Pki, make_pki, sample
from tests.kit.workloads import deployment
from webhook.runtime import tls
from webhook.server import app, certs

ServerFactory = Callable[..., Awaitable[TestServer]]


def _state(pki: Pki, policy_dir: Path, *, client_ca: Path | None = None) -> app.State:
    config = app.ServerConfig(
        policies=(policy_dir,), tls_cert=pki.cert, tls_key=pki.key, client_ca=client_ca, reload_interval=3600
    )
    return app.State(config)


async def _serve(aiohttp_server: ServerFactory, state: app.State) -> TestServer:
    return await aiohttp_server(app.make_app(state), ssl=state.certs.context)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def _url(srv: TestServer, path: str = "/mutate") -> str:
    # "localhost", not the IP: the client checks the name against the certificate's SANs.
    return f"https://localhost:{srv.port}{path}"


async def _served_serial(port: int, ctx: ssl.SSLContext) -> int:
    """Open a fresh connection and return the serial of the certificate it was given."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der).serial_number


@pytest.mark.parametrize("api_version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
async def test_a_review_round_trips_over_tls_with_hostname_verification(
    aiohttp_server: ServerFactory, session: aiohttp.ClientSession, pki: Pki, policy_dir: Path, api_version: str
) -> None:
    srv = await _serve(aiohttp_server, _state(pki, policy_dir))
    review = admission_review(deployment(), api_version=api_version)
    async with session.post(_url(srv), json=review, ssl=pki.client_context()) as resp:
        assert resp.status == 200
        answer = await resp.json()
    assert answer["apiVersion"] == api_version
    assert answer["response"]["uid"] == review["request"]["uid"]
    assert decode_patch(answer)


async def test_a_client_that_trusts_another_ca_refuses_the_server(
    aiohttp_server: ServerFactory, session: aiohttp.ClientSession, pki: Pki, policy_dir: Path, tmp_path: Path
) -> None:
    srv = await _serve(aiohttp_server, _state(pki, policy_dir))
    stranger = make_pki(tmp_path / "stranger")
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await session.get(_url(srv, "/healthz"), ssl=stranger.client_context())


async def test_the_certificate_does_not_pass_for_another_host_name(
    aiohttp_server: ServerFactory, pki: Pki, policy_dir: Path
) -> None:
    srv = await _serve(aiohttp_server, _state(pki, policy_dir))
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch|doesn't match"):
        await asyncio.open_connection("127.0.0.1", srv.port, ssl=pki.client_context(), server_hostname="evil.example.com")


def _tls11_client() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.0/1.1 are deprecated: the point here
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # OpenSSL 3 would refuse TLS 1.1 on its own otherwise
    return ctx


async def test_a_tls_1_1_handshake_is_refused(aiohttp_server: ServerFactory, pki: Pki, policy_dir: Path) -> None:
    # Control: the same client completes a TLS 1.1 handshake with a server that allows it,
    # so the refusal below is the webhook's minimum version, not the client's limits.
    lax = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        lax.minimum_version = ssl.TLSVersion.TLSv1
    lax.set_ciphers("DEFAULT:@SECLEVEL=0")
    lax.load_cert_chain(pki.cert, pki.key)
    control = await aiohttp_server(web.Application(), ssl=lax)
    _r, writer = await asyncio.open_connection("127.0.0.1", control.port, ssl=_tls11_client())
    assert writer.get_extra_info("ssl_object").version() == "TLSv1.1"
    writer.close()

    srv = await _serve(aiohttp_server, _state(pki, policy_dir))
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        await asyncio.open_connection("127.0.0.1", srv.port, ssl=_tls11_client())


async def test_handshakes_fail_and_readiness_is_false_until_a_certificate_exists(
    aiohttp_server: ServerFactory, aiohttp_client: Callable[..., Awaitable[Any]], pki: Pki, policy_dir: Path, tmp_path: Path
) -> None:
    later = tmp_path / "later"
    config = app.ServerConfig(policies=(policy_dir,), tls_cert=later / "tls.crt", tls_key=later / "tls.key", reload_interval=3600)
    state = app.State(config)
    srv = await _serve(aiohttp_server, state)
    plain = await aiohttp_client(app.make_metrics_app(state))
    ready = await plain.get("/readyz")
    assert ready.status == 503 and "no valid serving certificate" in await ready.text()
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        await asyncio.open_connection("127.0.0.1", srv.port, ssl=pki.client_context(), server_hostname="localhost")

    later.mkdir()
    for name in ("tls.crt", "tls.key"):
        (later / name).write_bytes((pki.folder / name).read_bytes())
    state.reload_certificate()
    assert (await plain.get("/readyz")).status == 200
    assert await _served_serial(srv.port, pki.client_context()) == tls.describe(pki.cert.read_bytes()).serial


async def test_mutual_tls_admits_clients_with_a_certificate_from_the_client_ca(
    aiohttp_server: ServerFactory, session: aiohttp.ClientSession, pki: Pki, policy_dir: Path
) -> None:
    srv = await _serve(aiohttp_server, _state(pki, policy_dir, client_ca=pki.ca_file))
    api_server = certs.make_leaf(pki.ca, common_name="kube-apiserver", client=True)
    async with session.post(_url(srv), json=admission_review(deployment()), ssl=pki.client_context(client=api_server)) as resp:
        assert resp.status == 200


async def test_mutual_tls_refuses_clients_without_a_certificate(
    aiohttp_server: ServerFactory, session: aiohttp.ClientSession, pki: Pki, policy_dir: Path
) -> None:
    srv = await _serve(aiohttp_server, _state(pki, policy_dir, client_ca=pki.ca_file))
    with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
        async with session.post(_url(srv), json=admission_review(deployment()), ssl=pki.client_context()) as resp:
            await resp.read()


async def test_a_rotated_client_ca_stops_trusting_the_old_clients(
    aiohttp_server: ServerFactory, session: aiohttp.ClientSession, pki: Pki, policy_dir: Path, tmp_path: Path
) -> None:
    client_ca = tmp_path / "client-ca.crt"
    client_ca.write_bytes(pki.ca_file.read_bytes())
    state = _state(pki, policy_dir, client_ca=client_ca)
    srv = await _serve(aiohttp_server, state)
    old_client = certs.make_leaf(pki.ca, common_name="kube-apiserver", client=True)
    async with session.get(_url(srv, "/healthz"), ssl=pki.client_context(client=old_client)) as resp:
        assert resp.status == 200
    client_ca.write_bytes(certs.make_ca().cert_pem())
    state.reload_certificate()
    async with aiohttp.ClientSession() as fresh:  # a new connection, not the pooled one
        with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
            async with fresh.get(_url(srv, "/healthz"), ssl=pki.client_context(client=old_client)) as resp:
                await resp.read()


async def test_certificate_rotation_while_a_client_keeps_sending(
    aiohttp_server: ServerFactory, pki: Pki, policy_dir: Path
) -> None:
    state = _state(pki, policy_dir)
    srv = await _serve(aiohttp_server, state)
    ctx = pki.client_context()
    first_serial = await _served_serial(srv.port, ctx)
    statuses: list[int] = []
    rotated = asyncio.Event()

    async def keep_sending(session: aiohttp.ClientSession) -> None:
        # Keeps going until well after the rotation, on its keep-alive connection.
        after = 0
        while after < 20:
            async with session.post(_url(srv), json=admission_review(deployment()), ssl=ctx) as resp:
                statuses.append(resp.status)
                await resp.read()
            after += rotated.is_set()

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        sender = asyncio.create_task(keep_sending(session))
        while len(statuses) < 20:
            await asyncio.sleep(0)
        new = pki.rotate()
        state.reload_certificate()
        rotated.set()
        assert await _served_serial(srv.port, ctx) == new.cert.serial_number != first_serial
        await sender
    assert len(statuses) >= 40 and set(statuses) == {200}
    expiry = sample(state.metrics.registry, "placement_webhook_certificate_expiry_timestamp_seconds")
    assert expiry == new.cert.not_valid_after_utc.timestamp()
