"""Admission warnings as the API server passes them on.

The API server asks webhooks to keep each warning under 120 characters and may truncate
longer ones (``AdmissionResponse.warnings``, k8s.io/api/admission/v1); we clip ourselves, so
the end of a message is never cut off silently, and a clipped text says so with ``...``.
"""
from __future__ import annotations

from collections.abc import Iterable

__all__ = ["LIMIT", "clip", "clip_all"]

LIMIT = 119  # characters: "under 120"


def clip(text: str) -> str:
    """One line of at most ``LIMIT`` characters (white space folded)."""
    line = " ".join(text.split())
    return line if len(line) <= LIMIT else line[: LIMIT - 3].rstrip() + "..."


def clip_all(warnings: Iterable[str]) -> list[str]:
    """Clip every warning and drop empty ones and repeats, keeping first positions."""
    return list(dict.fromkeys(clip(w) for w in warnings if w and w.strip()))
