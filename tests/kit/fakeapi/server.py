"""FakeApiServer: lifecycle (async, or on a background thread), TLS, kubeconfig, test controls."""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import gc
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml
from aiohttp import web

from .app import ApiApp, Fault, RecordedRequest
from .controls import Controls
from .discovery import NAMESPACES, PRIORITY_CLASSES, ServedApi
from .disruption import DisruptionController
from .registry import Registry
from .store import Store
from .tls import Certificates, make_certificates

T = TypeVar("T")
_UNSET: Any = object()


class FakeApiServer(Controls):
    """An in-process Kubernetes API server speaking the real HTTP protocol.

    ``version`` ("1.31.0") decides which group-versions are served and which version-dependent
    rules apply. See the package docstring for the options.
    """

    def __init__(self, version: str = "1.31.0", *, host: str = "127.0.0.1", port: int = 0, tls: bool = False,
                 token: str | None = None, metrics: bool = False, pdb_controller: bool = False,
                 graceful_pod_deletion: bool = False, namespace_controller: bool = True,
                 bookmark_interval: float = 60.0, watch_timeout: float | None = None, history: int = 50_000,
                 page_size: int = 0, seed: bool = True, record_requests: bool = True,
                 pdb_deletion_timeout: float = 120.0, placement_policies: bool = False,
                 policy_reports: bool = False, crds: tuple[str, ...] = ()) -> None:
        parts = version.lstrip("v").split(".")
        if len(parts) < 2 or parts[0] != "1" or not parts[1].isdigit() or int(parts[1]) < 16:
            raise ValueError(f"unsupported Kubernetes version {version!r} (want 1.16 or newer)")
        self.version = version.lstrip("v")
        self.host = host
        self._port = port
        self.tls = tls
        self.token = token
        self.certificates: Certificates | None = make_certificates((host, "localhost")) if tls else None
        self.api = ServedApi(int(parts[1]), metrics=metrics, placement_policies=placement_policies,
                             policy_reports=policy_reports, crds=crds)
        self.store = Store(history)
        self.registry = Registry(self.store, self.api, graceful_pod_deletion=graceful_pod_deletion,
                                 namespace_controller=namespace_controller)
        self.controller = DisruptionController(self.registry, enabled=pdb_controller,
                                               deletion_timeout=pdb_deletion_timeout)
        self.app = ApiApp(self.store, self.registry, self.api, self.controller, self.version, token=token,
                          bookmark_interval=bookmark_interval, watch_timeout=watch_timeout, page_cap=page_size,
                          record=record_requests)
        self._web: web.Server | None = None
        self._listener: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._froze = False
        if seed:
            self._seed()

    # -- lifecycle --
    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self._port}"

    async def start(self) -> FakeApiServer:
        self._loop = asyncio.get_running_loop()
        self.store.bind_loop(self._loop)
        self._web = web.Server(self.app, handler_cancellation=True, access_log=None)
        sock = self._bind()
        self._port = sock.getsockname()[1]
        self.app.server_address = f"{self.host}:{self._port}"
        await self._serve(sock)
        return self

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._port))
        sock.listen(512)
        sock.setblocking(False)
        return sock

    async def _serve(self, sock: socket.socket) -> None:
        assert self._loop is not None and self._web is not None
        ssl_ctx = self.certificates.server_context() if self.certificates else None
        self._listener = await self._loop.create_server(self._web, sock=sock, ssl=ssl_ctx)

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.app.streams.drop_all()
        if self._web is not None:
            for handler in self._web.connections:
                if handler.transport is not None:
                    handler.transport.abort()
            await self._web.shutdown(1.0)
            self._web = None
        self.store.bind_loop(None)
        self._loop = None
        if self._froze:
            gc.unfreeze()
            self._froze = False

    async def __aenter__(self) -> FakeApiServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @classmethod
    @contextmanager
    def in_thread(cls, *args: Any, **kwargs: Any) -> Iterator[FakeApiServer]:
        """Run the server on a background thread with its own event loop (for synchronous clients)."""
        server = cls(*args, **kwargs)
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name="fakeapi", daemon=True)
        thread.start()
        ready.wait()
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        try:
            yield server
        finally:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
            loop.close()

    def _in_loop(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop thread and wait for it (directly when already there)."""
        loop = self._loop
        if loop is None or self.store.in_loop_thread():
            return fn()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

        loop.call_soon_threadsafe(call)
        return future.result(30)

    # -- connection controls --
    def drop_watches(self) -> int:
        """Cut every open watch connection abruptly (no final chunk): clients see a broken stream."""
        return self._in_loop(self.app.streams.drop_all)

    def go_away(self, mode: str = "refuse") -> None:
        """The API server goes away. ``refuse``: stop listening (new connections are refused) and
        cut every open connection. ``unavailable``: keep listening but answer 503 ServiceUnavailable
        to every request and cut the open watches."""
        if mode not in ("refuse", "unavailable"):
            raise ValueError("mode is 'refuse' or 'unavailable'")

        def act() -> None:
            self.app.streams.drop_all()
            if mode == "unavailable":
                self.app.unavailable = True
                return
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            if self._web is not None:
                for handler in self._web.connections:
                    if handler.transport is not None:
                        handler.transport.abort()

        self._in_loop(act)

    def come_back(self) -> None:
        """Serve again on the same port after ``go_away``."""
        self.app.unavailable = False
        if self._listener is not None or self._loop is None:
            return
        sock = self._bind()  # listening from now on; connections wait in the backlog
        if self.store.in_loop_thread():
            self._loop.create_task(self._serve(sock))
        else:
            asyncio.run_coroutine_threadsafe(self._serve(sock), self._loop).result(30)

    def accept_only(self, token: str | None) -> None:
        """From now on only ``token`` is a valid bearer token (None: any request is served): a
        credential that expired or was rotated is answered 401 Unauthorized, as the API server's
        authenticators answer a token they no longer accept."""
        self.token = token
        self.app.token = token

    def fail_next(self, method: str, path_regex: str, status: int, times: int = 1, retry_after: int | None = None,
                  message: str = "") -> None:
        """The next ``times`` requests matching method (or "*") and path answer a Status ``status``."""
        import re
        self.app.faults.append(Fault(method.upper(), re.compile(path_regex), status, times, retry_after, message))

    @property
    def requests(self) -> list[RecordedRequest]:
        return list(self.app.requests)

    def clear_requests(self) -> None:
        self.app.requests.clear()

    @property
    def page_size(self) -> int:
        return self.app.page_cap

    @page_size.setter
    def page_size(self, value: int) -> None:
        """Force paging: lists return at most this many items (real servers only page on ``limit``)."""
        self.app.page_cap = value

    @property
    def latency(self) -> float:
        return self.app.latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        """Answer every request ``seconds`` late, as a real API server's network round trip would
        (a watch pays it once, when it opens)."""
        self.app.latency = seconds

    # -- kubeconfig --
    def write_kubeconfig(self, path: str | Path, *, tls: bool | None = None, token: str | None = _UNSET,
                         namespace: str = "default") -> Path:
        """A kubeconfig for this server: with ``tls`` (default: as the server runs) the CA data, without
        it ``insecure-skip-tls-verify``; ``token`` overrides the server's token (None: no credentials)."""
        use_tls = self.tls if tls is None else tls
        if use_tls and not self.tls:
            raise ValueError("this server was not started with tls=True")
        cluster: dict[str, Any] = {"server": self.url}
        if use_tls and self.certificates is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.certificates.ca_pem).decode()
        elif self.tls:  # a TLS server, a kubeconfig that does not verify it
            cluster["insecure-skip-tls-verify"] = True
        user: dict[str, Any] = {}
        bearer = self.token if token is _UNSET else token
        if bearer:
            user["token"] = bearer
        config = {"apiVersion": "v1", "kind": "Config", "preferences": {},
                  "clusters": [{"name": "fakeapi", "cluster": cluster}],
                  "users": [{"name": "fakeapi", "user": user}],
                  "contexts": [{"name": "fakeapi", "context": {"cluster": "fakeapi", "user": "fakeapi",
                                                               "namespace": namespace}}],
                  "current-context": "fakeapi"}
        out = Path(path)
        out.write_text(yaml.safe_dump(config, sort_keys=False))
        return out

    # -- seeding --
    def _seed(self) -> None:
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.registry.create(NAMESPACES, None, {"metadata": {"name": name}}, api_version="v1", admission=False)
        if self.api.minor >= 14:
            for name, value in (("system-cluster-critical", 2000000000), ("system-node-critical", 2000001000)):
                body = {"metadata": {"name": name}, "value": value, "globalDefault": False,
                        "description": "Used for system critical pods that must not be moved from their current node."}
                if self.api.minor >= 19:
                    body["preemptionPolicy"] = "PreemptLowerPriority"
                self.registry.create(PRIORITY_CLASSES, None, body, api_version="scheduling.k8s.io/v1",
                                     admission=False)

    def load(self, objects: Iterable[dict[str, Any]]) -> int:
        """Store many objects at once (benchmarks): ``apply_object`` without per-object overhead."""
        enabled = gc.isenabled()
        gc.disable()  # a full collection over a heap of 100k+ dicts costs more than the load itself
        try:
            batch = msgspec.json.decode(msgspec.json.encode(list(objects)))
            with self.store.lock:
                for obj in batch:
                    self._apply(obj, create_namespace=True)
        finally:
            if enabled:
                gc.enable()
        # Keep the loaded heap out of every later full collection (the test's own decoding of
        # large lists would otherwise pay for walking it); undone by stop().
        gc.freeze()
        self._froze = True
        return len(batch)
