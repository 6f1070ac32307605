"""JSON log lines: one object per line, so log pipelines need no parsing rules.

Structured fields travel in ``extra={"fields": {...}}``; they are merged into the line after
``time``, ``level``, ``logger`` and ``msg``.
"""
from __future__ import annotations

import functools
import logging
import math
import sys
import time
from typing import Any, TextIO

from webhook import codec

LEVELS = ("debug", "info", "warning", "error")


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: time, level, logger, msg, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _rfc3339(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return codec.dumps_line(line)


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
