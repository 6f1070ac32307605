"""Admission warnings are clipped under 120 characters, one line each, without repeats."""
from __future__ import annotations

from webhook.kube import warnings


def test_clip_keeps_short_text_and_folds_newlines() -> None:
    assert warnings.clip("one\n  two") == "one two"


def test_a_long_warning_is_clipped_to_the_limit_and_says_so() -> None:
    clipped = warnings.clip("y" * 500)
    assert len(clipped) == warnings.LIMIT < 120
    assert clipped.endswith("...")


def test_clip_all_drops_empty_warnings_and_repeats_keeping_the_first_position() -> None:
    assert warnings.clip_all(["b", " ", "a", "b", ""]) == ["b", "a"]
