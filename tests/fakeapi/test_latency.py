"""The fake API server's network round trip: ``latency`` delays every answer, for benchmarks."""
from __future__ import annotations

import time

import kubernetes

from tests.kit.fakeapi import FakeApiServer


def test_every_request_is_answered_no_sooner_than_the_latency(server: FakeApiServer,
                                                              core: kubernetes.client.CoreV1Api) -> None:
    assert server.latency == 0.0
    core.list_namespace()  # the connection is open: what follows is the round trip alone
    server.latency = 0.2
    began = time.monotonic()
    for _ in range(3):
        core.list_namespace()
    assert time.monotonic() - began >= 3 * 0.2, "each of the three calls paid the latency"
    assert server.app.latency == 0.2
