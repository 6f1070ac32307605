"""The extender: the Go wire types, each scoring rule, and the HTTP answers to good and bad input."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from webhook.extender import protocol
from webhook.extender.app import Extender, make_app
from webhook.extender.scoring import FactsCache, History, filter_nodes, node_facts, prioritize
from webhook.spot.config import SpotConfig
from webhook.spot.nodes import Detector, PodClass

NOW = 1_800_000_000.0
CAP = "node.kubernetes.io/capacity"
SPOT_ITN = {"key": "aws-node-termination-handler/spot-itn", "value": "e-1", "effect": "NoSchedule"}
CRITICAL = PodClass(True, False, "priority")
INTERRUPTIBLE = PodClass(False, True, "annotation")
OTHER = PodClass(False, False, "")


def node(name: str, kind: str | None, *, itype: str = "m5.large", zone: str = "a",
         taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    labels = {"node.kubernetes.io/instance-type": itype, "topology.kubernetes.io/zone": zone}
    if kind:
        labels[CAP] = kind
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints or []}, "status": {}}


NODES = {n["metadata"]["name"]: n for n in (node("spot-1", "spot"), node("spot-2", "spot", zone="b"),
                                             node("od-1", "on-demand"), node("plain", None))}


# --- the wire format -------------------------------------------------------------------------------------------

def test_args_in_go_field_names_and_in_any_case_parse_alike() -> None:
    go = protocol.parse({"Pod": {"metadata": {"name": "p"}}, "Nodes": None, "NodeNames": ["a", "b"]})
    lowered = protocol.parse(json.loads(json.dumps({"pod": {"metadata": {"name": "p"}}, "nodenames": ["a", "b"]})))
    assert go.names_mode and go.node_names == lowered.node_names == ["a", "b"]


def test_a_filter_answer_uses_the_requests_form() -> None:
    names = protocol.parse({"Pod": {}, "NodeNames": ["a", "b"]})
    out = protocol.filter_result(names, ["a"], {}, {"b": "reclaimed"})
    assert out == {"NodeNames": ["a"], "FailedNodes": {"b": "reclaimed"}, "FailedAndUnresolvableNodes":
                   {"b": "reclaimed"}, "Error": ""}
    objects = protocol.parse({"Pod": {}, "Nodes": {"items": [node("a", None), node("b", None)]}})
    answer = protocol.filter_result(objects, ["b"], {"a": "why"}, {})
    assert "NodeNames" not in answer and [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["b"]


def test_an_empty_node_list_marshalled_with_null_items_parses_as_no_nodes() -> None:
    assert protocol.parse({"Pod": {}, "Nodes": {"metadata": {}, "items": None}}).node_names == []


@pytest.mark.parametrize(("body", "message"), [
    ([], "must be a JSON object"),
    ({"Nodes": {"items": []}}, "Pod is missing"),
    ({"Pod": {}}, "neither NodeNames nor Nodes"),
    ({"Pod": {}, "NodeNames": [1]}, "list of node names"),
    ({"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}, "has no metadata.name"),
])
def test_args_the_extender_cannot_answer_say_why(body: Any, message: str) -> None:
    with pytest.raises(protocol.BadArgs, match=message):
        protocol.parse(body)


def test_scores_are_a_bare_host_priority_list_clamped_to_zero_through_ten() -> None:
    assert protocol.priority_list({"a": 14, "b": -3}) == [{"Host": "a", "Score": 10}, {"Host": "b", "Score": 0}]


# --- the rules -------------------------------------------------------------------------------------------------

def facts(nodes: dict[str, Any], config: SpotConfig = SpotConfig()) -> Any:
    return node_facts(nodes.values(), Detector(config), config)


def test_a_node_about_to_be_reclaimed_fails_for_good_with_its_reason() -> None:
    nodes = {**NODES, "spot-1": node("spot-1", "spot", taints=[SPOT_ITN])}
    history = History(SpotConfig(), clock=lambda: NOW)
    out = filter_nodes(OTHER, list(nodes), facts(nodes), Detector(SpotConfig()), SpotConfig(), NOW, history)
    assert out.unresolvable == {"spot-1": "node is about to be reclaimed (taint aws-node-termination-handler/spot-itn)"}
    assert "spot-1" not in out.passed and out.reasons == {"reclaim": 1}
    assert history.count(("m5.large", "a"), NOW) == 1


def test_nothing_else_is_filtered_by_default_and_unknown_names_pass() -> None:
    out = filter_nodes(CRITICAL, [*NODES, "not-in-view"], facts(NODES), Detector(SpotConfig()), SpotConfig(), NOW)
    assert out.passed == [*NODES, "not-in-view"] and not out.unresolvable


def test_critical_pods_can_be_kept_off_spot_by_configuration() -> None:
    config = SpotConfig.model_validate({"critical": {"requireOnDemand": True}})
    out = filter_nodes(CRITICAL, list(NODES), facts(NODES, config), Detector(config), config, NOW)
    assert set(out.unresolvable) == {"spot-1", "spot-2"} and out.passed == ["od-1", "plain"]
    assert filter_nodes(INTERRUPTIBLE, list(NODES), facts(NODES, config), Detector(config), config,
                        NOW).passed == list(NODES)


def score(pod_class: PodClass, config: SpotConfig = SpotConfig(), history: History | None = None,
          nodes: dict[str, Any] = NODES) -> dict[str, int]:
    return prioritize(pod_class, list(nodes), facts(nodes, config), Detector(config), config, NOW, history)


def test_interruptible_pods_prefer_spot_critical_ones_on_demand_and_others_do_not_care() -> None:
    assert score(INTERRUPTIBLE) == {"spot-1": 10, "spot-2": 10, "od-1": 3, "plain": 5}
    assert score(CRITICAL) == {"spot-1": 0, "spot-2": 0, "od-1": 10, "plain": 5}
    assert score(OTHER) == {"spot-1": 5, "spot-2": 5, "od-1": 5, "plain": 5}


def test_a_pool_interrupted_recently_scores_lower_until_the_window_passes() -> None:
    config = SpotConfig.model_validate({"interruptions": {"windowSeconds": 600, "penalty": 3}})
    clock = [NOW]
    history = History(config, clock=lambda: clock[0])
    history.saw(node("gone-1", "spot"), NOW - 100)  # pool (m5.large, a): spot-1's
    history.saw(node("gone-1", "spot"), NOW - 50)  # the same node again counts once
    history.saw(node("gone-2", "spot"), NOW - 10)
    assert score(INTERRUPTIBLE, config, history)["spot-1"] == 4 and score(INTERRUPTIBLE, config, history)["spot-2"] == 10
    assert prioritize(INTERRUPTIBLE, ["spot-1"], facts(NODES, config), Detector(config), config, NOW + 700,
                      history) == {"spot-1": 10}


def test_cost_weighs_in_by_the_price_table_and_the_factor() -> None:
    config = SpotConfig.model_validate({"cost": {"factor": 0.5, "prices": [
        {"instanceType": "m5.large", "capacity": "spot", "hourly": 0.03},
        {"instanceType": "m5.large", "capacity": "on-demand", "hourly": 0.09}]}})
    scores = score(OTHER, config)
    # half the neutral 5 plus half the cost score: cheapest 10, dearest 0, unpriced 5
    assert scores == {"spot-1": 8, "spot-2": 8, "od-1": 2, "plain": 5}


def test_a_marked_node_scores_nothing() -> None:
    nodes = {"spot-1": node("spot-1", "spot", taints=[SPOT_ITN])}
    assert score(INTERRUPTIBLE, nodes=nodes) == {"spot-1": 0}


# --- over HTTP -------------------------------------------------------------------------------------------------

class View:
    def __init__(self, nodes: list[dict[str, Any]], classes: dict[str, Any] | None = None) -> None:
        self._nodes = tuple(nodes)
        self.classes = classes or {}

    def nodes(self) -> Any:
        return self._nodes

    def priority_class(self, name: str) -> Any:
        return self.classes.get(name)


@pytest.fixture
async def http(aiohttp_client: Callable[..., Any]) -> TestClient:
    view = View(list(NODES.values()), {"critical": {"value": 2_000_000}})
    return await aiohttp_client(make_app(Extender(SpotConfig(), view=view), prefix="/spot", max_bytes=64 * 1024))


async def test_names_mode_reads_the_nodes_and_priority_classes_from_the_view(http: TestClient) -> None:
    pod = {"metadata": {"name": "api", "namespace": "shop"}, "spec": {"priorityClassName": "critical"}}
    answer = await (await http.post("/spot/prioritize", json={"Pod": pod, "NodeNames": ["spot-1", "od-1"]})).json()
    assert answer == [{"Host": "spot-1", "Score": 0}, {"Host": "od-1", "Score": 10}]


async def test_objects_mode_answers_with_node_objects(http: TestClient) -> None:
    marked = node("spot-9", "spot", taints=[SPOT_ITN])
    body = {"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [marked, NODES["od-1"]]}, "NodeNames": None}
    answer = await (await http.post("/spot/filter", json=body)).json()
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["od-1"]
    assert set(answer["FailedAndUnresolvableNodes"]) == {"spot-9"} and answer["Error"] == ""


@pytest.mark.parametrize("payload", [b"{not json", b"[]", b'{"Pod": {}}', b"x" * (65 * 1024)])
async def test_bad_input_gets_an_error_answer_never_a_bare_500(http: TestClient, payload: bytes) -> None:
    response = await http.post("/spot/filter", data=payload, headers={"Content-Type": "application/json"})
    body = await response.json()
    assert response.status == 200 and body["Error"] and body["FailedNodes"] == {}
    scored = await http.post("/spot/prioritize", data=payload, headers={"Content-Type": "application/json"})
    assert scored.status == 400 and (await scored.json())["error"]


async def test_the_probes_and_metrics_answer(http: TestClient) -> None:
    await http.post("/spot/filter", json={"Pod": {}, "NodeNames": ["spot-1"]})
    assert (await http.get("/healthz")).status == 200 and (await http.get("/readyz")).status == 200
    text = await (await http.get("/metrics")).text()
    assert 'placement_webhook_extender_requests_total{result="ok",verb="filter"} 1.0' in text
    assert "placement_webhook_extender_request_duration_seconds_bucket" in text


def test_facts_are_worked_out_again_only_for_nodes_that_changed() -> None:
    config = SpotConfig()
    cache = FactsCache(Detector(config), config)
    first = tuple(NODES.values())
    before = cache.of(first)
    assert cache.of(first) is before, "the same sequence: nothing recomputed"
    changed = node("spot-1", "spot", taints=[SPOT_ITN])
    after = cache.of((changed, *first[1:]))
    assert after["spot-1"].reason == "taint aws-node-termination-handler/spot-itn"
    assert all(after[n] is before[n] for n in ("spot-2", "od-1", "plain"))


def test_not_ready_is_judged_at_the_time_of_the_request_not_when_the_facts_were_made() -> None:
    config = SpotConfig()
    late = node("spot-3", "spot")
    late["status"] = {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2027-01-15T07:59:00Z"}]}
    made = facts({"spot-3": late}, config)
    detector = Detector(config)
    assert filter_nodes(OTHER, ["spot-3"], made, detector, config, NOW).passed == ["spot-3"]  # 60 s: not yet
    assert filter_nodes(OTHER, ["spot-3"], made, detector, config, NOW + 120).unresolvable["spot-3"].startswith(
        "node is about to be reclaimed (spot node not Ready for 180 s)")


async def test_nodes_are_passed_back_as_they_came_and_other_spellings_still_read(http: TestClient) -> None:
    full = {**NODES["od-1"], "status": {"images": [{"names": ["x" * 50], "sizeBytes": 123}], "nodeInfo": {"a": 1}}}
    answer = await (await http.post("/spot/filter", json={"Pod": {}, "Nodes": {"items": [full]}})).json()
    assert answer["Nodes"]["items"] == [full], "fields the rules do not read come back too"
    lower = await (await http.post("/spot/filter", json={"pod": {}, "nodes": {"items": [full]}})).json()
    assert lower["Nodes"]["items"] == [full] and lower["Error"] == ""
