"""Write the audit's reports to the API server: create what is missing, update what changed,
delete ours where nothing is left to report, and leave everything else alone.

A pass lists our reports (``PolicyReport``s across all namespaces and ``ClusterPolicyReport``s,
with the label selector ``app.kubernetes.io/managed-by=placement-webhook``, keeping those named
``placement-webhook``), then for each report wanted: POST it when absent, PUT it (conditional on
the listed resourceVersion) when its content other than the timestamps differs, nothing when it
does not; and DELETE each listed report whose namespace has no results any more.

An API server that refuses (the CRD is not installed: 404; RBAC: 403; the object is invalid or
too large: 422, 413; a write raced another: 409; unreachable) is never fatal: the refusal is
counted by reason (``on_error``), logged at WARNING once per distinct cause (DEBUG on repeats),
and the rest of the pass goes on; the next pass tries again. When a list is refused, that kind's
writes are skipped for the pass (they would be refused for the same cause).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from webhook.audit import reports
from webhook.audit.reports import Reports
from webhook.cluster.client import ApiError, Client, describe

__all__ = ["FIELD_MANAGER", "Written", "ReportWriter", "reason"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "placement-webhook"
BASE = f"/apis/{reports.GROUP}/{reports.VERSION}"
# The reason label of a refused request, by HTTP status; anything else is "error", and a request
# that got no answer (refused connection, timeout) "unreachable".
REASONS = {401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict", 413: "too_large",
           422: "invalid", 429: "throttled"}


def reason(exc: BaseException) -> str:
    """The metric label of a failed request."""
    if isinstance(exc, ApiError):
        return REASONS.get(exc.status, "error")
    return "unreachable"


@dataclass
class Written:
    """What one pass did; ``failed`` counts the requests refused."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0

    def fields(self) -> dict[str, int]:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged,
                "deleted": self.deleted, "failed": self.failed}


def _collection(namespace: str | None) -> str:
    if namespace is None:
        return f"{BASE}/{reports.CLUSTER_PLURAL}"
    return f"{BASE}/namespaces/{quote(namespace, safe='')}/{reports.PLURAL}"


def _object(namespace: str | None) -> str:
    return f"{_collection(namespace)}/{reports.NAME}"


class ReportWriter:
    """Writes ``Reports`` through ``client``; ``on_error(reason)`` counts each refused request."""

    def __init__(self, client: Client, *, on_error: Callable[[str], None] | None = None) -> None:
        self.client = client
        self._on_error = on_error
        self._causes: set[str] = set()  # refusals already logged at WARNING

    async def write(self, wanted: Reports) -> Written:
        """One pass over every report: see the module's docstring."""
        done = Written()
        namespaced = await self._list(f"{BASE}/{reports.PLURAL}", done)
        if namespaced is not None:
            for namespace in sorted(set(wanted.namespaced) | {ns for ns in namespaced if ns is not None}):
                await self._one(namespace, wanted.namespaced.get(namespace), namespaced.get(namespace), done)
        cluster = await self._list(f"{BASE}/{reports.CLUSTER_PLURAL}", done)
        if cluster is not None:
            await self._one(None, wanted.cluster, cluster.get(None), done)
        if not done.failed and self._causes:
            log.info("policy reports written again")
            self._causes.clear()
        return done

    async def _list(self, path: str, done: Written) -> dict[str | None, dict[str, Any]] | None:
        """Our reports at ``path``, by namespace (None: cluster-scoped); None when refused."""
        found: dict[str | None, dict[str, Any]] = {}
        try:
            async for page in self.client.list_pages(path, {"labelSelector": reports.SELECTOR}):
                for item in page.get("items") or ():
                    meta = item.get("metadata") or {}
                    if meta.get("name") == reports.NAME:
                        found[meta.get("namespace") or None] = item
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - counted and logged; the audit goes on
            self._refused(f"list {path}", exc, done)
            return None
        return found

    async def _one(self, namespace: str | None, wanted: dict[str, Any] | None, existing: Mapping[str, Any] | None,
                   done: Written) -> None:
        what = f"{reports.KIND} {namespace}/{reports.NAME}" if namespace else f"{reports.CLUSTER_KIND} {reports.NAME}"
        try:
            if wanted is None and existing is not None:
                await self._delete(namespace)
                done.deleted += 1
            elif wanted is not None and existing is None:
                await self.client.create(_collection(namespace), wanted, field_manager=FIELD_MANAGER)
                done.created += 1
            elif wanted is not None and existing is not None:
                if reports.content(existing) == reports.content(wanted):
                    done.unchanged += 1
                    return
                await self.client.replace(_object(namespace), _update(existing, wanted), field_manager=FIELD_MANAGER)
                done.updated += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - counted and logged; the other reports are still written
            self._refused(f"write {what}", exc, done)

    async def _delete(self, namespace: str | None) -> None:
        try:
            await self.client.request("DELETE", _object(namespace))
        except ApiError as exc:
            if exc.status != 404:  # already gone: what we wanted
                raise

    def _refused(self, what: str, exc: BaseException, done: Written) -> None:
        done.failed += 1
        label = reason(exc)
        if self._on_error is not None:
            self._on_error(label)
        text = f"{what}: {describe(exc, self.client.config.host)}"
        cause = f"{label}:{what.split(' ')[0]}:{text if label == 'error' else ''}"
        level = logging.DEBUG if cause in self._causes else logging.WARNING
        self._causes.add(cause)
        hint = " (is the wgpolicyk8s.io PolicyReport CRD installed?)" if label == "not_found" and "list" in what else ""
        log.log(level, f"policy report not written: {text}{hint}", extra={"fields": {"reason": label}})


def _update(existing: Mapping[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """``wanted`` as a PUT of ``existing``: its resourceVersion (the write is conditional), its
    other labels and annotations kept, and the results already reported keeping their timestamps."""
    meta = dict(existing.get("metadata") or {})
    body = reports.keep_timestamps(existing, dict(wanted))
    labels = {**(meta.get("labels") or {}), **wanted["metadata"].get("labels", {})}
    body["metadata"] = {**wanted["metadata"], "labels": labels, "resourceVersion": meta.get("resourceVersion")}
    if meta.get("annotations"):
        body["metadata"]["annotations"] = meta["annotations"]
    return body
