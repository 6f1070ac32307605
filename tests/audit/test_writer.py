"""The report writer: creates what is missing, updates only what changed apart from timestamps,
deletes our stale reports, never touches Kyverno's, and keeps going when the API server refuses
(CRD missing, RBAC, an invalid object): each refusal counted by reason and logged once per cause."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.kit.report_api import ReportApi
from webhook.audit import reports
from webhook.audit.model import Resource, Result, Status
from webhook.audit.writer import ReportWriter
from webhook.cluster.client import ApiError

NOW = datetime(2026, 11, 27, 7, 0, 0, tzinfo=UTC)
BASE = "/apis/wgpolicyk8s.io/v1alpha2"


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
