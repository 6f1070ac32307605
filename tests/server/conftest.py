"""Fixtures of the server tests; the helpers they use live in ``tests.kit.server``."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.kit.policies import SSD_POLICY
from tests.kit.server import Pki, make_pki
from webhook.server import app as server

Client = TestClient[web.Request, web.Application]


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "ssd.yaml").write_text(SSD_POLICY)
    return folder


# The admission app on the SSD policy, in process (aiohttp's test client).
@pytest.fixture
def state(pki: Pki, policy_dir: Path) -> server.State:
    config = server.ServerConfig(policies=(policy_dir,), tls_cert=pki.cert, tls_key=pki.key, reload_interval=3600)
    return server.State(config)


@pytest.fixture
async def client(aiohttp_client: Callable[..., Awaitable[Client]], state: server.State) -> Client:
    return await aiohttp_client(server.make_app(state))
