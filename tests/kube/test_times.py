"""Kubernetes times: written in UTC as the API machinery writes them, read in any RFC 3339 form."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from webhook.scheduler import Cluster
from webhook.kube.times import format_micro_time, format_time, parse_time, timestamp


def test_times_read_in_any_rfc3339_form_and_are_written_in_utc() -> None:
    acquired = datetime(2006, 1, 2, 15, 4, 5, 123456, tzinfo=UTC)
    assert parse_time("2006-01-02T15:04:05Z") == datetime(2006, 1, 2, 15, 4, 5, tzinfo=UTC)
    assert parse_time("2006-01-02T17:04:05.123456789+02:00") == acquired
    five_hours_behind = datetime(2006, 1, 2, 10, 4, 5, tzinfo=timezone(timedelta(hours=-5)))
    assert format_micro_time(five_hours_behind) == "2006-01-02T15:04:05.000000Z"
    assert format_time(acquired) == "2006-01-02T15:04:05Z"
    assert timestamp("1970-01-01T00:01:00Z") == 60.0


@pytest.mark.parametrize("bad", ["", "yesterday", 12, None, "2006-02-30T00:00:00Z", "2006-01-02T15:04:05+24:00"])
def test_anything_else_reads_as_no_time(bad: object) -> None:
    assert parse_time(bad) is None and timestamp(bad) is None


def test_a_pod_with_a_garbled_start_time_still_joins_the_snapshot() -> None:
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1", "pods": "10"}}}
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n"}, "status": {"startTime": "sometime"}}
    (joined,) = Cluster.from_objects([node], [pod]).nodes["n"].pods
    assert joined.start_time is None
