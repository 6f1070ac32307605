"""Audit results as ``wgpolicyk8s.io/v1alpha2`` report objects, in the shape Kyverno writes them.

One ``PolicyReport`` per namespace that has results, and one ``ClusterPolicyReport`` for the
results about cluster-scoped objects. Each result entry carries what Kyverno's carry (the
PolicyReportResult of the v1alpha2 API): ``policy``, ``rule``, ``result`` (pass, fail, warn, skip,
error), ``resources`` (one ObjectReference: apiVersion, kind, name, namespace, uid), ``message``,
``source`` (``placement-webhook``, which Policy Reporter filters and groups by), ``scored: true``,
``category`` and a ``timestamp`` of ``{seconds, nanos}``; ``summary`` counts the results by value.

Our reports are named ``placement-webhook`` (in each namespace, and cluster-wide) and labelled
``app.kubernetes.io/managed-by: placement-webhook``, so they never collide with Kyverno's
(``polr-ns-<namespace>``, ``clusterpolicyreport`` and, since Kyverno 1.10, one per resource UID,
all labelled managed-by kyverno) and our writer finds exactly its own.

Results are sorted (resource, then policy and rule), so the same verdicts always make the same
report; whether a report changed is decided on everything but the timestamps (``content``), and a
result unchanged since the report last written keeps its timestamp (``keep_timestamps``), so a
pass that finds nothing new writes nothing. Nothing here does I/O.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from webhook.audit.model import SCHEDULING_POLICY, SOURCE, Result, Status

__all__ = ["API_VERSION", "CLUSTER_KIND", "GROUP", "KIND", "LABELS", "NAME", "Reports", "build", "content",
           "keep_timestamps", "summary"]

GROUP = "wgpolicyk8s.io"
VERSION = "v1alpha2"
API_VERSION = f"{GROUP}/{VERSION}"
KIND, CLUSTER_KIND = "PolicyReport", "ClusterPolicyReport"
PLURAL, CLUSTER_PLURAL = "policyreports", "clusterpolicyreports"
NAME = "placement-webhook"  # every report we write, in each namespace and cluster-wide
MANAGED_BY = "app.kubernetes.io/managed-by"
LABELS = {MANAGED_BY: SOURCE}
SELECTOR = f"{MANAGED_BY}={SOURCE}"  # the label selector that lists our reports
# results[].category: Policy Reporter groups a source's results by it.
CATEGORY_PLACEMENT, CATEGORY_SCHEDULING = "Placement", "Scheduling"
_COUNTED = tuple(status.value for status in Status)


@dataclass(frozen=True)
class Reports:
    """The reports one audit makes: namespace -> its PolicyReport, and the ClusterPolicyReport
    (None when no result is about a cluster-scoped object)."""

    namespaced: dict[str, dict[str, Any]] = field(default_factory=dict)
    cluster: dict[str, Any] | None = None


def build(results: Iterable[Result], *, now: datetime) -> Reports:
    """The reports of ``results``, every result stamped ``now`` (``keep_timestamps`` restores the
    stamps of results an existing report already holds)."""
    stamp = {"seconds": int(now.timestamp()), "nanos": 0}  # whole seconds, as Kyverno stamps them
    by_namespace: dict[str | None, list[Result]] = {}
    for result in results:
        by_namespace.setdefault(result.resource.namespace or None, []).append(result)
    namespaced = {ns: _report(KIND, rows, stamp, namespace=ns) for ns, rows in by_namespace.items() if ns is not None}
    rows = by_namespace.get(None)
    return Reports(namespaced=dict(sorted(namespaced.items())),
                   cluster=_report(CLUSTER_KIND, rows, stamp) if rows else None)


def _report(kind: str, results: list[Result], stamp: Mapping[str, int], *,
            namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": NAME, "labels": dict(LABELS)}
    if namespace is not None:
        metadata["namespace"] = namespace
    entries = [entry(result, stamp) for result in sorted(results, key=_order)]
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata,
            "results": entries, "summary": summary(entries)}


def _order(result: Result) -> tuple[str, ...]:
    r = result.resource
    return (r.kind, r.namespace or "", r.name, r.api_version, r.uid, result.policy, result.rule,
            result.status.value, result.message)


def entry(result: Result, stamp: Mapping[str, int]) -> dict[str, Any]:
    """One ``results[]`` item. Empty optional fields are left out: some API servers refuse an empty
    string where the schema says string (kubernetes#99804), an empty map would be kept as ``{}``,
    and the next comparison must see exactly what was written."""
    item: dict[str, Any] = {"policy": result.policy}
    if result.rule:
        item["rule"] = result.rule
    item.update(result=result.status.value, resources=[result.resource.ref()])
    if result.message:
        item["message"] = result.message
    item.update(source=SOURCE, scored=True, timestamp=dict(stamp),
                category=CATEGORY_SCHEDULING if result.policy == SCHEDULING_POLICY else CATEGORY_PLACEMENT)
    if result.properties:
        item["properties"] = {str(k): str(v) for k, v in sorted(result.properties.items())}
    return item


def summary(entries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``summary``: how many results have each value, all five always present."""
    counted = Counter(str(e.get("result")) for e in entries)
    return {value: counted.get(value, 0) for value in _COUNTED}


def content(report: Mapping[str, Any] | None) -> Any:
    """What decides whether a report changed: its results without their timestamps, its summary
    and our labels. Server-set metadata (resourceVersion, uid, managedFields, ...) and labels
    others added do not count."""
    if report is None:
        return None
    labels = (report.get("metadata") or {}).get("labels") or {}
    results = [{k: v for k, v in item.items() if k != "timestamp"} for item in report.get("results") or ()]
    return {"labels": {k: labels.get(k) for k in LABELS}, "results": results, "summary": report.get("summary")}


def keep_timestamps(existing: Mapping[str, Any] | None, wanted: dict[str, Any]) -> dict[str, Any]:
    """``wanted`` with each result that ``existing`` already holds (the same apart from its
    timestamp) stamped as it was there: a result's timestamp says when it was first found."""
    if existing is None:
        return wanted
    stamps = {_key(item): item.get("timestamp") for item in existing.get("results") or ()}
    for item in wanted.get("results") or ():
        old = stamps.get(_key(item))
        if isinstance(old, Mapping):
            item["timestamp"] = dict(old)
    return wanted


def _key(item: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in item.items() if k != "timestamp"}, sort_keys=True)
