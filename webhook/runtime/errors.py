"""Error answers of every HTTP server of the project, in one JSON shape: ``{"error": "...",
"status": N}`` (docs/operations.md, "Endpoints").

Three sources of error answers, each covered here:

- the handlers' own (a bad review, a probe that fails): ``error_response``;
- aiohttp's router and body reader, which raise ``HTTPNotFound``, ``HTTPMethodNotAllowed``,
  ``HTTPRequestEntityTooLarge``, and anything a handler lets escape: ``json_errors``, a
  middleware every application installs (``install``);
- aiohttp's HTTP parser, which answers a request it cannot parse (a bad request line, headers
  over 8 KiB, a broken chunked body) before any application code runs, as plain text:
  ``answer_parse_errors_in_json``, for each runner the commands start.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from aiohttp import web, web_protocol
from aiohttp.http_exceptions import BadHttpMethod

from webhook import codec

__all__ = ["answer_parse_errors_in_json", "error_response", "install", "json_errors", "payload_problem"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, message: str, *, headers: Mapping[str, str] | None = None) -> web.Response:
    """The one error shape: ``{"error": message, "status": status}``."""
    return web.Response(status=status, body=codec.dumps({"error": message, "status": status}),
                        content_type="application/json", headers=headers)


def _http_message(request: web.BaseRequest, exc: web.HTTPException) -> str:
    """What went wrong, in words a caller can act on; aiohttp's own text says little."""
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return f"method {request.method} is not allowed on {request.path}; allowed: {allowed}"
    if isinstance(exc, web.HTTPNotFound):
        return f"no endpoint at {request.path}"
    text = exc.text or ""
    phrase = _phrase(exc.status)
    # aiohttp writes "<status>: <reason>" when no text was given: the reason alone is clearer.
    return phrase if text in ("", f"{exc.status}: {exc.reason}") else text


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return f"HTTP {status}"


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error aiohttp raises, and every exception a handler lets escape, as a JSON answer.

    A 5xx here is a bug of the server, never an answer to bad input: it is logged with its
    traceback. Redirects and other non-error ``HTTPException`` pass through unchanged.
    """
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        return error_response(exc.status, _http_message(request, exc), headers=headers)
    except web.RequestPayloadError as exc:  # the body could not be read: the client's fault
        response = error_response(400, f"body could not be read: {payload_problem(exc)}")
    except Exception as exc:  # CancelledError is no Exception: a cancelled request stays cancelled
        log.exception("request failed", extra={"fields": {"method": request.method, "path": request.path}})
        return error_response(500, f"internal error: {type(exc).__name__}")
    if request.content.exception() is not None:
        # The body broke off (it did not decode, or a chunk was malformed): the rest of it cannot be
        # skipped, so the connection cannot carry another request. Say so, or the client sends one.
        response.force_close()
    return response


def payload_problem(exc: web.RequestPayloadError) -> str:
    """What was wrong with a body aiohttp could not read (its own message is the cause's)."""
    cause = exc.__cause__
    text = getattr(cause, "message", None) or str(cause or exc)
    return str(text).strip() or type(cause or exc).__name__


def install(app: web.Application) -> web.Application:
    """``app`` with ``json_errors`` outermost, so that it sees what every other middleware does."""
    app.middlewares.insert(0, json_errors)
    return app


class _JsonErrorHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler, answering what its HTTP parser refuses in JSON."""

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            return super().handle_error(request, status, exc, message)  # a bug: aiohttp logs its traceback
        # As aiohttp's own: no second answer on a connection that has started one.
        if request.writer.output_size > 0:
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        text = _parse_message(status, exc, message)
        # One line, no traceback: a flood of junk must not flood the log. Bytes that are not HTTP
        # at all (a TLS handshake on the plain port, a scanner) only at debug, as aiohttp does.
        level = logging.DEBUG if isinstance(exc, BadHttpMethod) else logging.WARNING
        log.log(level, "bad HTTP request", extra={"fields": {"status": status, "error": text, "remote": request.remote}})
        answer = error_response(status, text)
        answer.force_close()
        return answer


def _parse_message(status: int, exc: BaseException | None, message: str | None) -> str:
    if status >= 500:
        return f"internal error: {type(exc).__name__}" if exc is not None else _phrase(status)
    detail = message or (str(exc) if exc is not None else "")
    return f"bad HTTP request: {detail}" if detail else _phrase(status)


class _JsonErrorServer(web.Server):
    # aiohttp builds each connection's handler here, with no hook to choose its class; the
    # body is aiohttp's own (web_server.Server.__call__) with the subclass in its place.
    def __call__(self) -> web_protocol.RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


def answer_parse_errors_in_json(runner: web.BaseRunner) -> None:
    """After ``runner.setup()``: connections opened from now on answer a request aiohttp's
    parser refuses in JSON too (aiohttp answers those in plain text before any middleware)."""
    server = runner.server
    if server is None:
        raise RuntimeError("set the runner up first")
    if type(server) is web.Server:
        server.__class__ = _JsonErrorServer
