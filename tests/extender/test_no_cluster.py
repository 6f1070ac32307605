"""An extender without a cluster view (``--no-cluster``) that is sent node names
(``nodeCacheCapable: true``, what ``--print-scheduler-config`` writes by default) cannot judge
them: every node passes and scores 5. It says so loudly, once per verb in the log, in a metric for
every such request, and on ``/readyz``, which stays ready (see ``Extender.warnings`` for why)."""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from webhook.extender.app import Extender, make_app
from webhook.spot.config import SpotConfig

Client = TestClient[web.Request, web.Application]
UNJUDGED = "placement_webhook_extender_unjudged_requests_total"
POD = {"metadata": {"name": "api"}, "spec": {}}
NAMES = {"Pod": POD, "NodeNames": ["spot-1", "od-1"]}
OBJECTS = {"Pod": POD, "Nodes": {"items": [{"metadata": {"name": "od-1", "labels": {
    "node.kubernetes.io/capacity": "on-demand"}}}]}}


class View:
    def nodes(self) -> Any:
        return ()

    def priority_class(self, name: str) -> Any:
        return None


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.fields["verb"] for r in caplog.records  # type: ignore[attr-defined]
            if r.name == "webhook.extender.app" and r.levelno == logging.WARNING]


@pytest.fixture
def blind() -> Extender:
    return Extender(SpotConfig())


@pytest.fixture
async def http(aiohttp_client: Callable[..., Awaitable[Client]], blind: Extender) -> Client:
    return await aiohttp_client(make_app(blind))


async def test_node_names_without_a_view_are_logged_once_per_verb_and_counted_every_time(
    http: Client, blind: Extender, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="webhook.extender.app"):
        for verb in ("filter", "filter", "prioritize", "filter", "prioritize"):
            assert (await http.post(f"/{verb}", json=NAMES)).status == 200
    assert warnings_logged(caplog) == ["filter", "prioritize"]
    sample = blind.metrics.registry.get_sample_value
    assert sample(UNJUDGED, {"verb": "filter"}) == 3 and sample(UNJUDGED, {"verb": "prioritize"}) == 2


async def test_what_such_a_request_is_answered_is_what_the_metric_says(http: Client) -> None:
    assert await (await http.post("/prioritize", json=NAMES)).json() == [{"Host": "spot-1", "Score": 5},
                                                                         {"Host": "od-1", "Score": 5}]
    answer = await (await http.post("/filter", json=NAMES)).json()
    assert answer["NodeNames"] == ["spot-1", "od-1"] and answer["Error"] == ""


async def test_readyz_stays_ready_and_says_why_the_answers_are_neutral(http: Client) -> None:
    assert await (await http.get("/readyz")).text() == "ok"
    await http.post("/filter", json=NAMES)
    await http.post("/prioritize", json=NAMES)
    await http.post("/prioritize", json=NAMES)
    resp = await http.get("/readyz")
    lines = (await resp.text()).splitlines()
    assert resp.status == 200 and lines[0] == "ok"
    assert lines[1].startswith("warning: 1 filter request(s) named nodes (nodeCacheCapable: true), which an "
                               "extender without a cluster view (--no-cluster) cannot judge")
    assert lines[2].startswith("warning: 2 prioritize request(s) named nodes")
    assert all("set nodeCacheCapable: false" in line for line in lines[1:])


async def test_whole_node_objects_are_judged_without_a_view_and_not_counted(
    http: Client, blind: Extender, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="webhook.extender.app"):
        scores = await (await http.post("/prioritize", json=OBJECTS)).json()
    assert scores == [{"Host": "od-1", "Score": 5}] and warnings_logged(caplog) == []
    assert blind.metrics.registry.get_sample_value(UNJUDGED, {"verb": "prioritize"}) is None
    assert await (await http.get("/readyz")).text() == "ok"


async def test_node_names_with_a_view_are_judged_and_not_counted(
    aiohttp_client: Callable[..., Awaitable[Client]], caplog: pytest.LogCaptureFixture
) -> None:
    extender = Extender(SpotConfig(), view=View())
    http = await aiohttp_client(make_app(extender))
    with caplog.at_level(logging.WARNING, logger="webhook.extender.app"):
        await http.post("/filter", json=NAMES)
    assert warnings_logged(caplog) == [] and extender.warnings() == []
