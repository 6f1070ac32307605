"""The real ``placement-webhook serve`` process: SIGTERM with reviews in flight, and ``--dev``."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.kit.policies import SSD_POLICY
from tests.kit.reviews import admission_review
from tests.kit.server import Pki
from tests.kit.workloads import deployment

ROOT = Path(__file__).resolve().parents[2]
STARTUP = 20.0  # seconds a loaded machine may need to start the interpreter


def _command() -> list[str]:
    script = Path(sys.executable).with_name("placement-webhook")
    return [str(script)] if script.exists() else [sys.executable, "-m", "webhook"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _wait_for(check: object, what: str, timeout: float = STARTUP) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def _serving(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        _command() + ["serve", *argv],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


class Ports:
    def __init__(self) -> None:
        self.tls, self.metrics = _free_port(), _free_port()

    def readyz(self) -> tuple[int, str]:
        return _get(f"http://127.0.0.1:{self.metrics}/readyz")


async def _begin(port: int, ctx: ssl.SSLContext, body: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Start a review and stop half-way through its body, once the server is handling it.

    ``Expect: 100-continue`` makes the server say when the handler has taken the request,
    so the request is provably in flight before SIGTERM.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    head = (
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
    )
    writer.write(head.encode())
    await writer.drain()
    assert (await reader.readline()).startswith(b"HTTP/1.1 100")
    await reader.readline()
    writer.write(body[: len(body) // 2])
    await writer.drain()
    return reader, writer


async def _response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    status = int((await reader.readline()).split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        key, _, value = line.decode().partition(":")
        headers[key.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def _keep_alive_connection(port: int, ctx: ssl.SSLContext, body: bytes) -> asyncio.StreamReader:
    """A connection that completed one review and now idles, as the API server's do."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    head = f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    status, headers, _ = await _response(reader)
    assert status == 200 and headers.get("connection", "keep-alive").lower() != "close"
    return reader


@pytest.fixture
def server_env(pki: Pki, tmp_path: Path) -> dict[str, str]:
    """Configuration through PLACEMENT_WEBHOOK_* variables, as the Helm chart passes it."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "ssd.yaml").write_text(SSD_POLICY)
    return {
        "PLACEMENT_WEBHOOK_POLICIES": str(policies),
        "PLACEMENT_WEBHOOK_TLS_CERT": str(pki.cert),
        "PLACEMENT_WEBHOOK_TLS_KEY": str(pki.key),
        "PLACEMENT_WEBHOOK_HOST": "127.0.0.1",
        "PLACEMENT_WEBHOOK_RELOAD_INTERVAL": "60",
    }


async def test_sigterm_turns_readiness_off_closes_idle_connections_and_finishes_in_flight_reviews(
    pki: Pki, tmp_path: Path, server_env: dict[str, str]
) -> None:
    ports = Ports()
    argv = ["--port", str(ports.tls), "--metrics-port", str(ports.metrics), "--shutdown-grace", "20"]
    ctx = pki.client_context()
    body = json.dumps(admission_review(deployment())).encode()
    with _serving(argv, cwd=tmp_path, env=server_env) as proc:
        await asyncio.to_thread(_wait_for, lambda: ports.readyz()[0] == 200, "readiness")
        idle = await _keep_alive_connection(ports.tls, ctx, body)
        in_flight = [await _begin(ports.tls, ctx, body) for _ in range(5)]

        proc.send_signal(signal.SIGTERM)
        shutting_down = (503, '{"error":"not ready: shutting down","status":503}')
        await asyncio.to_thread(_wait_for, lambda: ports.readyz() == shutting_down, "readiness off")
        assert await asyncio.wait_for(idle.read(), 10) == b""  # the idle keep-alive connection is closed
        with pytest.raises(OSError):  # and no new connection is taken
            await asyncio.open_connection("127.0.0.1", ports.tls, ssl=ctx, server_hostname="localhost")

        for reader, writer in in_flight:
            writer.write(body[len(body) // 2 :])
            await writer.drain()
        answers = [await asyncio.wait_for(_response(reader), 10) for reader, _ in in_flight]
        assert [status for status, _, _ in answers] == [200] * 5
        assert all(json.loads(data)["response"]["allowed"] for _, _, data in answers)
        assert all(headers.get("connection", "").lower() == "close" for _, headers, _ in answers)
        assert await asyncio.to_thread(proc.wait, 15) == 0
        _, err = proc.communicate()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert [line["msg"] for line in lines if line["logger"] == "webhook.review"].count("review") == 6
    assert [line["msg"] for line in lines if line["logger"] == "webhook.server.app"][-2:] == ["shutting down", "stopped"]


async def test_a_review_that_never_finishes_is_cut_off_after_the_grace_period(
    pki: Pki, tmp_path: Path, server_env: dict[str, str]
) -> None:
    ports = Ports()
    argv = ["--port", str(ports.tls), "--metrics-port", str(ports.metrics), "--shutdown-grace", "0.5"]
    body = json.dumps(admission_review(deployment())).encode()
    with _serving(argv, cwd=tmp_path, env=server_env) as proc:
        await asyncio.to_thread(_wait_for, lambda: ports.readyz()[0] == 200, "readiness")
        reader, _writer = await _begin(ports.tls, pki.client_context(), body)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 15) == 0
        assert await asyncio.wait_for(reader.read(), 5) == b""


def test_dev_makes_certificates_serves_the_policies_and_prints_a_curl_example(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "ssd.yaml").write_text(SSD_POLICY)
    ports = Ports()
    with _serving(["--dev", "--port", str(ports.tls), "--metrics-port", str(ports.metrics)], cwd=tmp_path) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("placement-webhook is serving")
        curl = proc.stdout.readline() + proc.stdout.readline()
        assert "curl --cacert certs/ca.crt" in curl and f"https://localhost:{ports.tls}/mutate" in curl
        assert sorted(p.name for p in (tmp_path / "certs").iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
        _wait_for(lambda: ports.readyz()[0] == 200, "readiness")

        request = urllib.request.Request(
            f"https://localhost:{ports.tls}/mutate",
            data=json.dumps(admission_review(deployment())).encode(),
            headers={"Content-Type": "application/json"},
        )
        ctx = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.crt"))
        with urllib.request.urlopen(request, context=ctx, timeout=10) as resp:
            assert json.loads(resp.read())["response"]["patchType"] == "JSONPatch"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_printed_curl_example_works_from_the_repository_root(tmp_path: Path) -> None:
    example = ROOT / "examples" / "review-deployment-v1.json"
    if not example.exists():
        pytest.skip("examples/review-deployment-v1.json is not there yet")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    ports = Ports()
    with _serving(["--dev", "--port", str(ports.tls), "--metrics-port", str(ports.metrics)], cwd=tmp_path) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        command = (lines[1] + lines[2]).replace("\\\n", " ")
        _wait_for(lambda: ports.readyz()[0] == 200, "readiness")
        result = subprocess.run(command, check=False, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=20)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["response"]["allowed"] is True
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def test_dev_outside_the_repository_serves_its_policies_and_keeps_certificates_in_the_user_state_folder(
    tmp_path: Path,
) -> None:
    elsewhere, state = tmp_path / "elsewhere", tmp_path / "state"
    elsewhere.mkdir()
    ports = Ports()
    env = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(state)}
    with _serving(["--dev", "--port", str(ports.tls), "--metrics-port", str(ports.metrics)], cwd=elsewhere, env=env) as proc:
        _wait_for(lambda: ports.readyz()[0] == 200, "readiness")
        assert proc.stdout is not None
        printed = "".join(proc.stdout.readline() for _ in range(3))
        curl = shlex.split(printed.split("Try:", 1)[1].split("Metrics:", 1)[0].replace("\\\n", " "))
        ca, data = Path(curl[curl.index("--cacert") + 1]), Path(curl[curl.index("--data-binary") + 1].removeprefix("@"))
        assert ca == state / "placement-webhook" / "dev-certs" / "ca.crt" and ca.is_file()
        assert data == ROOT / "examples" / "review-deployment-v1.json"

        request = urllib.request.Request(curl[-1], data=data.read_bytes(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(ca)), timeout=10) as resp:
            assert json.loads(resp.read())["response"]["allowed"] is True
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0
    assert list(elsewhere.iterdir()) == []  # no certs/ left in the folder it was started in
    assert f"made a development CA and serving certificate in {ca.parent}/" in err
    assert f"loading the repository's, {ROOT / 'policies'}" in err
    assert "previous" not in err
