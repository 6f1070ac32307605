"""Bad input to the admission server, on both ports: never a 5xx, and every error is JSON
``{"error": "...", "status": N}`` (docs/operations.md, "Endpoints").

Examples found by a flood of malformed requests come first; then properties that feed each
endpoint generated garbage through the real aiohttp applications, in process."""
from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.reviews import admission_review
from tests.kit.workloads import deployment
from tests.server.garbage import (
    DEEP_MARK,
    PROPERTY,
    assert_error_shape,
    bodies,
    content_types,
    headers_for,
    nested,
)
from webhook.engine import review
from webhook.server import app as server

Client = TestClient[web.Request, web.Application]
JSON = {"Content-Type": "application/json"}


def placed_deployment() -> dict[str, Any]:
    """A Deployment with every part of a pod spec that policies read and write."""
    obj = deployment(annotations={"team": "shop"})
    obj["spec"]["template"]["spec"].update({
        "nodeSelector": {"disktype": "ssd"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        "priorityClassName": "high",
    })
    return obj


REVIEW = admission_review(placed_deployment(), uid="0f7f6d3e-0000-4000-8000-000000000001")


@pytest.fixture
async def plain(aiohttp_client: Callable[..., Awaitable[Client]], state: server.State) -> Client:
    return await aiohttp_client(server.make_metrics_app(state))


def deep_review(depth: int) -> bytes:
    """``REVIEW`` whose Deployment carries a map nested ``depth`` levels deep in an annotation-like
    field of its metadata."""
    template = json.loads(json.dumps(REVIEW))
    template["request"]["object"]["metadata"]["labels"] = DEEP_MARK
    return json.dumps(template).encode().replace(json.dumps(DEEP_MARK).encode(), nested(depth, kind="object", closed=True))


# --- examples --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [900, 1000, 3000])
async def test_a_body_of_a_thousand_open_brackets_is_a_400_not_a_500(client: Client, depth: int) -> None:
    resp = await client.post("/mutate", data=b"[" * depth, headers=JSON)
    assert_error_shape(resp.status, await resp.read())
    assert resp.status == 400


@pytest.mark.parametrize("depth", [sys.getrecursionlimit(), 4000])
async def test_a_review_whose_object_nests_deeper_than_python_reads_is_a_400_saying_so(client: Client,
                                                                                        depth: int) -> None:
    resp = await client.post("/mutate", data=deep_review(depth), headers=JSON)
    assert resp.status == 400
    assert "nests arrays and objects too deeply" in (await resp.json())["error"]


def test_the_decoder_refuses_deep_nesting_as_a_bad_review() -> None:
    with pytest.raises(review.BadReview, match="too deeply"):
        review.parse(b"[" * 100_000)


async def test_a_review_nesting_a_few_hundred_levels_is_answered(client: Client) -> None:
    resp = await client.post("/mutate", data=deep_review(300), headers=JSON)
    assert resp.status == 200 and (await resp.json())["response"]["uid"] == REVIEW["request"]["uid"]


async def test_a_gzip_body_that_does_not_decompress_is_a_400(client: Client) -> None:
    resp = await client.post("/mutate", data=b"not gzip at all", headers={**JSON, "Content-Encoding": "gzip"})
    assert_error_shape(resp.status, await resp.read())
    assert "could not be read" in (await resp.json())["error"]


async def test_a_gzip_body_that_decompresses_is_read(client: Client) -> None:
    resp = await client.post("/mutate", data=gzip.compress(json.dumps(REVIEW).encode()),
                             headers={**JSON, "Content-Encoding": "gzip"})
    assert resp.status == 200


@pytest.mark.parametrize(
    ("method", "path", "status", "message"),
    [("GET", "/mutate", 405, "method GET is not allowed on /mutate; allowed: POST"),
     ("PUT", "/mutate", 405, "method PUT is not allowed on /mutate; allowed: POST"),
     ("POST", "/validate", 404, "no endpoint at /validate"),
     ("GET", "/", 404, "no endpoint at /"),
     ("POST", "/healthz", 405, "method POST is not allowed on /healthz; allowed: GET, HEAD")],
)
async def test_a_wrong_path_or_method_is_answered_in_json_on_the_tls_port(
    client: Client, method: str, path: str, status: int, message: str
) -> None:
    resp = await client.request(method, path, json={})
    assert resp.status == status and resp.content_type == "application/json"
    assert await resp.json() == {"error": message, "status": status}
    if status == 405:
        assert resp.headers["Allow"], "a 405 still says which methods are allowed"


@pytest.mark.parametrize(("method", "path", "status"), [("POST", "/mutate", 404), ("POST", "/metrics", 405),
                                                         ("DELETE", "/readyz", 405)])
async def test_a_wrong_path_or_method_is_answered_in_json_on_the_metrics_port(
    plain: Client, method: str, path: str, status: int
) -> None:
    resp = await plain.request(method, path)
    assert resp.status == status
    assert_error_shape(resp.status, await resp.read())


async def test_not_ready_is_a_503_in_the_error_shape_with_the_reasons(client: Client, plain: Client,
                                                                      state: server.State) -> None:
    state.shutting_down = True
    for port in (client, plain):
        resp = await port.get("/readyz")
        assert resp.status == 503
        assert await resp.json() == {"error": "not ready: shutting down", "status": 503}


# --- properties ------------------------------------------------------------------------------------------------

json_types = st.sampled_from(["application/json", "application/json; charset=utf-8", "Application/JSON"])


@PROPERTY
@given(body=bodies(REVIEW, limit=server.MAX_BODY), content_type=json_types)
async def test_mutate_answers_any_body_without_a_5xx_and_in_json(client: Client, body: bytes,
                                                                  content_type: str) -> None:
    resp = await client.post("/mutate", data=body, headers=headers_for(content_type))
    raw = await resp.read()
    if resp.status == 200:
        answer = json.loads(raw)
        assert answer["kind"] == "AdmissionReview" and answer["response"]["allowed"] is True
    else:
        assert_error_shape(resp.status, raw)


@PROPERTY
@given(content_type=content_types, body=st.sampled_from([json.dumps(REVIEW).encode(), b"{", b""]))
async def test_mutate_answers_any_content_type_without_a_5xx_and_in_json(client: Client, content_type: str,
                                                                         body: bytes) -> None:
    resp = await client.post("/mutate", data=body, headers=headers_for(content_type),
                             skip_auto_headers=["Content-Type"])
    raw = await resp.read()
    if resp.status != 200:
        assert_error_shape(resp.status, raw)


methods = st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
# "//x" is left out: the test client takes it for a URL without a scheme, not for a path.
url_paths = st.one_of(
    st.sampled_from(["/mutate", "/healthz", "/readyz", "/metrics", "/", "/mutate/", "/%00", "/..%2f"]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/-._~%", max_size=40).map(lambda p: "/" + p.lstrip("/")),
)


@PROPERTY
@given(method=methods, path=url_paths, body=st.binary(max_size=512))
async def test_every_path_and_method_on_both_ports_answers_errors_in_json(
    client: Client, plain: Client, method: str, path: str, body: bytes
) -> None:
    for port in (client, plain):
        resp = await port.request(method, path, data=body)
        raw = await resp.read()
        if resp.status >= 300:
            assert_error_shape(resp.status, raw)
