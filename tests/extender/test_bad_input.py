"""Bad input to the extender: never a 5xx. Filter keeps the scheduler protocol's convention (an
``ExtenderFilterResult`` whose ``Error`` says what is wrong, which the scheduler treats as the
extender failing); prioritize and every other error answer is JSON ``{"error": "...", "status": N}``.

Examples found by a flood of malformed requests come first; then properties that feed each
endpoint generated garbage through the real aiohttp application, in process."""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st

from tests.server.garbage import PROPERTY, assert_error_shape, bodies, content_types, headers_for, nested
from webhook.extender.app import Extender, make_app
from webhook.spot.config import SpotConfig

Client = TestClient[web.Request, web.Application]
MAX_BYTES = 1 << 20
CAP = "node.kubernetes.io/capacity"
SPOT_ITN = {"key": "aws-node-termination-handler/spot-itn", "value": "e-1", "effect": "NoSchedule"}


def node(name: str, kind: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {CAP: kind, "node.kubernetes.io/instance-type": "m5.large"},
                         "annotations": {"example.com/note": "x"}},
            "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


NODES = [node("spot-1", "spot"), node("spot-2", "spot", taints=[SPOT_ITN]), node("od-1", "on-demand")]
# A Pod with every field the rules read.
POD: dict[str, Any] = {
    "metadata": {"name": "api", "namespace": "shop", "annotations": {"placement.novasphere.dev/interruptible": "true"}},
    "spec": {
        "priority": 1000, "priorityClassName": "high",
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {CAP: "spot"},
        "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": CAP, "operator": "In", "values": ["spot"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": CAP, "operator": "In", "values": ["spot"]}]}}],
        }},
        "containers": [{"name": "app", "image": "nginx"}],
    },
}
NAMES_ARGS = {"Pod": POD, "NodeNames": ["spot-1", "spot-2", "od-1", "unknown"]}
OBJECTS_ARGS = {"Pod": POD, "Nodes": {"apiVersion": "v1", "kind": "NodeList", "items": NODES}}
# The first the extender answered with 500 (prioritize) and ``internal error: AttributeError``.
WRONG_SPEC = {"Pod": {"metadata": {"name": "p"}, "spec": "x"}, "NodeNames": ["a"]}


class View:
    def nodes(self) -> Any:
        return tuple(NODES)

    def priority_class(self, name: str) -> Any:
        return {"value": 2_000_000} if name == "high" else None


@pytest.fixture
async def http(aiohttp_client: Callable[..., Awaitable[Client]]) -> Client:
    return await aiohttp_client(make_app(Extender(SpotConfig(), view=View()), max_bytes=MAX_BYTES))


async def filter_error(http: Client, body: bytes) -> str:
    """The filter answer's ``Error``, checking the answer is an ExtenderFilterResult that passes no node."""
    resp = await http.post("/filter", data=body, headers={"Content-Type": "application/json"})
    answer = await resp.json()
    assert resp.status == 200 and answer["FailedNodes"] == {} and not answer.get("NodeNames")
    error: str = answer["Error"]
    return error


async def prioritize_error(http: Client, body: bytes) -> str:
    resp = await http.post("/prioritize", data=body, headers={"Content-Type": "application/json"})
    raw = await resp.read()
    assert_error_shape(resp.status, raw)
    assert resp.status == 400
    error: str = json.loads(raw)["error"]
    return error


# --- examples --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "field"), [
    (WRONG_SPEC, "ExtenderArgs.Pod.spec"),
    ({"pod": {"metadata": {"name": "p"}, "spec": "x"}, "nodenames": ["a"]}, "ExtenderArgs.Pod.spec"),
    ({"Pod": {"metadata": {"annotations": ["x"]}}, "NodeNames": ["a"]}, "ExtenderArgs.Pod.metadata.annotations"),
    ({"Pod": {"spec": {"tolerations": ["x"]}}, "NodeNames": ["a"]}, "ExtenderArgs.Pod.spec.tolerations[0]"),
    ({"Pod": {"spec": {"priority": "high"}}, "NodeNames": ["a"]}, "ExtenderArgs.Pod.spec.priority"),
    ({"Pod": {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": "zone"}}}}}, "NodeNames": ["a"]},
     "ExtenderArgs.Pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
    ({"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a", "labels": ["spot"]}}]}},
     "ExtenderArgs.Nodes.items[0].metadata.labels"),
    ({"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a"}, "spec": {"taints": "x"}}]}},
     "ExtenderArgs.Nodes.items[0].spec.taints"),
    ({"pod": {}, "nodes": {"items": [{"metadata": {"name": "a"}, "status": {"conditions": [7]}}]}},
     "ExtenderArgs.Nodes.items[0].status.conditions[0]"),
])
async def test_args_of_the_wrong_types_are_bad_input_naming_the_field(http: Client, args: dict[str, Any],
                                                                        field: str) -> None:
    body = json.dumps(args).encode()
    assert (await prioritize_error(http, body)).startswith(f"{field}: expected")
    assert (await filter_error(http, body)).startswith(f"{field}: expected")


@pytest.mark.parametrize("body", [
    b"[" * 3000,
    nested(3000, kind="object", closed=True),
    json.dumps({"Pod": "DEEP", "NodeNames": ["a"]}).encode().replace(b'"DEEP"', nested(3000, kind="object", closed=True)),
    json.dumps({"Pod": {}, "NodeNames": "DEEP"}).encode().replace(b'"DEEP"', nested(3000, kind="array", closed=True)),
], ids=["brackets", "objects", "deep-pod", "deep-names"])
async def test_nesting_deeper_than_python_reads_is_bad_input(http: Client, body: bytes) -> None:
    assert "too deeply" in await prioritize_error(http, body)
    assert "too deeply" in await filter_error(http, body)


async def test_a_null_where_go_takes_one_is_no_error(http: Client) -> None:
    args = {"Pod": {"metadata": None, "spec": {"tolerations": None, "priority": None}}, "NodeNames": ["od-1"]}
    resp = await http.post("/prioritize", json=args)
    assert resp.status == 200 and await resp.json() == [{"Host": "od-1", "Score": 5}]


async def test_a_body_that_does_not_decompress_is_bad_input(http: Client) -> None:
    for verb in ("filter", "prioritize"):
        resp = await http.post(f"/{verb}", data=b"not gzip", headers={"Content-Encoding": "gzip"})
        answer = await resp.json()
        assert "could not be read" in (answer["Error"] if verb == "filter" else answer["error"])
        assert resp.status == (200 if verb == "filter" else 400)


@pytest.mark.parametrize(("method", "path", "status", "message"), [
    ("GET", "/filter", 405, "method GET is not allowed on /filter; allowed: POST"),
    ("POST", "/score", 404, "no endpoint at /score"),
    ("POST", "/readyz", 405, "method POST is not allowed on /readyz; allowed: GET, HEAD"),
])
async def test_a_wrong_path_or_method_is_answered_in_json(http: Client, method: str, path: str, status: int,
                                                          message: str) -> None:
    resp = await http.request(method, path)
    assert resp.status == status and await resp.json() == {"error": message, "status": status}


async def test_not_ready_is_a_503_in_the_error_shape(aiohttp_client: Callable[..., Awaitable[Client]]) -> None:
    app = make_app(Extender(SpotConfig()), not_ready=lambda: ["nodes not synced", "namespaces not synced"])
    resp = await (await aiohttp_client(app)).get("/readyz")
    assert resp.status == 503
    assert await resp.json() == {"error": "not ready: nodes not synced; namespaces not synced", "status": 503}


# --- properties ------------------------------------------------------------------------------------------------

garbage = st.one_of(bodies(NAMES_ARGS, limit=MAX_BYTES), bodies(OBJECTS_ARGS, limit=MAX_BYTES))


@PROPERTY
@given(body=garbage, content_type=content_types)
async def test_filter_answers_any_body_with_an_extender_filter_result(http: Client, body: bytes,
                                                                      content_type: str) -> None:
    resp = await http.post("/filter", data=body, headers=headers_for(content_type), skip_auto_headers=["Content-Type"])
    raw = await resp.read()
    assert resp.status == 200, raw[:300]
    answer = json.loads(raw)
    assert set(answer) >= {"FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    if answer["Error"]:
        assert answer["FailedNodes"] == {} and not answer.get("NodeNames") and not answer.get("Nodes")


@PROPERTY
@given(body=garbage, content_type=content_types)
async def test_prioritize_answers_any_body_with_scores_or_a_json_400(http: Client, body: bytes,
                                                                     content_type: str) -> None:
    resp = await http.post("/prioritize", data=body, headers=headers_for(content_type),
                           skip_auto_headers=["Content-Type"])
    raw = await resp.read()
    if resp.status == 200:
        assert all(0 <= entry["Score"] <= 10 for entry in json.loads(raw))
    else:
        assert_error_shape(resp.status, raw)


@PROPERTY
@given(method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
       path=st.one_of(st.sampled_from(["/filter", "/prioritize", "/healthz", "/readyz", "/metrics", "/"]),
                      st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._~%", max_size=30).map("/{}".format)),
       body=st.binary(max_size=512))
async def test_every_path_and_method_answers_errors_in_json(http: Client, method: str, path: str,
                                                            body: bytes) -> None:
    resp = await http.request(method, path, data=body)
    raw = await resp.read()
    if resp.status >= 300:
        assert_error_shape(resp.status, raw)
