"""JSON log lines, and the per-review line's shortcut past the ``logging`` machinery."""
from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from webhook.server import logs

FIELDS: dict[str, Any] = {"uid": "u-1", "kind": "apps/v1/Deployment", "applied": ["ssd"], "durationMs": 0.25}


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """``logs.setup`` on a string stream; the process's logging is restored afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logs._handler)
    review = logging.getLogger(logs.REVIEW_LOGGER)
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
        logs._handler = saved[2]
        review.handlers.clear()
        review.filters.clear()
        review.propagate, review.disabled = True, False
        review.setLevel(logging.NOTSET)


def alone() -> logging.Logger:
    """The review logger, with ``setup``'s handler the only one left on the root (pytest
    attaches its capture handler for each test phase; the fixture restores the root)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler is not logs._handler:
            root.removeHandler(handler)
    return logging.getLogger(logs.REVIEW_LOGGER)


def no_records(*args: Any, **kwargs: Any) -> logging.LogRecord:
    raise AssertionError("the direct path builds no LogRecord")


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def formatted(fields: dict[str, Any]) -> dict[str, Any]:
    """What the formatter writes for ``logger.info("review", extra={"fields": fields})``."""
    record = logging.getLogger(logs.REVIEW_LOGGER).makeRecord(
        logs.REVIEW_LOGGER, logging.INFO, __file__, 1, "review", (), None, extra={"fields": fields}
    )
    return json.loads(logs.JsonFormatter().format(record))


def without_time(line: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in line.items() if k != "time"}


def test_the_direct_line_is_the_line_the_formatter_writes_for_the_same_record(
    stream: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    review = alone()
    expected = formatted(FIELDS)
    monkeypatch.setattr(logging.Logger, "makeRecord", no_records)
    logs.info(review, "review", FIELDS)
    monkeypatch.undo()
    [line] = lines(stream)
    assert without_time(line) == without_time(expected)
    assert list(line) == list(expected)  # the same keys in the same order
    assert line["time"].endswith("Z") and "T" in line["time"]


def test_a_second_handler_gets_the_record_through_logging_and_the_stream_still_gets_one_line(
    stream: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=logs.REVIEW_LOGGER):
        logs.info(logging.getLogger(logs.REVIEW_LOGGER), "review", FIELDS)
    assert [r.getMessage() for r in caplog.records if r.name == logs.REVIEW_LOGGER] == ["review"]
    assert [without_time(line) for line in lines(stream)] == [without_time(formatted(FIELDS))]


def test_a_filter_on_the_review_logger_is_honoured(stream: io.StringIO) -> None:
    review = alone()
    review.addFilter(lambda record: False)
    logs.info(review, "review", FIELDS)
    assert lines(stream) == []


def test_a_disabled_or_quieter_review_logger_writes_nothing(stream: io.StringIO) -> None:
    review = alone()
    review.setLevel(logging.WARNING)
    logs.info(review, "review", FIELDS)
    review.setLevel(logging.NOTSET)
    review.disabled = True
    logs.info(review, "review", FIELDS)
    assert lines(stream) == []


def test_a_review_logger_that_does_not_propagate_sends_its_lines_only_to_its_own_handler(stream: io.StringIO) -> None:
    review = alone()
    own = io.StringIO()
    handler = logging.StreamHandler(own)
    handler.setFormatter(logs.JsonFormatter())
    review.addHandler(handler)
    review.propagate = False
    logs.info(review, "review", FIELDS)
    assert lines(stream) == []
    assert [without_time(line) for line in lines(own)] == [without_time(formatted(FIELDS))]


def test_without_setup_the_line_goes_through_logging(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "_handler", None)
    with caplog.at_level(logging.INFO, logger=logs.REVIEW_LOGGER):
        logs.info(logging.getLogger(logs.REVIEW_LOGGER), "review", FIELDS)
    [record] = [r for r in caplog.records if r.name == logs.REVIEW_LOGGER]
    assert record.fields == FIELDS  # type: ignore[attr-defined]


def test_a_failing_stream_does_not_fail_the_caller(stream: io.StringIO, capsys: pytest.CaptureFixture[str]) -> None:
    review = alone()
    stream.close()  # writing raises ValueError now, as a closed stderr would
    logs.info(review, "review", FIELDS)  # no exception
    assert "Logging error" in capsys.readouterr().err  # reported the way logging reports it


@pytest.mark.parametrize(
    ("created", "stamp"),
    [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (1_795_000_000.007, "2026-11-18T11:06:40.007Z"),
        (1_795_000_000.999, "2026-11-18T11:06:40.999Z"),
        (1_795_000_001.5, "2026-11-18T11:06:41.500Z"),  # the next second, after a cached one
        (1_795_000_000.25, "2026-11-18T11:06:40.250Z"),  # and back: a line from another thread
    ],
)
def test_time_stamps_are_rfc3339_utc_with_milliseconds(created: float, stamp: str) -> None:
    assert logs._rfc3339(created) == stamp
