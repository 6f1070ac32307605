"""The HTTP side: routing, authentication, fault injection, the request log, and the handlers.

Paths outside any served group-version (``/foo``, ``/apis/metrics.k8s.io/...`` when metrics are
off) get Go's plain ``404 page not found``, as genericapiserver's director hands them to the
NotFoundHandler; unknown resources or subresources inside a served group-version get a Status 404
("the server could not find the requested resource") and a wrong method a Status 405 — go-restful's
service errors, written by serviceErrorHandler as NewGenericServerResponse (genericapiserver
handler.go). Wrong or missing bearer tokens are 401 Status "Unauthorized".
"""
from __future__ import annotations

import asyncio
import logging
import re
import traceback
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web

from . import bodies, discovery, eviction, listing, watch
from .discovery import PODS, GroupVersion, Resource, ServedApi, from_storage, to_storage
from .disruption import DisruptionController
from .errors import JSON, ApiError, generic, unauthorized, unsupported_media_type
from .managed import manager_or_user_agent
from .metricsapi import MetricsData
from .patch import SUPPORTED
from .registry import Registry
from .store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    raw_query: str
    content_type: str
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return msgspec.json.decode(self.body) if self.body else None


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    retry_after: int | None
    message: str


@dataclass
class Route:
    gv: GroupVersion
    res: Resource
    namespace: str | None
    name: str | None
    sub: str | None
    watch_path: bool


def plain_not_found() -> web.Response:
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain", charset="utf-8")


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=msgspec.json.encode(obj), status=status, headers=headers,
                        content_type="application/json")


def error_response(exc: ApiError) -> web.Response:
    return json_response(exc.status(), exc.code, exc.headers())


@dataclass
class ApiApp:
    store: Store
    registry: Registry
    api: ServedApi
    controller: DisruptionController
    git_version: str
    token: str | None = None
    bookmark_interval: float = 60.0
    watch_timeout: float | None = None
    server_address: str = ""
    requests: list[RecordedRequest] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    unavailable: bool = False
    page_cap: int = 0
    streams: watch.Streams = field(default_factory=watch.Streams)
    metrics: MetricsData = field(default_factory=MetricsData)
    record: bool = True
    latency: float = 0.0  # seconds added to every request: the network's round trip (benchmarks)

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        try:
            data = await request.read()
        except Exception:  # noqa: BLE001 - a broken upload is the client's problem
            return json_response(generic(400, "the request body could not be read").status(), 400)
        query = {k: v for k, v in request.query.items()}
        if self.record:
            self.requests.append(RecordedRequest(request.method, request.path, query, request.query_string,
                                                 request.headers.get("Content-Type", ""), data,
                                                 dict(request.headers)))
        try:
            if self.unavailable:
                raise generic(503)
            self._inject_fault(request.method, request.path)
            if self.token is not None and request.headers.get("Authorization") != f"Bearer {self.token}":
                raise unauthorized()
            return await self._dispatch(request, query, data)
        except ApiError as exc:
            return error_response(exc)
        except Exception:  # noqa: BLE001 - the fake never crashes on bad input
            log.error("fakeapi: unhandled error for %s %s\n%s", request.method, request.path, traceback.format_exc())
            return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": "Internal error occurred: fake api server bug", "reason": "InternalError",
                                  "code": 500}, 500)

    def _inject_fault(self, method: str, path: str) -> None:
        for fault in list(self.faults):
            if fault.method in (method, "*") and fault.pattern.search(path):
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                exc = generic(fault.status, fault.message, fault.retry_after or 0)
                if fault.message:
                    exc.message = fault.message
                raise exc

    # -- routing --
    async def _dispatch(self, request: web.BaseRequest, query: dict[str, str], data: bytes) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        method = request.method
        if parts in (["healthz"], ["livez"], ["readyz"]):
            return web.Response(text="ok", content_type="text/plain")
        if parts == ["version"]:
            return json_response(discovery.version_doc(self.git_version))
        if parts == ["api"]:
            return json_response(discovery.api_versions_doc(self.server_address))
        if parts == ["apis"]:
            return json_response(discovery.group_list_doc(self.api))
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in self.api.groups():
            return json_response(discovery.group_doc(self.api, parts[1]))
        if parts[:2] == ["api", "v1"]:
            gv, rest = self.api.find("", "v1"), parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            gv, rest = self.api.find(parts[1], parts[2]), parts[3:]
        else:
            return plain_not_found()
        if gv is None:
            return plain_not_found()
        if not rest:
            if method != "GET":
                raise generic(405)
            return json_response(discovery.resource_list_doc(self.api, gv))
        route = self._route(gv, rest)
        if route.gv.group == "metrics.k8s.io":
            return self._metrics(route, method, query)
        return await self._resource(request, route, query, data)

    def _route(self, gv: GroupVersion, rest: list[str]) -> Route:
        by_name = {r.plural: r for r in gv.resources}
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in by_name and by_name[rest[2]].namespaced:
            ns, res, tail = rest[1], by_name[rest[2]], rest[3:]
        elif rest and rest[0] in by_name:
            ns, res, tail = None, by_name[rest[0]], rest[1:]
            if res.namespaced and tail:
                raise generic(404)
        else:
            raise generic(404)
        if len(tail) > 2:
            raise generic(404)
        name = tail[0] if tail else None
        sub = tail[1] if len(tail) > 1 else None
        if sub is not None and not ((sub == "status" and res.status) or (sub == "eviction" and res is PODS)):
            raise generic(404)
        return Route(gv, res, ns, name, sub, watch_path)

    def _metrics(self, route: Route, method: str, query: dict[str, str]) -> web.StreamResponse:
        if method != "GET" or route.sub:
            raise generic(405)
        if route.name:
            return json_response(self.metrics.get(route.res.plural, route.namespace, route.name))
        return json_response(self.metrics.list(route.res.plural, route.namespace, query.get("labelSelector", "")))

    # -- handlers --
    async def _resource(self, request: web.BaseRequest, route: Route, query: dict[str, str],
                        data: bytes) -> web.StreamResponse:
        res, ns, name, sub, method = route.res, route.namespace, route.name, route.sub, request.method
        av = route.gv.api_version
        dry = request.query.getall("dryRun", [])
        ct = request.headers.get("Content-Type", "")
        if name is None:
            is_watch = route.watch_path or query.get("watch", "").lower() in ("true", "1")
            if method == "GET" and is_watch:
                wq = watch.parse_watch(res, ns, query, self.api.minor, self.watch_timeout)
                return await watch.serve(request, self.store, self.streams, res, av, wq, self.bookmark_interval)
            if method == "GET":
                q = listing.parse_query(res, ns, query)
                return web.Response(body=await listing.list_objects(self.store, res, av, q, self.page_cap),
                                    content_type="application/json")
            if method == "POST" and (ns is not None or not res.namespaced):
                body = bodies.decode_object(data, ct, res.kind)
                bodies.check_type(body, res.kind, [av], av, self._versions_of(res))
                manager = manager_or_user_agent(bodies.field_manager(query, "CreateOptions"),
                                                request.headers.get("User-Agent", ""))
                obj = self.registry.create(res, ns, to_storage(res, body), api_version=av,
                                           dry_run=bodies.dry_run(dry, "CreateOptions"), manager=manager)
                return self._object(res, av, obj, 201)
            if method == "DELETE" and (ns is not None or not res.namespaced):
                return self._delete_collection(res, av, ns, query, bodies.delete_options(data, ct, query, dry))
            raise generic(405)
        if route.watch_path:
            raise generic(404)
        if sub == "eviction":
            if method != "POST":
                raise generic(405)
            return self._evict(res, ns or "", name, data, ct, dry)
        if method == "GET":
            return self._object(res, av, self.registry.get(res, ns, name))
        if method == "PUT":
            body = bodies.decode_object(data, ct, res.kind)
            bodies.check_type(body, res.kind, [av], av, self._versions_of(res))
            manager = manager_or_user_agent(bodies.field_manager(query, "UpdateOptions"),
                                            request.headers.get("User-Agent", ""))
            obj, created = self.registry.update(res, ns, name, to_storage(res, body), api_version=av,
                                                subresource=sub or "", dry_run=bodies.dry_run(dry, "UpdateOptions"),
                                                manager=manager)
            return self._object(res, av, obj, 201 if created else 200)
        if method == "PATCH":
            patch_type = bodies.media_type(ct)
            if patch_type not in SUPPORTED:
                raise unsupported_media_type(SUPPORTED)
            manager = manager_or_user_agent(bodies.field_manager(query, "PatchOptions"),
                                            request.headers.get("User-Agent", ""))
            obj = self.registry.patch(res, ns, name, patch_type, data, api_version=av, subresource=sub or "",
                                      dry_run=bodies.dry_run(dry, "PatchOptions"), manager=manager)
            return self._object(res, av, obj)
        if method == "DELETE" and sub is None:
            options = bodies.delete_options(data, ct, query, dry)
            result, last, deleted = self.registry.delete(res, ns, name, options,
                                                         dry_run="All" in (options.get("dryRun") or []))
            code = 202 if not deleted and options.get("orphanDependents") is False else 200
            if result is not None:
                return self._object(res, av, result, code)
            return json_response(_deleted_status(res, last), code)
        raise generic(405)

    def _versions_of(self, res: Resource) -> list[str]:
        return [gv.api_version for gv in self.api.group_versions if any(r.kind == res.kind for r in gv.resources)]

    def _object(self, res: Resource, av: str, obj: JSON, status: int = 200) -> web.Response:
        return web.Response(body=watch.encode_object(res, av, obj), status=status, content_type="application/json")

    def _delete_collection(self, res: Resource, av: str, ns: str | None, query: dict[str, str],
                           options: JSON) -> web.Response:
        q = listing.parse_query(res, ns, query)
        dry = "All" in (options.get("dryRun") or [])
        with self.store.lock:
            table = self.store.table(res.storage_key)
            victims = [o for k in list(table.keys_from("", q.prefix))
                       if (o := table.objects[k]) is not None and q.matches(res, o)]
            items = []
            for obj in victims:
                meta = obj["metadata"]
                _, last, _ = self.registry.delete(res, meta.get("namespace"), meta["name"], options, dry_run=dry)
                items.append(from_storage(res, last))
            rv = self.store.rv
        return json_response({"kind": f"{res.kind}List", "apiVersion": av, "metadata": {"resourceVersion": str(rv)},
                              "items": items})

    def _evict(self, res: Resource, ns: str, name: str, data: bytes, ct: str, dry: list[str]) -> web.Response:
        body = bodies.decode_object(data, ct, "Eviction")
        accepted = self.api.eviction_versions
        bodies.check_type(body, "Eviction", accepted, accepted[0])
        meta = body.get("metadata")
        if isinstance(meta, dict) and meta.get("namespace") and meta["namespace"] != ns:
            raise ApiError(400, "BadRequest",
                           "the namespace of the provided object does not match the namespace sent on the request")
        bodies.dry_run(dry, "CreateOptions")
        status = eviction.evict(self.registry, ns, name, body, dry)
        return json_response(status, 201)


def _deleted_status(res: Resource, last: JSON) -> JSON:
    """registry Store.finalizeDelete for stores without ReturnDeletedObject."""
    meta = last.get("metadata") or {}
    details: JSON = {"name": meta.get("name", "")}
    if res.group:
        details["group"] = res.group
    details["kind"] = res.plural
    details["uid"] = meta.get("uid", "")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
