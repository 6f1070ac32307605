"""A stand-in for the API server's PolicyReport endpoints, as ``audit.writer.ReportWriter`` calls
them through ``cluster.client.Client``: list by label selector, create, conditional replace,
delete; each answer can be replaced by an ``ApiError`` (a missing CRD, RBAC, an invalid object)."""
from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping
from types import SimpleNamespace
from typing import Any

from webhook.cluster.client import ApiError

__all__ = ["ReportApi"]


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
