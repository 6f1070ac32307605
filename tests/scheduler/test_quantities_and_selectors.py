"""The pod helpers under the plugins: quantities as ``resource.ParseQuantity`` stores them,
``resource.PodRequests`` (init containers, sidecars, pod-level requests, overhead), the
non-zero defaults, label selectors (pinned to ``webhook.kube.selectors``) and node selector
requirements with ``strconv.ParseInt`` semantics for Gt/Lt."""
from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.scheduler.builders import pod
from webhook.kube import selectors
from webhook.scheduler.labels import NodeRequirement, compile_selector, parse_int64
from webhook.scheduler.resources import (
    non_zero_requests,
    pod_requests,
    quantity,
    scorer_requests,
)


@pytest.mark.parametrize(("text", "want"), [
    pytest.param("500m", Fraction(1, 2), id="milli suffix"),
    pytest.param("1Gi", Fraction(2**30), id="binary suffix"),
    pytest.param("1e3", Fraction(1000), id="decimal exponent"),
    pytest.param("0.5", Fraction(1, 2), id="decimal fraction"),
    pytest.param("1.5Mi", Fraction(3 * 2**19), id="fraction of a binary suffix"),
    pytest.param("100M", Fraction(10**8), id="decimal suffix"),
    pytest.param("1e-10", Fraction(1, 10**9), id="below a nano rounds up to one nano"),
    pytest.param("0.0000000015", Fraction(2, 10**9), id="rounding up happens at the nano scale"),
    pytest.param("-1e-10", Fraction(-1, 10**9), id="negative amounts round away from zero"),
    pytest.param("1e30", Fraction(2**63 - 1), id="huge amounts are capped at MaxInt64"),
    pytest.param(2, Fraction(2), id="a YAML integer is a quantity"),
])
def test_quantities_parse_as_the_api_server_stores_them(text: Any, want: Fraction) -> None:
    assert quantity(text) == want


def _spec(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = pod(**spec)["spec"]
    return body


REQUESTS: list[Any] = [
    pytest.param(_spec(req=[{"cpu": "1"}, {"cpu": "500m"}]), {"cpu": Fraction(3, 2)}, id="containers add up"),
    pytest.param(_spec(req={"cpu": "1"}, init=[{"cpu": "2"}, {"cpu": "3"}]), {"cpu": Fraction(3)},
                 id="init containers count as their maximum, not their sum"),
    pytest.param(_spec(req={"cpu": "1"}, sidecars=[{"cpu": "1"}]), {"cpu": Fraction(2)},
                 id="a sidecar adds to the app containers"),
    pytest.param(_spec(req={"cpu": "1"}, sidecars=[{"cpu": "1"}], init=[{"cpu": "2"}]), {"cpu": Fraction(3)},
                 id="an init container after a sidecar runs beside it"),
    pytest.param(_spec(req={"cpu": "10"}, sidecars=[{"cpu": "1"}], init=[{"cpu": "2"}]), {"cpu": Fraction(11)},
                 id="the app containers plus sidecars can outweigh the init phase"),
    pytest.param({"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "5"}}},
                                     {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
                  "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                 {"cpu": Fraction(5)}, id="an init container before a sidecar does not run beside it"),
    pytest.param(_spec(req={"memory": "1Gi"}, overhead={"memory": "100Mi"}), {"memory": Fraction(2**30 + 100 * 2**20)},
                 id="overhead is added"),
    pytest.param(_spec(req={"cpu": "1", "memory": "1Gi"}, resources={"requests": {"cpu": "3"}}),
                 {"cpu": Fraction(3), "memory": Fraction(2**30)}, id="pod-level requests override what they name"),
    pytest.param(_spec(req={"nvidia.com/gpu": "1"}, init=[{"nvidia.com/gpu": "2"}]), {"nvidia.com/gpu": Fraction(2)},
                 id="extended resources follow the same rules"),
]


@pytest.mark.parametrize(("spec", "want"), REQUESTS)
def test_pod_requests_follow_resource_pod_requests(spec: dict[str, Any], want: dict[str, Fraction]) -> None:
    assert pod_requests(spec) == want


def test_containers_without_requests_count_as_100m_and_200mi_when_scoring() -> None:
    spec = _spec(req=[{}, {"cpu": "0"}, {"memory": "1Gi"}])
    # getNonMissingContainerRequests: only a missing request is defaulted; an explicit 0 stays 0.
    assert non_zero_requests(spec, pod_requests(spec)) == (200, 400 * 2**20 + 2**30)
    assert scorer_requests(spec, ("cpu", "memory"), non_zero=True) == (200, 400 * 2**20 + 2**30)
    assert scorer_requests(spec, ("cpu", "memory"), non_zero=False) == (0, 2**30)


def test_a_milli_value_rounds_up_like_quantity_milli_value() -> None:
    assert scorer_requests(_spec(req={"cpu": "0.0001"}), ("cpu",), non_zero=False) == (1,)


@pytest.mark.parametrize(("text", "want"), [
    ("7", 7), ("-7", -7), ("+7", 7), ("007", 7), (" 7", None), ("7 ", None), ("1_0", None), ("0x10", None),
    ("", None), ("9223372036854775807", 2**63 - 1), ("9223372036854775808", None), ("-9223372036854775808", -(2**63)),
    ("1.0", None), ("١", None),
])
def test_integers_parse_like_strconv_parse_int(text: str, want: int | None) -> None:
    assert parse_int64(text) == want


@pytest.mark.parametrize(("op", "bound", "value", "want"), [
    ("Gt", "5", "6", True), ("Gt", "5", "5", False), ("Lt", "5", "4", True), ("Lt", "5", "5", False),
    ("Gt", "5", None, False), ("Gt", "5", "six", False), ("Gt", "5", " 6", False), ("Gt", "0204", "0206", True),
    ("Lt", "5", "-9223372036854775809", False),
])
def test_gt_and_lt_need_both_sides_to_be_int64(op: str, bound: str, value: str | None, want: bool) -> None:
    requirement = NodeRequirement({"key": "k", "operator": op, "values": [bound]}, 0)
    assert requirement.error is None
    assert requirement.matches(value) is want


@pytest.mark.parametrize("values", [["x"], ["1", "2"], [], ["-5"]])
def test_a_gt_bound_that_is_no_int64_label_value_is_an_invalid_requirement(values: list[str]) -> None:
    assert NodeRequirement({"key": "k", "operator": "Gt", "values": values}, 0).error is not None


def test_a_nil_selector_matches_nothing_and_an_empty_one_everything() -> None:
    assert not compile_selector(None).matches({"a": "b"})
    assert compile_selector({}).matches({"a": "b"})
    assert compile_selector({}).empty and not compile_selector(None).empty


KEYS = st.sampled_from(["app", "tier", "example.com/team", "x"])
VALUES = st.sampled_from(["", "a", "b", "web", "1"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=4)
EXPRESSIONS = st.lists(st.one_of(
    st.builds(lambda k, v: {"key": k, "operator": "In", "values": v}, KEYS, st.lists(VALUES, min_size=1, max_size=3)),
    st.builds(lambda k, v: {"key": k, "operator": "NotIn", "values": v}, KEYS, st.lists(VALUES, min_size=1, max_size=3)),
    st.builds(lambda k: {"key": k, "operator": "Exists"}, KEYS),
    st.builds(lambda k: {"key": k, "operator": "DoesNotExist"}, KEYS),
), max_size=3)
SELECTORS = st.one_of(st.none(), st.builds(
    lambda m, e: {**({"matchLabels": m} if m else {}), **({"matchExpressions": e} if e else {})}, LABELS, EXPRESSIONS))


@given(SELECTORS, LABELS)
def test_compiled_selectors_agree_with_the_shared_selector_module(selector: dict[str, Any] | None,
                                                                  labels: dict[str, str]) -> None:
    compiled = compile_selector(selector)
    assert compiled.matches(labels) == selectors.matches(selector, labels)
    if selector is not None:
        assert (compiled.explain(labels) is None) == compiled.matches(labels)
