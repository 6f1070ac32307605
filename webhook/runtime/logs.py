"""JSON log lines: one object per line, so log pipelines need no parsing rules.

Structured fields travel in ``extra={"fields": {...}}``; they are merged into the line after
``time``, ``level``, ``logger`` and ``msg``. A line written per request goes through ``info``,
which writes the same line more cheaply when nothing but this module's handler would see it.
"""
from __future__ import annotations

import functools
import logging
import math
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO, TypeGuard

from webhook import codec

LEVELS = ("debug", "info", "warning", "error")


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: time, level, logger, msg, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        line = _line(created=record.created, level=record.levelname.lower(), logger=record.name,
                     msg=record.getMessage(), fields=fields if isinstance(fields, dict) else {})
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return codec.dumps_line(line)


def _line(*, created: float, level: str, logger: str, msg: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    return {"time": _rfc3339(created), "level": level, "logger": logger, "msg": msg, **fields}


def _rfc3339(created: float) -> str:
    """``2026-11-23T20:12:10.123Z``: UTC, milliseconds."""
    return _second(math.floor(created)) + f".{int(created * 1000) % 1000:03d}Z"


@functools.lru_cache(maxsize=1)
def _second(seconds: int) -> str:
    # A busy server writes many lines a second: format each second once.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler writing to whatever ``sys.stderr`` is when a record is emitted, as the logging
    module's own last-resort handler does (``_StderrHandler``): a stream swapped after set-up (a
    test runner's capture, since closed) would otherwise turn every later record into an error."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr


def info(logger: logging.Logger, msg: str, fields: Mapping[str, Any]) -> None:
    """``logger.info(msg, extra={"fields": fields})``, for a line written per request.

    When the record would reach one handler only, the JSON handler ``setup`` installs, the same
    line is written to that handler's stream, under its lock, without making the record: in a
    busy server the logging module's LogRecord machinery costs more than the line itself.
    Anything else that would see the record (a test's capture handler, a filter, another
    handler or formatter) gets it the usual way.
    """
    if not logger.isEnabledFor(logging.INFO):
        return
    handler = _only_json_handler(logger, logging.INFO)
    if handler is None:
        logger.info(msg, extra={"fields": fields})
        return
    text = codec.dumps_line(_line(created=time.time(), level="info", logger=logger.name, msg=msg, fields=fields))
    handler.acquire()
    try:  # as ``StreamHandler.emit`` writes, flushes and reports a failure
        stream = handler.stream
        stream.write(text + handler.terminator)
        stream.flush()
    except Exception:
        handler.handleError(logger.makeRecord(logger.name, logging.INFO, "(unknown file)", 0, msg, (), None,
                                              extra={"fields": fields}))
    finally:
        handler.release()


def _only_json_handler(logger: logging.Logger, level: int) -> logging.StreamHandler[Any] | None:
    """The handler a record of ``logger`` at ``level`` would reach, when that is one handler
    writing this module's lines and no filter stands in the way (``Logger.handle`` applies the
    logger's own filters, ``Logger.callHandlers`` each handler's up the hierarchy)."""
    if logger.filters:
        return None
    found = None
    node: logging.Logger | None = logger
    while node is not None:
        for handler in node.handlers:
            if level < handler.level:
                continue
            if found is not None or not _writes_json(handler):
                return None
            found = handler
        node = node.parent if node.propagate else None
    return found


def _writes_json(handler: logging.Handler) -> TypeGuard[logging.StreamHandler[Any]]:
    """A handler as ``setup`` makes one: a plain stream one (not a file handler, which opens and
    rotates its file as it writes), formatting this module's lines, with no filter."""
    plain = type(handler) in (logging.StreamHandler, _Stderr)
    return plain and type(handler.formatter) is JsonFormatter and not handler.filters


def setup(level: str = "info", *, stream: TextIO | None = None) -> None:
    """Send every log record of the process to ``stream`` (stderr) as JSON lines."""
    handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The line carries none of the caller's file and line, thread or process: the logging
    # module's documented switches stop it from looking them up for every record.
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # aiohttp's access log would duplicate a server's own request lines (the review line) in another format.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
