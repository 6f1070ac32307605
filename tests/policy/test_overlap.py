"""The conservative overlap predicates behind lint's conflict and never-match findings."""
from __future__ import annotations

import pytest

from webhook.policy import overlap


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("prod", "prod", True),
        ("prod", "staging", False),
        ("team-*", "team-a", True),
        ("team-*", "dev", False),
        ("team-a-*", "team-*", True),
        ("team-a-*", "team-b-*", False),
        ("*-prod", "*-dev", False),
        ("*-prod", "eu-*", True),
        ("app-?", "app-1", True),
        ("app-[ab]", "app-c", False),
        ("*", "anything", True),
    ],
)
def test_globs_overlap_when_some_name_could_match_both(a: str, b: str, expected: bool) -> None:
    assert overlap.globs_overlap(a, b) is expected
    assert overlap.globs_overlap(b, a) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({"matchLabels": {"t": "web"}}, {"matchLabels": {"t": "web"}}, True),
        ({"matchLabels": {"t": "web"}}, {"matchLabels": {"t": "db"}}, False),
        ({"matchLabels": {"t": "web"}}, {"matchLabels": {"u": "db"}}, True),
        ({"matchLabels": {"t": "web"}}, {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["web"]}]},
         False),
        ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]},
         {"matchExpressions": [{"key": "t", "operator": "In", "values": ["b", "c"]}]}, True),
        ({"matchExpressions": [{"key": "t", "operator": "Exists"}]},
         {"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]},
         {"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, True),
        (None, {"matchLabels": {"t": "x"}}, True),
    ],
)
def test_selectors_are_compatible_unless_they_contradict(a: dict | None, b: dict, expected: bool) -> None:
    assert overlap.selectors_compatible(a, b) is expected


@pytest.mark.parametrize(
    ("globs", "excluded", "left"),
    [
        (None, ["kube-system"], ["*"]),
        (None, ["*"], []),
        (["prod", "team-*"], ["prod"], ["team-*"]),
        (["team-*"], ["team-*"], []),
        (["team-*"], ["team-a"], ["team-*"]),
    ],
)
def test_uncovered_globs_are_those_an_exclude_does_not_fully_cover(
    globs: list[str] | None, excluded: list[str], left: list[str]
) -> None:
    assert overlap.uncovered_globs(globs, excluded) == left
