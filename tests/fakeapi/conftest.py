"""Fixtures for the fake API server's own tests: a server on a background thread and official
``kubernetes`` clients configured from the kubeconfig it writes."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.kit.fakeapi import FakeApiServer

ClientFor = Callable[..., kubernetes.client.ApiClient]


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer.in_thread("1.31.0", bookmark_interval=0.2) as srv:
        yield srv


@pytest.fixture
def client_for(tmp_path: Path) -> Iterator[ClientFor]:
    made: list[kubernetes.client.ApiClient] = []

    def make(srv: FakeApiServer, **kubeconfig: Any) -> kubernetes.client.ApiClient:
        path = srv.write_kubeconfig(tmp_path / f"kubeconfig-{len(made)}", **kubeconfig)
        client = kubernetes.config.new_client_from_config(config_file=str(path))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def api(server: FakeApiServer, client_for: ClientFor) -> kubernetes.client.ApiClient:
    return client_for(server)


@pytest.fixture
def core(api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api)

