"""JSON log lines: one object per line, so log pipelines need no parsing rules.

Structured fields travel in ``extra={"fields": {...}}``; they are merged into the line.
The per-review line goes through ``info`` instead, which writes the same line without the
``logging`` machinery whenever ``setup``'s handler is the only place it would go.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Any, TextIO

from webhook.engine import codec

LEVELS = ("debug", "info", "warning", "error")

# The logger of per-review lines (SPEC 4.3).
REVIEW_LOGGER = "webhook.engine.placement.review"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: time, level, logger, msg, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        line = _line(record.created, record.levelname.lower(), record.name, record.getMessage(),
                     fields if isinstance(fields, dict) else None)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return codec.dumps_line(line)


def _line(created: float, level: str, logger: str, msg: str, fields: dict[str, Any] | None) -> dict[str, Any]:
    """A log line's object: time, level, logger, msg, then the fields (``format`` and ``info``)."""
    line: dict[str, Any] = {"time": _rfc3339(created), "level": level, "logger": logger, "msg": msg}
    if fields:
        line.update(fields)
    return line


class JsonHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The process's handler: JSON lines on a stream (``setup`` installs it)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.setFormatter(JsonFormatter())

    def write_line(self, line: str) -> None:
        """Write one formatted line as ``emit`` would, under the handler's lock."""
        try:
            with self.lock:  # type: ignore[union-attr]  # StreamHandler always has one
                self.stream.write(line + self.terminator)
                self.stream.flush()
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": line}))


# The handler ``setup`` installed, if any.
_handler: JsonHandler | None = None


def info(logger: logging.Logger, msg: str, fields: dict[str, Any]) -> None:
    """``logger.info(msg, extra={"fields": fields})``, for lines logged on every review.

    A record costs ~10 us to build, route and format; the review line is written once per
    review. When ``setup``'s handler is the one handler the record would reach, the same
    line is written to it directly; any other configuration (a test's capture handler, a
    filter, a second handler) gets the record through ``logging`` as usual.
    """
    if not logger.isEnabledFor(logging.INFO):
        return
    handler = _sole_handler(logger)
    if handler is None:
        logger.info(msg, extra={"fields": fields})
        return
    handler.write_line(codec.dumps_line(_line(time.time(), "info", logger.name, msg, fields)))


def _sole_handler(logger: logging.Logger) -> JsonHandler | None:
    """``setup``'s handler when an INFO record of ``logger`` would reach it and no other.

    As ``Logger.handle`` routes: the originating logger's ``disabled`` and filters apply,
    then every handler up the hierarchy until a logger that does not propagate.
    """
    handler = _handler
    if handler is None or logger.disabled or logger.filters or handler.filters or handler.level > logging.INFO:
        return None
    found = None
    node: logging.Logger | None = logger
    while node is not None:
        for each in node.handlers:
            if each is not handler or found is not None:
                return None
            found = handler
        if not node.propagate:
            break
        node = node.parent
    return found


# The formatted second of the last line: a busy server logs many lines per second.
_last_second: tuple[int, str] = (-1, "")
# ".000Z" to ".999Z": formatting the milliseconds costs more than the rest of the time stamp.
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))


def _rfc3339(created: float) -> str:
    global _last_second
    millis = int(created * 1000)
    second = millis // 1000
    last = _last_second
    if last[0] != second:
        last = _last_second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return last[1] + _MILLIS[millis % 1000]


def setup(level: str = "info", *, stream: TextIO | None = None) -> None:
    """Send every log record of the process to ``stream`` (stderr) as JSON lines."""
    global _handler
    handler = JsonHandler(stream if stream is not None else sys.stderr)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    _handler = handler
    # The lines carry none of the caller, thread or process attributes a LogRecord collects
    # by default; skip collecting them (the logging HOWTO's "Optimization" section).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None  # type: ignore[attr-defined]  # no findCaller frame walk
    # aiohttp's access log would duplicate the review line in another format.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
