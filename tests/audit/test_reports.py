"""Audit results as PolicyReports in the shape Kyverno writes: one per namespace plus the
cluster-wide one, named and labelled so they never collide with Kyverno's, results sorted, a
summary that counts them, and a comparison that ignores only the timestamps."""
from __future__ import annotations

import copy
import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from webhook.audit import reports
from webhook.audit.model import RULE_ROLLOUT, SCHEDULING_POLICY, Resource, Result, Status

NOW = datetime(2026, 11, 27, 7, 0, 0, tzinfo=UTC)
LATER = datetime(2026, 11, 27, 8, 0, 0, tzinfo=UTC)
CRDS = Path(__file__).resolve().parents[2] / "charts" / "placement-webhook" / "files" / "crds"


def web(namespace: str | None = "shop", name: str = "web", kind: str = "Deployment") -> Resource:
    return Resource("apps/v1", kind, name, namespace, uid=f"uid-{name}")


def result(resource: Resource, status: Status = Status.FAIL, *, policy: str = "spread-web",
           rule: str = "affinity", message: str = "would add podAntiAffinity") -> Result:
    return Result(resource, policy, rule, status, message)


def test_each_namespace_gets_one_policy_report_named_and_labelled_as_ours() -> None:
    built = reports.build([result(web("shop")), result(web("bank"), Status.PASS, message="")], now=NOW)
    assert sorted(built.namespaced) == ["bank", "shop"]
    assert built.cluster is None
    shop = built.namespaced["shop"]
    assert shop["apiVersion"] == "wgpolicyk8s.io/v1alpha2"
    assert shop["kind"] == "PolicyReport"
    assert shop["metadata"] == {"name": "placement-webhook", "namespace": "shop",
                                "labels": {"app.kubernetes.io/managed-by": "placement-webhook"}}


def test_a_result_carries_what_kyverno_writes() -> None:
    (item,) = reports.build([result(web())], now=NOW).namespaced["shop"]["results"]
    assert item == {
        "policy": "spread-web", "rule": "affinity", "result": "fail",
        "resources": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "shop",
                       "uid": "uid-web"}],
        "message": "would add podAntiAffinity", "source": "placement-webhook", "scored": True,
        "category": "Placement", "timestamp": {"seconds": int(NOW.timestamp()), "nanos": 0},
    }


def test_an_empty_message_is_left_out_rather_than_written_empty() -> None:
    (item,) = reports.build([result(web(), Status.PASS, message="")], now=NOW).namespaced["shop"]["results"]
    assert "message" not in item


def test_scheduling_checks_are_in_the_scheduling_category_and_properties_are_strings() -> None:
    checked = Result(web(), SCHEDULING_POLICY, RULE_ROLLOUT, Status.WARN, "the next rollout would stall",
                     properties={"replicas": "3"})
    (item,) = reports.build([checked], now=NOW).namespaced["shop"]["results"]
    assert (item["category"], item["properties"]) == ("Scheduling", {"replicas": "3"})


def test_results_about_cluster_scoped_objects_go_to_the_cluster_policy_report() -> None:
    built = reports.build([result(web(None, "gpu-1", "Node"))], now=NOW)
    assert built.namespaced == {}
    assert built.cluster is not None
    assert built.cluster["kind"] == "ClusterPolicyReport"
    assert built.cluster["metadata"] == {"name": "placement-webhook",
                                         "labels": {"app.kubernetes.io/managed-by": "placement-webhook"}}
    assert "namespace" not in built.cluster["results"][0]["resources"][0]


def test_the_summary_counts_every_value_including_the_ones_absent() -> None:
    rows = [result(web(name="a")), result(web(name="b")), result(web(name="c"), Status.PASS),
            result(web(name="d"), Status.SKIP)]
    assert reports.build(rows, now=NOW).namespaced["shop"]["summary"] == {
        "pass": 1, "fail": 2, "warn": 0, "skip": 1, "error": 0}


statuses = st.sampled_from(list(Status))
results = st.lists(st.builds(
    result, st.builds(web, st.sampled_from(["shop", "bank", None]), st.sampled_from(["a", "b", "c"])), statuses,
    policy=st.sampled_from(["p1", "p2", SCHEDULING_POLICY]), rule=st.sampled_from(["affinity", "tolerations"])),
    max_size=12)


@given(results, st.randoms())
def test_the_same_results_in_any_order_make_the_same_reports(rows: list[Result], rnd: Any) -> None:
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assert reports.build(rows, now=NOW) == reports.build(shuffled, now=NOW)


@given(results)
def test_content_ignores_the_timestamps_and_nothing_else(rows: list[Result]) -> None:
    for namespace, report in reports.build(rows, now=NOW).namespaced.items():
        later = reports.build(rows, now=LATER).namespaced[namespace]
        assert reports.content(report) == reports.content(later)
        assert report != later
        fewer = reports.build(rows[1:], now=NOW).namespaced.get(namespace)
        if fewer is not None and len(fewer["results"]) != len(report["results"]):
            assert reports.content(fewer) != reports.content(report)


def test_server_set_metadata_and_other_labels_do_not_count_as_a_change() -> None:
    report = reports.build([result(web())], now=NOW).namespaced["shop"]
    stored = copy.deepcopy(report)
    stored["metadata"].update(resourceVersion="42", uid="u", managedFields=[{}])
    stored["metadata"]["labels"]["team"] = "payments"
    assert reports.content(stored) == reports.content(report)
    stored["results"][0]["result"] = "pass"
    assert reports.content(stored) != reports.content(report)


def test_a_result_already_reported_keeps_its_timestamp_and_a_new_one_gets_now() -> None:
    before = reports.build([result(web(name="a"))], now=NOW).namespaced["shop"]
    after = reports.build([result(web(name="a")), result(web(name="b"))], now=LATER).namespaced["shop"]
    kept = reports.keep_timestamps(before, after)
    assert [item["timestamp"]["seconds"] for item in kept["results"]] == [int(NOW.timestamp()), int(LATER.timestamp())]


@functools.cache
def _schema(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / f"{plural}.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha2"
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _check(value: Any, schema: dict[str, Any], where: str) -> None:
    """The structural schema's rules our reports meet: types, enums, required and no field the
    schema does not know (the API server would prune it silently)."""
    kind = schema.get("type")
    python = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}
    if kind:
        assert isinstance(value, python[kind]), f"{where}: {value!r} is not {kind}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if kind == "object" and "properties" in schema:
        assert set(schema.get("required", ())) <= set(value), f"{where}: missing {schema.get('required')}"
        for key, child in value.items():
            assert key in schema["properties"], f"{where}.{key}: not in the schema"
            _check(child, schema["properties"][key], f"{where}.{key}")
    if kind == "object" and "additionalProperties" in schema:
        for key, child in value.items():
            _check(child, schema["additionalProperties"], f"{where}.{key}")
    if kind == "array":
        for i, child in enumerate(value):
            _check(child, schema["items"], f"{where}[{i}]")


@given(results)
def test_every_report_fits_the_policy_report_crds_schema(rows: list[Result]) -> None:
    built = reports.build(rows, now=NOW)
    for report in built.namespaced.values():
        _check({k: v for k, v in report.items() if k != "metadata"}, _schema("policyreports"), "PolicyReport")
    if built.cluster is not None:
        _check({k: v for k, v in built.cluster.items() if k != "metadata"}, _schema("clusterpolicyreports"),
               "ClusterPolicyReport")
