"""JSON log lines: one object per line, time/level/logger/msg first, then the fields."""
from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.runtime import logs

# A logger as a server names its own: the admission server's per-review lines.
REVIEW_LOGGER = "webhook.review"
FIELDS: dict[str, Any] = {"uid": "u-1", "kind": "apps/v1/Deployment", "applied": ["ssd"], "durationMs": 0.25}


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """``logs.setup`` on a string stream; the process's logging is restored afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    switches = {name: getattr(logging, name) for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")}
    out = io.StringIO()
    logs.setup("info", stream=out)
    try:
        yield out
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
        for name, value in switches.items():
            setattr(logging, name, value)


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_review_line_is_one_json_object_with_the_fields_after_the_standard_keys(stream: io.StringIO) -> None:
    logging.getLogger(REVIEW_LOGGER).info("review", extra={"fields": FIELDS})
    [line] = lines(stream)
    assert list(line) == ["time", "level", "logger", "msg", *FIELDS]
    assert (line["level"], line["logger"], line["msg"]) == ("info", REVIEW_LOGGER, "review")
    assert {k: line[k] for k in FIELDS} == FIELDS
    assert line["time"].endswith("Z") and "T" in line["time"]


def test_an_exception_is_logged_in_the_same_line(stream: io.StringIO) -> None:
    try:
        raise KeyError("boom")
    except KeyError:
        logging.getLogger("webhook.test").exception("failed")
    [line] = lines(stream)
    assert line["level"] == "error" and "KeyError: 'boom'" in line["error"]


def test_records_below_the_level_are_not_written(stream: io.StringIO) -> None:
    logging.getLogger("webhook.test").debug("quiet")
    assert lines(stream) == []


def test_aiohttps_access_log_is_quietened_since_the_review_line_says_more(stream: io.StringIO) -> None:
    logging.getLogger("aiohttp.access").info("GET /healthz")
    assert lines(stream) == []


def test_a_failing_stream_does_not_fail_the_caller(stream: io.StringIO, capsys: pytest.CaptureFixture[str]) -> None:
    stream.close()  # writing raises ValueError now, as a closed stderr would
    logging.getLogger(REVIEW_LOGGER).info("review", extra={"fields": FIELDS})  # no exception
    assert "Logging error" in capsys.readouterr().err  # reported the way logging reports it


@pytest.mark.parametrize(
    ("created", "stamp"),
    [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (1_795_000_000.007, "2026-11-18T11:06:40.007Z"),
        (1_795_000_000.999, "2026-11-18T11:06:40.999Z"),
        (1_795_000_001.5, "2026-11-18T11:06:41.500Z"),
    ],
)
def test_time_stamps_are_rfc3339_utc_with_milliseconds(created: float, stamp: str) -> None:
    assert logs._rfc3339(created) == stamp


@given(st.floats(min_value=-1e9, max_value=4e9, allow_nan=False))
def test_a_line_s_time_is_the_utc_second_and_its_milliseconds_whatever_second_was_formatted_before(created: float) -> None:
    logs._rfc3339(created + 1)  # another second first: the cached one must not leak
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    assert logs._rfc3339(created) == f"{seconds}.{int(created * 1000) % 1000:03d}Z"


def test_without_a_stream_lines_go_to_stderr_as_it_is_when_each_is_written(
        stream: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    # A test runner swaps sys.stderr per test and closes the old one: a handler bound to the
    # stream of set-up time would then fail on every later record.
    before = io.StringIO()
    monkeypatch.setattr("sys.stderr", before)
    logs.setup("info")
    before.close()
    after = io.StringIO()
    monkeypatch.setattr("sys.stderr", after)
    logging.getLogger(REVIEW_LOGGER).info("reviewed")
    assert [line["msg"] for line in lines(after)] == ["reviewed"]



@contextmanager
def alone(handler: logging.Handler | None = None) -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger whose records reach one handler only: ``handler``, else a JSON one writing to the
    stream yielded, as ``logs.setup`` makes. Entered in the test itself: the test runner hangs its
    capture handlers on the root logger and on any logger that does not propagate by then."""
    out = io.StringIO()
    if handler is None:
        handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("tests.logs.alone")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
        logger.filters.clear()


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """Every LogRecord made meanwhile."""
    made: list[logging.LogRecord] = []
    factory = logging.getLogRecordFactory()

    def counted(*args: Any, **kwargs: Any) -> logging.LogRecord:
        made.append(factory(*args, **kwargs))
        return made[-1]

    logging.setLogRecordFactory(counted)
    try:
        yield made
    finally:
        logging.setLogRecordFactory(factory)


def test_a_per_request_line_is_the_line_its_record_would_give_without_making_the_record(
        records: list[logging.LogRecord]) -> None:
    with alone() as (logger, out):
        logs.info(logger, "review", FIELDS)
        assert records == []
        logger.info("review", extra={"fields": FIELDS})
    direct, recorded = lines(out)
    assert list(direct) == list(recorded) == ["time", "level", "logger", "msg", *FIELDS]
    assert {**direct, "time": None} == {**recorded, "time": None}


def test_a_per_request_line_reaches_any_other_handler_as_a_record() -> None:
    captured: list[logging.LogRecord] = []
    capture = logging.Handler()
    capture.emit = captured.append  # type: ignore[method-assign]
    with alone() as (logger, out):
        logger.addHandler(capture)
        logs.info(logger, "review", FIELDS)
        logger.removeHandler(capture)
    assert [(r.getMessage(), r.fields) for r in captured] == [("review", FIELDS)]  # type: ignore[attr-defined]
    assert [line["msg"] for line in lines(out)] == ["review"]  # written once, from the record


def test_a_per_request_line_obeys_the_logger_s_level_the_handler_s_level_and_filters() -> None:
    with alone() as (logger, out):
        [handler] = logger.handlers
        handler.setLevel(logging.WARNING)
        logs.info(logger, "review", FIELDS)
        handler.setLevel(logging.NOTSET)
        logger.addFilter(lambda record: False)
        logs.info(logger, "review", FIELDS)
        logger.filters.clear()
        logger.setLevel(logging.WARNING)
        logs.info(logger, "review", FIELDS)
    assert lines(out) == []


def test_a_per_request_line_on_a_failing_stream_is_reported_and_does_not_fail_the_caller(
        capsys: pytest.CaptureFixture[str]) -> None:
    with alone() as (logger, out):
        out.close()
        logs.info(logger, "review", FIELDS)  # no exception
    assert "Logging error" in capsys.readouterr().err  # reported the way logging reports it


def test_a_per_request_line_to_a_json_file_handler_is_written_by_the_handler_itself(tmp_path: Path) -> None:
    # A file handler opens its file on the first record (delay) and may rotate it: only it knows how.
    handler = logging.FileHandler(tmp_path / "log", delay=True)
    with alone(handler) as (logger, _):
        logs.info(logger, "review", FIELDS)
    handler.close()
    [line] = [json.loads(text) for text in (tmp_path / "log").read_text().splitlines()]
    assert (line["msg"], line["uid"]) == ("review", FIELDS["uid"])
