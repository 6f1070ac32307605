"""``POST /mutate`` and the probes: every row of "Behaviour on odd input" (docs/operations.md) through the real aiohttp app."""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.kit.reviews import admission_review, decode_patch
from tests.kit.server import Pki, many_terms_policy, sample, with_node_affinity_terms
from tests.kit.workloads import deployment
from webhook.engine import admission
from webhook.runtime import logs
from webhook.server import app as server

Client = TestClient[web.Request, web.Application]
MiB = 1024 * 1024
REQUESTS = "placement_webhook_admission_requests_total"


async def post_review(client: Client, review: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post("/mutate", json=review)
    assert resp.status == 200, await resp.text()
    answer: dict[str, Any] = await resp.json()
    return answer


async def test_a_matching_deployment_gets_a_base64_json_patch_and_its_uid_back(client: Client) -> None:
    review = admission_review(deployment())
    answer = await post_review(client, review)
    response = answer["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is True
    patch = decode_patch(answer)
    assert {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"disktype": "ssd"}} in patch


@pytest.mark.parametrize("api_version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
async def test_the_answer_uses_the_reviews_own_api_version(client: Client, api_version: str) -> None:
    answer = await post_review(client, admission_review(deployment(), api_version=api_version))
    assert answer["apiVersion"] == api_version
    assert answer["kind"] == "AdmissionReview"


def _review_without(key: str) -> bytes:
    review = admission_review(deployment())
    if key == "request":
        del review["request"]
    else:
        del review["request"][key]
    return json.dumps(review).encode()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "body is not JSON"),
        (b"", "body is not JSON"),
        (b"[1, 2]", "JSON array"),
        (b'"AdmissionReview"', "JSON string"),
        (b'{"apiVersion": "v1", "kind": "Pod"}', "apiVersion must be one of"),
        (_review_without("request"), "no request object"),
        (_review_without("uid"), "request.uid is missing"),
        (b"\xff\xfe not utf-8", "body is not JSON"),
    ],
    ids=["malformed", "empty", "array", "string", "not-a-review", "no-request", "no-uid", "binary"],
)
async def test_a_body_that_is_not_an_admission_review_is_a_400_with_a_json_error(
    client: Client, state: server.State, body: bytes, message: str
) -> None:
    resp = await client.post("/mutate", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    error = await resp.json()
    assert message in error["error"]
    assert sample(state.metrics.registry, REQUESTS, {"kind": "", "operation": "", "result": "invalid"}) == 1


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/yaml", None])
async def test_anything_but_application_json_is_415(client: Client, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    body = json.dumps(admission_review(deployment())).encode()
    resp = await client.post("/mutate", data=body, headers=headers, skip_auto_headers=["Content-Type"])
    assert resp.status == 415
    assert "application/json" in (await resp.json())["error"]


async def test_a_charset_parameter_on_the_content_type_is_accepted(client: Client) -> None:
    body = json.dumps(admission_review(deployment())).encode()
    resp = await client.post("/mutate", data=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert resp.status == 200


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/mutate", 405), ("PUT", "/mutate", 405), ("POST", "/validate", 404), ("GET", "/", 404), ("POST", "/healthz", 405)],
)
async def test_wrong_method_is_405_and_wrong_path_is_404(client: Client, method: str, path: str, status: int) -> None:
    resp = await client.request(method, path, json={})
    assert resp.status == status


async def test_an_unknown_kind_is_allowed_without_a_patch(client: Client, state: server.State) -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "prod"}}
    answer = await post_review(client, admission_review(obj))
    assert answer["response"] == {"uid": answer["response"]["uid"], "allowed": True}
    assert sample(state.metrics.registry, REQUESTS, {"kind": "other", "operation": "CREATE", "result": "ignored"}) == 1


async def test_delete_is_allowed_without_a_patch(client: Client) -> None:
    answer = await post_review(client, admission_review(None, operation="DELETE", old=deployment()))
    assert "patch" not in answer["response"]
    assert answer["response"]["allowed"] is True


async def test_dry_run_is_answered_exactly_like_a_real_request(client: Client) -> None:
    real = await post_review(client, admission_review(deployment(), uid="same"))
    dry = await post_review(client, admission_review(deployment(), uid="same", dry_run=True))
    assert dry == real
    assert "patch" in dry["response"]


async def test_an_already_placed_object_is_allowed_without_a_patch(client: Client, state: server.State) -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "ssd"}
    obj["metadata"]["annotations"] = {"placement.novasphere.dev/applied": "ssd"}
    answer = await post_review(client, admission_review(obj))
    assert "patch" not in answer["response"] and "patchType" not in answer["response"]
    assert sample(state.metrics.registry, REQUESTS, {"kind": "Deployment", "operation": "CREATE", "result": "unchanged"}) == 1


async def test_an_object_annotated_skip_is_allowed_without_a_patch_and_with_a_warning(client: Client) -> None:
    obj = deployment()
    obj["metadata"]["annotations"] = {"placement.novasphere.dev/skip": "true"}
    answer = await post_review(client, admission_review(obj))
    assert "patch" not in answer["response"]
    assert any("skip" in w for w in answer["response"]["warnings"])


async def _chunks(data: bytes, size: int = MiB) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_over_7_mib_is_413_while_a_6_mib_update_is_served(client: Client, chunked: bool) -> None:
    old = deployment(pad=3 * MiB - 4096)
    new = deployment(pad=3 * MiB - 4096)
    update = json.dumps(admission_review(new, operation="UPDATE", old=old)).encode()
    assert 6 * MiB - 64 * 1024 < len(update) <= 6 * MiB
    too_big = b" " * (7 * MiB + 1)
    headers = {"Content-Type": "application/json"}
    big_body: Any = _chunks(too_big) if chunked else too_big
    served, refused = await asyncio.gather(
        client.post("/mutate", data=update, headers=headers), client.post("/mutate", data=big_body, headers=headers)
    )
    assert refused.status == 413
    assert "limit" in (await refused.json())["error"]
    assert served.status == 200
    assert (await served.json())["response"]["allowed"] is True


async def test_a_body_of_exactly_7_mib_is_read(client: Client) -> None:
    body = json.dumps(admission_review(deployment())).encode()
    body = body + b" " * (7 * MiB - len(body))  # trailing whitespace is valid JSON
    resp = await client.post("/mutate", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 200


def _client_for(aiohttp_client: Callable[..., Awaitable[Client]], state: server.State) -> Awaitable[Client]:
    return aiohttp_client(server.make_app(state))


def _state_with_policy(pki: Pki, folder: Path, text: str) -> server.State:
    folder.mkdir()
    (folder / "policy.yaml").write_text(text)
    return server.State(server.ServerConfig(policies=(folder,), tls_cert=pki.cert, tls_key=pki.key, reload_interval=3600))


async def test_an_engine_that_raises_fails_open_with_a_warning_and_an_error_metric(
    client: Client, state: server.State, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(admission, "_admit", explode)  # whatever breaks inside admission
    answer = await post_review(client, admission_review(deployment()))
    response = answer["response"]
    assert response["allowed"] is True and "patch" not in response
    assert any("internal error" in w for w in response["warnings"])
    assert sample(state.metrics.registry, REQUESTS, {"kind": "Deployment", "operation": "CREATE", "result": "error"}) == 1


async def test_a_policy_the_object_cannot_take_is_left_out_with_a_warning(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path
) -> None:
    # 9 policy terms ANDed into 9 object terms make 81, over the engine's limit of 64.
    state = _state_with_policy(pki, tmp_path / "many", many_terms_policy(9))
    client = await _client_for(aiohttp_client, state)
    answer = await post_review(client, admission_review(with_node_affinity_terms(deployment(), 9)))
    response = answer["response"]
    assert response["allowed"] is True and "patch" not in response
    assert any(w.startswith("many-terms: not applied") and "64" in w for w in response["warnings"])
    assert sample(state.metrics.registry, "placement_webhook_policy_errors_total", {"policy": "many-terms"}) == 1


async def test_each_review_is_logged_as_one_json_line_with_the_spec_fields(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    review = admission_review(deployment("api"))
    with caplog.at_level(logging.INFO, logger=server.REVIEW_LOGGER):
        await post_review(client, review)
    records = [r for r in caplog.records if r.name == server.REVIEW_LOGGER]
    assert len(records) == 1
    line = json.loads(logs.JsonFormatter().format(records[0]))
    assert line["uid"] == review["request"]["uid"]
    assert (line["kind"], line["namespace"], line["name"], line["operation"]) == ("apps/v1/Deployment", "prod", "api", "CREATE")
    assert line["applied"] == ["ssd"] and line["result"] == "patched"
    assert line["patchBytes"] > 0 and line["patchOperations"] >= 1
    assert 0 < line["durationMs"] < 10_000


async def test_a_replicaset_its_deployment_owns_is_allowed_unchanged_and_the_log_says_why(
    client: Client, state: server.State, caplog: pytest.LogCaptureFixture
) -> None:
    replica_set = deployment("web-5d4f8c")
    replica_set["kind"] = "ReplicaSet"
    replica_set["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-1", "controller": True}]
    with caplog.at_level(logging.INFO, logger=server.REVIEW_LOGGER):
        answer = await post_review(client, admission_review(replica_set))
    assert answer["response"] == {"uid": answer["response"]["uid"], "allowed": True}
    assert sample(state.metrics.registry, REQUESTS, {"kind": "ReplicaSet", "operation": "CREATE", "result": "ignored"}) == 1
    [record] = [r for r in caplog.records if r.name == server.REVIEW_LOGGER]
    line = json.loads(logs.JsonFormatter().format(record))
    assert (line["result"], line["reason"]) == ("ignored", "owned by Deployment/web: placed through its owner")


async def test_a_broken_policy_set_at_start_is_not_ready_and_admits_unchanged_with_a_warning(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path
) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "bad.yaml").write_text("kind: PlacementPolicy\nspec: [\n")
    config = server.ServerConfig(policies=(folder,), tls_cert=pki.cert, tls_key=pki.key, reload_interval=3600)
    client = await aiohttp_client(server.make_app(server.State(config)))
    ready = await client.get("/readyz")
    assert ready.status == 503
    assert "no valid policy set" in await ready.text()
    answer = await post_review(client, admission_review(deployment()))
    assert "patch" not in answer["response"]
    assert any("no valid policy set" in w for w in answer["response"]["warnings"])


async def test_probes_report_alive_and_ready_then_not_ready_while_shutting_down(client: Client, state: server.State) -> None:
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 200
    state.shutting_down = True
    resp = await client.get("/readyz")
    assert resp.status == 503 and "shutting down" in await resp.text()
    assert (await client.get("/healthz")).status == 200


async def test_the_metrics_port_serves_the_spec_metrics_in_prometheus_text(
    aiohttp_client: Callable[..., Awaitable[Client]], client: Client, state: server.State
) -> None:
    await post_review(client, admission_review(deployment()))
    plain = await aiohttp_client(server.make_metrics_app(state))
    resp = await plain.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    text = await resp.text()
    for line in (
        'placement_webhook_admission_requests_total{kind="Deployment",operation="CREATE",result="patched"} 1.0',
        "placement_webhook_admission_duration_seconds_count 1.0",
        "placement_webhook_policies_loaded 1.0",
        'placement_webhook_policy_reloads_total{result="success"} 1.0',
        'placement_webhook_policy_applied_total{policy="ssd"} 1.0',
        'placement_webhook_certificate_reloads_total{result="success"} 1.0',
    ):
        assert line in text
    expiry = sample(state.metrics.registry, "placement_webhook_certificate_expiry_timestamp_seconds")
    assert state.certs.info is not None and expiry == state.certs.info.expiry_timestamp
    assert (await plain.get("/readyz")).status == 200
    assert (await plain.post("/mutate", json={})).status == 404
