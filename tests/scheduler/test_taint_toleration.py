"""TaintToleration and NodeUnschedulable, re-expressed from taint_toleration_test.go
(TestTaintTolerationFilter, TestTaintTolerationScore) and node_unschedulable_test.go."""
from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.builders import node, pod, state_for
from webhook.scheduler import UNRESOLVABLE, Options, prioritize
from webhook.scheduler.filters import node_unschedulable, taint_toleration


def _taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def _tol(key: str, value: str = "", effect: str = "", op: str = "") -> dict[str, str]:
    out = {"key": key, "effect": effect, "operator": op}
    if value:
        out["value"] = value
    return {k: v for k, v in out.items() if v}


FILTER_CASES: list[Any] = [
    pytest.param([], [_taint("dedicated", "user1", "NoSchedule")], ("dedicated", "user1"),
                 id="TestTaintTolerationFilter: a pod with no tolerations cannot land on a node with taints"),
    pytest.param([_tol("dedicated", "user1", "NoSchedule")], [_taint("dedicated", "user1", "NoSchedule")], None,
                 id="TestTaintTolerationFilter: a pod tolerating the dedicated taint lands on the node"),
    pytest.param([_tol("dedicated", "user2", "NoSchedule", "Equal")], [_taint("dedicated", "user1", "NoSchedule")],
                 ("dedicated", "user1"),
                 id="TestTaintTolerationFilter: a toleration for another value does not help"),
    pytest.param([_tol("foo", effect="NoSchedule", op="Exists")], [_taint("foo", "bar", "NoSchedule")], None,
                 id="TestTaintTolerationFilter: Exists tolerates any value"),
    pytest.param([_tol("dedicated", "user2", "NoSchedule", "Equal"), _tol("foo", effect="NoSchedule", op="Exists")],
                 [_taint("dedicated", "user2", "NoSchedule"), _taint("foo", "bar", "NoSchedule")], None,
                 id="TestTaintTolerationFilter: every taint tolerated by one of several tolerations"),
    pytest.param([_tol("foo", "bar", "PreferNoSchedule", "Equal")], [_taint("foo", "bar", "NoSchedule")],
                 ("foo", "bar"),
                 id="TestTaintTolerationFilter: a toleration with another non-empty effect does not tolerate"),
    pytest.param([_tol("foo", "bar", op="Equal")], [_taint("foo", "bar", "NoSchedule")], None,
                 id="TestTaintTolerationFilter: a toleration with no effect tolerates every effect"),
    pytest.param([_tol("dedicated", "user2", "NoSchedule", "Equal")], [_taint("dedicated", "user1", "PreferNoSchedule")],
                 None, id="TestTaintTolerationFilter: PreferNoSchedule taints never filter"),
    pytest.param([], [_taint("dedicated", "user1", "PreferNoSchedule")], None,
                 id="TestTaintTolerationFilter: no toleration and only PreferNoSchedule taints"),
]


# The reason for an untolerated taint {KEY: VALUE}, as each release words it.
WORDINGS: list[tuple[tuple[int, ...] | None, str]] = [
    ((1, 20), "node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate"),  # v1.20.2 taint_toleration.go:69
    ((1, 24), "node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate"),
    ((1, 25), "node(s) had untolerated taint {{{key}: {value}}}"),  # kubernetes#109119
    ((1, 34, 1), "node(s) had untolerated taint {{{key}: {value}}}"),
    ((1, 34, 2), "node(s) had untolerated taint(s)"),  # kubernetes#134740, picked into v1.34.2
    ((1, 34), "node(s) had untolerated taint(s)"),  # no patch given: the minor's newest
    ((1, 35), "node(s) had untolerated taint(s)"),
    (None, "node(s) had untolerated taint(s)"),  # the newest release
]


@pytest.mark.parametrize(("tolerations", "taints", "untolerated"), FILTER_CASES)
def test_the_taint_filter_matches_the_upstream_table(tolerations: list[Any], taints: list[Any],
                                                      untolerated: tuple[str, str] | None) -> None:
    incoming = pod(tolerations=tolerations)
    target = node("nodeA", taints=taints)
    for version, wording in WORDINGS:
        options = Options.for_version(version)
        state, cluster = state_for(incoming, [target], options=options)
        got = taint_toleration(state.plan, cluster.nodes["nodeA"], options)
        if untolerated is None:
            assert got is None
        else:
            key, value = untolerated
            assert got is not None and got.code == UNRESOLVABLE
            assert got.reasons == (wording.format(key=key, value=value),), version


SCORE_CASES: list[Any] = [
    pytest.param([_tol("foo", "bar", "PreferNoSchedule", "Equal")],
                 {"nodeA": [_taint("foo", "bar", "PreferNoSchedule")], "nodeB": [_taint("foo", "blah", "PreferNoSchedule")]},
                 {"nodeA": 100, "nodeB": 0},
                 id="TestTaintTolerationScore: tolerated taints score higher than intolerable ones"),
    pytest.param([_tol("cpu-type", "arm64", "PreferNoSchedule", "Equal"), _tol("disk-type", "ssd", "PreferNoSchedule", "Equal")],
                 {"nodeA": [], "nodeB": [_taint("cpu-type", "arm64", "PreferNoSchedule")],
                  "nodeC": [_taint("cpu-type", "arm64", "PreferNoSchedule"), _taint("disk-type", "ssd", "PreferNoSchedule")]},
                 {"nodeA": 100, "nodeB": 100, "nodeC": 100},
                 id="TestTaintTolerationScore: how many tolerated taints a node has does not matter"),
    pytest.param([_tol("foo", "bar", "PreferNoSchedule", "Equal")],
                 {"nodeA": [], "nodeB": [_taint("cpu-type", "arm64", "PreferNoSchedule")],
                  "nodeC": [_taint("cpu-type", "arm64", "PreferNoSchedule"), _taint("disk-type", "ssd", "PreferNoSchedule")]},
                 {"nodeA": 100, "nodeB": 50, "nodeC": 0},
                 id="TestTaintTolerationScore: the more intolerable taints the lower the score"),
    pytest.param([_tol("cpu-type", "arm64", "NoSchedule", "Equal"), _tol("disk-type", "ssd", "NoSchedule", "Equal")],
                 {"nodeA": [], "nodeB": [_taint("cpu-type", "arm64", "NoSchedule")],
                  "nodeC": [_taint("cpu-type", "arm64", "PreferNoSchedule"), _taint("disk-type", "ssd", "PreferNoSchedule")]},
                 {"nodeA": 100, "nodeB": 100, "nodeC": 0},
                 id="TestTaintTolerationScore: only PreferNoSchedule taints and tolerations count"),
    pytest.param([], {"nodeA": [], "nodeB": [_taint("cpu-type", "arm64", "PreferNoSchedule")]},
                 {"nodeA": 100, "nodeB": 0},
                 id="TestTaintTolerationScore: default behaviour lands on the node with no taints"),
]


@pytest.mark.parametrize(("tolerations", "taints", "want"), SCORE_CASES)
def test_the_taint_score_matches_the_upstream_table(tolerations: list[Any], taints: dict[str, Any], want: dict[str, int]) -> None:
    _, cluster = state_for(pod(), [node(n, taints=t) for n, t in taints.items()])
    result = prioritize(pod(tolerations=tolerations), cluster, list(taints))
    assert {n: result.breakdown(n)["TaintToleration"].normalized for n in taints} == want


@pytest.mark.parametrize(("tolerations", "fails"), [
    pytest.param([], True, id="TestNodeUnschedulable: a cordoned node rejects a pod"),
    pytest.param([_tol("node.kubernetes.io/unschedulable", effect="NoSchedule", op="Exists")], False,
                 id="TestNodeUnschedulable: a pod tolerating the unschedulable taint may land"),
    pytest.param([_tol("node.kubernetes.io/unschedulable", effect="NoExecute", op="Exists")], True,
                 id="TestNodeUnschedulable: a toleration for another effect does not help"),
])
def test_a_cordoned_node_takes_only_pods_tolerating_the_unschedulable_taint(tolerations: list[Any], fails: bool) -> None:
    state, cluster = state_for(pod(tolerations=tolerations), [node("n", unschedulable=True)])
    got = node_unschedulable(state.plan, cluster.nodes["n"], Options())
    assert (got is not None) == fails
    if got is not None:
        assert got.reasons == ("node(s) were unschedulable",) and got.code == UNRESOLVABLE
