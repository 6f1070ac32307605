"""A small async Kubernetes API client on ``aiohttp``: GET, paginated LIST, WATCH, /version and
the writes of the cluster-side commands (create, replace, patch with a field manager).

Speaking the API's JSON wire format as client-go's REST client
does: Status bodies become ``ApiError`` (``errors.FromObject``), 410 / reason Expired becomes
``Expired`` (``apierrors.IsResourceExpired || IsGone``, the reflector's ``isExpiredError``),
LIST pages follow ``metadata.continue`` (``tools/pager``), WATCH is read as newline-delimited
JSON events (``watch.StreamWatcher`` over the JSON framer).

A failure is said in one line naming the API server and the cause in kubectl's words
(``describe``: "cannot reach the API server at https://10.0.0.1:6443: connection refused"), never
aiohttp's ``ssl:<ssl.SSLContext object at 0x...>``. ``final`` tells a one-shot command which
causes waiting cannot cure (refused, no such host, TLS verification, credentials, 401, 403), so
that it stops at once, as kubectl does. A long-running client keeps retrying; it logs each
distinct cause once, not every retry, and says when the API server answers again.
"""
from __future__ import annotations

import logging
import re
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp

from webhook import codec

from .config import ClusterConfig
from .credentials import CredentialError

log = logging.getLogger(__name__)

USER_AGENT = "placement-webhook/cluster"
PAGE_SIZE = 500  # tools/pager defaultPageSize
MAX_LINE = 64 * 1024 * 1024  # one watch event; a Node with many images is a few hundred KiB


def _manager(field_manager: str) -> dict[str, str]:
    return {"fieldManager": field_manager} if field_manager else {}


class ApiError(Exception):
    """A non-2xx answer (or a watch ERROR event) with the Status's reason and message."""

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class Expired(ApiError):
    """410 Gone / reason Expired: the resourceVersion or continue token is too old; relist."""


def error_from_status(status: int, body: Any, fallback: str = "") -> ApiError:
    """apierrors.FromObject: a Status body to an error (Expired for 410 or reason Expired)."""
    if isinstance(body, Mapping) and body.get("kind") == "Status":
        code = int(body.get("code") or status)
        reason, message = str(body.get("reason") or ""), str(body.get("message") or "")
    else:
        code, reason, message = status, "", fallback
    cls = Expired if code == 410 or reason in ("Expired", "Gone") else ApiError
    return cls(code, reason, message)


class Client:
    """API requests for one ``ClusterConfig``; owns its ``aiohttp.ClientSession`` unless given one.

    ``request_timeout`` bounds every non-watch request; watches are bounded by the server's
    ``timeoutSeconds`` plus ``watch_grace`` of silence, so a connection that dies without a
    reset (a partition) cannot leave an informer waiting forever. ``log_failures``: log each
    distinct failure of the API server as a whole once (a one-shot command that reports the
    failure itself passes False).
    """

    def __init__(self, config: ClusterConfig, *, session: aiohttp.ClientSession | None = None,
                 request_timeout: float = 30.0, watch_grace: float = 30.0, log_failures: bool = True) -> None:
        self.config = config
        self.log_failures = log_failures
        self.request_timeout = request_timeout
        self.watch_grace = watch_grace
        self._session = session
        self._own_session = session is None
        self.last_failure = ""  # the cause last logged; "" while the API server answers

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.config.ssl_context if self.config.ssl_context else False)
            self._session = aiohttp.ClientSession(connector=connector)
            self._own_session = True
        return self._session

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
        self._session = None

    async def _headers(self) -> tuple[dict[str, str], str | None]:
        """The request headers and the token they carry (renewed first when it expired)."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        source = self.config.credentials
        try:
            token = await source.current() if source is not None else self.config.token()
        except CredentialError as exc:
            self._failed(exc)
            raise
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers, token

    async def _answered(self, status: int, token: str | None) -> None:
        """Note an HTTP answer: a 401 renews the credentials it was sent with (client-go's exec
        roundTripper), and logs once; any other answer means the API server is reachable."""
        if status == 401:
            if self.config.credentials is not None:
                await self.config.credentials.rejected(token)
            self._failed(ApiError(401, "Unauthorized"))
        elif self.last_failure:
            log.log(logging.INFO if self.log_failures else logging.DEBUG, "reached the API server at %s again",
                    self.config.host)
            self.last_failure = ""

    def _failed(self, exc: BaseException) -> None:
        """Log a server-wide failure once per distinct cause (not every retry)."""
        line = describe(exc, self.config.host)
        if line != self.last_failure:
            self.last_failure = line
            log.log(logging.WARNING if self.log_failures else logging.DEBUG, line)

    def _ssl(self) -> ssl.SSLContext | bool:
        return self.config.ssl_context if self.config.ssl_context is not None else False

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET ``path`` and decode the JSON object; non-2xx raises ``ApiError``."""
        return await self.request("GET", path, params=params)

    async def request(self, method: str, path: str, body: Any = None, *, params: Mapping[str, str] | None = None,
                      content_type: str = "application/json") -> dict[str, Any]:
        """One request with an optional JSON body; the decoded object answered, or ``ApiError``
        (a Status body's code, reason and message: 409 Conflict, 429 TooManyRequests, ...)."""
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        headers, token = await self._headers()
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = codec.dumps(body)
        try:
            async with self.session.request(method, self.config.host + path, params=dict(params or {}), data=data,
                                            headers=headers, timeout=timeout, ssl=self._ssl(),
                                            server_hostname=self.config.server_hostname) as resp:
                raw = await resp.read()
        except (aiohttp.ClientConnectionError, TimeoutError, OSError) as exc:
            self._failed(exc)
            raise
        await self._answered(resp.status, token)
        if resp.status >= 300:
            raise _error(resp.status, raw)
        value = codec.loads(raw) if raw else {}
        if not isinstance(value, dict):
            raise ApiError(resp.status, "", f"{method} {path}: expected a JSON object")
        return value

    async def create(self, path: str, body: Mapping[str, Any], *, field_manager: str = "") -> dict[str, Any]:
        """POST to a collection (``/apis/coordination.k8s.io/v1/namespaces/ns/leases``)."""
        return await self.request("POST", path, body, params=_manager(field_manager))

    async def replace(self, path: str, body: Mapping[str, Any], *, field_manager: str = "") -> dict[str, Any]:
        """PUT an object; its ``metadata.resourceVersion`` makes it conditional (409 if stale)."""
        return await self.request("PUT", path, body, params=_manager(field_manager))

    async def patch(self, path: str, body: Any, *, kind: str = "merge", field_manager: str = "") -> dict[str, Any]:
        """PATCH an object: ``merge`` (RFC 7386), ``strategic``, ``json`` (RFC 6902) or ``apply``
        (server-side apply, which needs a field manager and is forced: the caller owns its fields)."""
        content = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json",
                   "json": "application/json-patch+json", "apply": "application/apply-patch+yaml"}[kind]
        params = _manager(field_manager)
        if kind == "apply":
            params["force"] = "true"
        return await self.request("PATCH", path, body, params=params, content_type=content)

    async def list_pages(self, path: str, params: Mapping[str, str] | None = None,
                         limit: int = PAGE_SIZE) -> AsyncIterator[dict[str, Any]]:
        """LIST in pages of ``limit``, following ``metadata.continue`` (client-go tools/pager).

        An expired continue token is 410 Expired and raises ``Expired``: the caller restarts the
        list from scratch (the pager's full-list fallback would not be a consistent snapshot).
        """
        query = dict(params or {})
        if limit:
            query["limit"] = str(limit)
        while True:
            page = await self.get(path, query)
            yield page
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return
            # The apiserver forbids resourceVersion together with continue (ValidateListOptions).
            query = {k: v for k, v in query.items() if k not in ("resourceVersion", "resourceVersionMatch")}
            query["continue"] = token

    async def watch(self, path: str, resource_version: str, *, allow_bookmarks: bool = True,
                    timeout_seconds: int = 300, on_open: Callable[[], None] | None = None
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """WATCH from ``resource_version``: ``(type, object)`` per event until the stream ends.

        ERROR events become exceptions (``Expired`` for 410), as the reflector's watchHandler
        turns them into errors with ``apierrors.FromObject``. A stream cut mid-event raises
        ``aiohttp.ClientPayloadError`` (or a connection error) to the caller.
        """
        params = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": str(timeout_seconds)}
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        timeout = aiohttp.ClientTimeout(total=None, connect=self.request_timeout,
                                        sock_read=timeout_seconds + self.watch_grace)
        headers, token = await self._headers()
        try:
            opened = await self.session.get(self.config.host + path, params=params, headers=headers,
                                            timeout=timeout, ssl=self._ssl(),
                                            server_hostname=self.config.server_hostname)
        except (aiohttp.ClientConnectionError, TimeoutError, OSError) as exc:
            self._failed(exc)
            raise
        async with opened as resp:
            await self._answered(resp.status, token)
            if resp.status >= 300:
                raise _error(resp.status, await resp.read())
            if on_open is not None:
                on_open()  # the API server accepted the watch: from here on it sends every change
            buffer = bytearray()
            # Split lines ourselves: StreamReader.readline caps a line at its buffer limit, and a
            # Node or Pod event can be larger than that.
            async for chunk in resp.content.iter_any():
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[:end + 1]
                    if line.strip():
                        yield _event(line)
                if len(buffer) > MAX_LINE:
                    raise ApiError(500, "InternalError", f"watch {path}: an event exceeds {MAX_LINE} bytes")
            if buffer.strip():
                yield _event(bytes(buffer))

    async def version(self) -> tuple[int, int]:
        """GET /version as (major, minor); minors like "31+" (managed clusters) are read as 31."""
        doc = await self.get("/version")
        major, minor = _leading_int(doc.get("major")), _leading_int(doc.get("minor"))
        if major is None or minor is None:
            # Fall back to gitVersion ("v1.31.2-eks-...") as version.ParseGeneric would.
            found = re.match(r"v?(\d+)\.(\d+)", str(doc.get("gitVersion") or ""))
            if not found:
                raise ApiError(200, "", f"/version: cannot read the version from {doc!r}")
            return int(found.group(1)), int(found.group(2))
        return major, minor


# ---- failures in one line ----

def transport_cause(exc: BaseException) -> str | None:
    """What went wrong before any HTTP answer, in kubectl's words (``connection refused``, ``no
    such host``); None when ``exc`` is not such a failure."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        error = exc.certificate_error
        return f"TLS certificate verification failed: {getattr(error, 'verify_message', '') or error}"
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        return f"TLS handshake failed: {getattr(exc.os_error, 'reason', '') or exc.os_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        if isinstance(exc, aiohttp.ClientConnectorDNSError) or isinstance(os_error, socket.gaierror):
            return f"no such host {exc.host} ({os_error.strerror or os_error})"
        if isinstance(os_error, ConnectionRefusedError):
            return "connection refused"
        return _os_words(os_error)
    if isinstance(exc, (aiohttp.ServerTimeoutError, TimeoutError)):
        return "no answer in time (timeout)"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection without an answer"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "the answer was cut off"
    if isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
        return _os_words(exc) if isinstance(exc, OSError) else (str(exc) or type(exc).__name__)
    return None


def _os_words(error: OSError) -> str:
    text = error.strerror or str(error) or type(error).__name__
    return text[:1].lower() + text[1:]


def describe(exc: BaseException, host: str) -> str:
    """``exc`` as one line naming the API server and the cause."""
    cause = transport_cause(exc)
    if cause is not None:
        return f"cannot reach the API server at {host}: {cause}"
    if isinstance(exc, CredentialError):
        return f"cannot get credentials for the API server at {host}: {_one_line(str(exc))}"
    if isinstance(exc, ApiError):
        if exc.status == 401:  # kubectl: "You must be logged in to the server (Unauthorized)"
            return (f"the API server at {host} did not accept the credentials (401 Unauthorized): "
                    "you must be logged in to the server")
        said = f"{exc.status} {exc.reason}".strip()
        return f"the API server at {host} answered {said}" + (f": {_one_line(exc.message)}" if exc.message else "")
    return f"the API server at {host}: {_one_line(f'{type(exc).__name__}: {exc}')}"


def final(exc: BaseException | None) -> bool:
    """Whether waiting cannot cure ``exc`` within one command's run: the address refuses or does
    not exist, TLS verification fails, no credentials, or the API server says 401, 403 or 404.
    Timeouts, resets, 429 and 5xx answers may pass and are retried."""
    if isinstance(exc, ApiError):
        return exc.status in (401, 403, 404)
    if isinstance(exc, (CredentialError, aiohttp.ClientConnectorCertificateError, aiohttp.ClientConnectorSSLError,
                        aiohttp.ClientConnectorDNSError)):
        return True
    return isinstance(exc, aiohttp.ClientConnectorError) and isinstance(
        exc.os_error, (ConnectionRefusedError, socket.gaierror))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _leading_int(value: Any) -> int | None:
    found = re.match(r"\d+", str(value or ""))
    return int(found.group(0)) if found else None


def _error(status: int, body: bytes) -> ApiError:
    try:
        decoded = codec.loads(body) if body else None
    except ValueError:
        decoded = None
    text = body.decode("utf-8", "replace").strip()[:200]
    return error_from_status(status, decoded, text)


def _event(line: bytes) -> tuple[str, dict[str, Any]]:
    event = codec.loads(line)
    if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
        raise ApiError(500, "InternalError", f"malformed watch event: {line[:200]!r}")
    kind, obj = str(event.get("type") or ""), event["object"]
    if kind == "ERROR":
        raise error_from_status(int(obj.get("code") or 500), obj)
    return kind, obj


__all__ = ["ApiError", "Client", "Expired", "describe", "error_from_status", "final", "transport_cause"]
