"""Kubernetes times on the wire: ``metav1.Time`` (RFC 3339, seconds) and ``metav1.MicroTime``
(RFC 3339 with microseconds), written in UTC as the API machinery writes them, and read in any
RFC 3339 form (a fraction of any length, ``Z`` or an offset). A value that is not a valid time
reads as None: a garbled timestamp on an object must not stop whoever reads it.
"""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

__all__ = ["format_micro_time", "format_time", "parse_time", "timestamp"]

_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:?\d{2})")


def format_time(value: datetime) -> str:
    """metav1.Time's JSON form: RFC 3339 in UTC, whole seconds."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(value: datetime) -> str:
    """metav1.MicroTime's JSON form: RFC 3339 in UTC with microseconds (``RFC3339Micro``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time (any fraction length, ``Z`` or an offset); None for anything else."""
    if not isinstance(value, str):
        return None
    found = _TIME.fullmatch(value.strip())
    if not found:
        return None
    year, month, day, hour, minute, second, fraction, zone = found.groups()
    try:
        micros = int((fraction or "0")[:6].ljust(6, "0"))
        if zone in ("Z", "z"):
            tz = UTC
        else:
            digits = zone[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            tz = timezone(-offset if zone[0] == "-" else offset)
        return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tzinfo=tz)
    except ValueError:  # 2024-02-30, 25:00, an offset of 24 hours or more
        return None


def timestamp(value: Any) -> float | None:
    """``parse_time`` as Unix time."""
    parsed = parse_time(value)
    return None if parsed is None else parsed.timestamp()
