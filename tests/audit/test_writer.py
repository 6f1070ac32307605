"""The report writer: creates what is missing, updates only what changed apart from timestamps,
deletes our stale reports, never touches Kyverno's, and keeps going when the API server refuses
(CRD missing, RBAC, an invalid object): each refusal counted by reason and logged once per cause."""
from __future__ import annotations

import copy
import logging
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from webhook.audit import reports
from webhook.audit.model import Resource, Result, Status
from webhook.audit.writer import ReportWriter
from webhook.cluster.client import ApiError

NOW = datetime(2026, 11, 27, 7, 0, 0, tzinfo=UTC)
BASE = "/apis/wgpolicyk8s.io/v1alpha2"


class ReportApi:
    """The few requests the writer makes, against a dict of stored reports; ``refuse`` maps a
    (method, path prefix) to the ApiError to answer instead."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(host="https://api.test")
        self.stored: dict[str, dict[str, Any]] = {}  # path -> object
        self.calls: list[tuple[str, str]] = []
        self.refuse: dict[tuple[str, str], ApiError] = {}
        self._version = 0

    def _check(self, method: str, path: str) -> None:
        self.calls.append((method, path))
        for (m, prefix), error in self.refuse.items():
            if m == method and path.startswith(prefix):
                raise error

    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self._version)
        self.stored[path] = stored
        return stored

    async def list_pages(self, path: str, params: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        self._check("LIST", path)
        key, value = (params or {})["labelSelector"].split("=")
        cluster = path.endswith("/clusterpolicyreports")
        items = [copy.deepcopy(o) for p, o in sorted(self.stored.items())
                 if ("/namespaces/" not in p) == cluster and (o["metadata"].get("labels") or {}).get(key) == value]
        yield {"items": items}

    async def create(self, path: str, body: Mapping[str, Any], *, field_manager: str = "") -> dict[str, Any]:
        self._check("POST", path)
        target = f"{path}/{body['metadata']['name']}"
        if target in self.stored:
            raise ApiError(409, "AlreadyExists", "exists")
        return self.put(target, dict(body))

    async def replace(self, path: str, body: Mapping[str, Any], *, field_manager: str = "") -> dict[str, Any]:
        self._check("PUT", path)
        if self.stored[path]["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        return self.put(path, dict(body))

    async def request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        self._check(method, path)
        if path not in self.stored:
            raise ApiError(404, "NotFound", "not found")
        return self.stored.pop(path)

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.calls if m != "LIST"]


def ns_path(namespace: str, name: str = "placement-webhook") -> str:
    return f"{BASE}/namespaces/{namespace}/policyreports/{name}"


def fail(namespace: str | None, name: str = "web", status: Status = Status.FAIL) -> Result:
    kind = "Deployment" if namespace else "Node"
    return Result(Resource("apps/v1" if namespace else "v1", kind, name, namespace), "spread-web", "affinity", status,
                  "would add podAntiAffinity")


def built(*results: Result, at: datetime = NOW) -> reports.Reports:
    return reports.build(results, now=at)


@pytest.fixture
def api() -> ReportApi:
    return ReportApi()


@pytest.fixture
def refusals() -> list[str]:
    return []


@pytest.fixture
def writer(api: ReportApi, refusals: list[str]) -> ReportWriter:
    return ReportWriter(api, on_error=refusals.append)  # type: ignore[arg-type]


async def test_missing_reports_are_created_in_each_namespace_and_cluster_wide(api: ReportApi, writer: ReportWriter) -> None:
    done = await writer.write(built(fail("shop"), fail("bank"), fail(None, "gpu-1")))
    assert (done.created, done.failed) == (3, 0)
    assert sorted(api.stored) == [f"{BASE}/clusterpolicyreports/placement-webhook", ns_path("bank"), ns_path("shop")]


async def test_nothing_is_written_when_only_the_timestamps_would_change(api: ReportApi, writer: ReportWriter) -> None:
    await writer.write(built(fail("shop")))
    api.calls.clear()
    done = await writer.write(built(fail("shop"), at=NOW + timedelta(hours=1)))
    assert (done.unchanged, done.updated) == (1, 0)
    assert api.writes() == []


async def test_a_changed_report_is_updated_conditionally_and_unchanged_results_keep_their_timestamps(
        api: ReportApi, writer: ReportWriter) -> None:
    await writer.write(built(fail("shop", "a"), fail("shop", "b")))
    first = api.stored[ns_path("shop")]["metadata"]["resourceVersion"]
    done = await writer.write(built(fail("shop", "a"), fail("shop", "b", Status.PASS), at=NOW + timedelta(hours=1)))
    assert done.updated == 1
    stored = api.stored[ns_path("shop")]
    assert stored["metadata"]["resourceVersion"] != first
    assert [r["result"] for r in stored["results"]] == ["fail", "pass"]
    assert [r["timestamp"]["seconds"] for r in stored["results"]] == [int(NOW.timestamp()), int(NOW.timestamp()) + 3600]
    assert stored["summary"]["pass"] == 1


async def test_labels_others_added_to_our_report_are_kept_on_update(api: ReportApi, writer: ReportWriter) -> None:
    await writer.write(built(fail("shop")))
    api.stored[ns_path("shop")]["metadata"]["labels"]["team"] = "payments"
    await writer.write(built(fail("shop", status=Status.PASS)))
    assert api.stored[ns_path("shop")]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "placement-webhook", "team": "payments"}


async def test_our_report_in_a_namespace_with_no_results_left_is_deleted_and_kyvernos_are_never_touched(
        api: ReportApi, writer: ReportWriter) -> None:
    kyverno = {"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
               "metadata": {"name": "polr-ns-bank", "namespace": "bank",
                            "labels": {"app.kubernetes.io/managed-by": "kyverno"}}, "results": []}
    api.put(ns_path("bank", "polr-ns-bank"), kyverno)
    await writer.write(built(fail("shop"), fail("bank"), fail(None, "gpu-1")))
    done = await writer.write(built(fail("shop")))
    assert done.deleted == 2
    assert sorted(api.stored) == [ns_path("bank", "polr-ns-bank"), ns_path("shop")]


async def test_a_missing_crd_is_counted_logged_once_and_the_audit_goes_on(
        api: ReportApi, writer: ReportWriter, refusals: list[str], caplog: pytest.LogCaptureFixture) -> None:
    api.refuse[("LIST", f"{BASE}/policyreports")] = ApiError(404, "NotFound", "the server could not find the requested resource")
    with caplog.at_level(logging.DEBUG, logger="webhook.audit.writer"):
        first = await writer.write(built(fail("shop"), fail(None, "gpu-1")))
        await writer.write(built(fail("shop"), fail(None, "gpu-1")))
    assert (first.failed, first.created) == (1, 1)  # the cluster-wide report is still written
    assert refusals == ["not_found", "not_found"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "is the wgpolicyk8s.io PolicyReport CRD installed?" in warnings[0]


async def test_refused_writes_are_counted_by_reason_and_the_other_namespaces_are_still_written(
        api: ReportApi, writer: ReportWriter, refusals: list[str], caplog: pytest.LogCaptureFixture) -> None:
    api.refuse[("POST", f"{BASE}/namespaces/bank/")] = ApiError(403, "Forbidden", "cannot create policyreports")
    api.refuse[("POST", f"{BASE}/namespaces/card/")] = ApiError(403, "Forbidden", "cannot create policyreports")
    api.refuse[("POST", f"{BASE}/namespaces/fund/")] = ApiError(422, "Invalid", "results[0].result: Unsupported value")
    with caplog.at_level(logging.WARNING, logger="webhook.audit.writer"):
        done = await writer.write(built(fail("bank"), fail("card"), fail("fund"), fail("shop")))
    assert (done.created, done.failed) == (1, 3)
    assert refusals == ["forbidden", "forbidden", "invalid"]
    assert list(api.stored) == [ns_path("shop")]
    assert len(caplog.records) == 2  # one per cause: forbidden, invalid


async def test_a_write_that_raced_another_is_counted_as_a_conflict_and_done_on_the_next_pass(
        api: ReportApi, writer: ReportWriter, refusals: list[str]) -> None:
    await writer.write(built(fail("shop")))
    original_list = api.list_pages

    async def stale(path: str, params: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        async for page in original_list(path, params):
            for item in page["items"]:
                item["metadata"]["resourceVersion"] = "0"
            yield page

    api.list_pages = stale  # type: ignore[method-assign]
    done = await writer.write(built(fail("shop", status=Status.PASS)))
    assert (done.failed, refusals) == (1, ["conflict"])
    api.list_pages = original_list  # type: ignore[method-assign]
    assert (await writer.write(built(fail("shop", status=Status.PASS)))).updated == 1


async def test_an_unreachable_api_server_is_counted_not_raised(api: ReportApi, writer: ReportWriter,
                                                               refusals: list[str]) -> None:
    async def unreachable(path: str, params: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        raise ConnectionRefusedError(111, "Connection refused")
        yield {}

    api.list_pages = unreachable  # type: ignore[method-assign]
    done = await writer.write(built(fail("shop"), fail(None, "gpu-1")))
    assert (done.failed, refusals) == (2, ["unreachable", "unreachable"])
