"""The scheduler's words by release: one cycle's FitError message as each release writes it.

The expected strings are the plugins' own, release by release: v1.20.2's are in its source
(taint_toleration.go, node_affinity.go, node_name.go, interpodaffinity/filtering.go,
FitError.Error in core/generic_scheduler.go); the later ones are the releases' named in
``webhook.scheduler.release``.
"""
from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.builders import HOSTNAME, node, pod, pod_affinity, required_nodes, selector, term
from webhook.scheduler import Cluster, Options, schedule
from webhook.scheduler.release import NEWEST_PATCH, Release, parse_release

CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110"}
DB_TAINT = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
REPEL_WEB = pod_affinity(anti=[term(selector({"app": "web"}), HOSTNAME)])


def _node(name: str, **kw: Any) -> dict[str, Any]:
    return node(name, {HOSTNAME: name, **kw.pop("labels", {})}, capacity=CAPACITY, **kw)


def _one_of_each() -> Cluster:
    """A tainted node, a node outside the nodeSelector, and a node whose web pod repels the next."""
    nodes = [_node("a", taints=[DB_TAINT], labels={"disk": "ssd"}), _node("b"), _node("c", labels={"disk": "ssd"})]
    return Cluster.from_objects(nodes, [pod("web-0", on="c", labels={"app": "web"})])


WEB = pod("web-1", labels={"app": "web"}, affinity=REPEL_WEB, nodeSelector={"disk": "ssd"})


@pytest.mark.parametrize(("version", "message"), [
    pytest.param((1, 20), "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity, "
                 "1 node(s) didn't match pod affinity/anti-affinity, 1 node(s) didn't match pod anti-affinity rules, "
                 "1 node(s) had taint {dedicated: db}, that the pod didn't tolerate.",
                 id="v1.20: the generic affinity reason too, the old taint and node affinity words, no preemption part"),
    pytest.param((1, 21), "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                 "1 node(s) didn't match pod affinity/anti-affinity, 1 node(s) didn't match pod anti-affinity rules, "
                 "1 node(s) had taint {dedicated: db}, that the pod didn't tolerate.",
                 id="v1.21: node affinity names the selector"),
    pytest.param((1, 22), "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                 "1 node(s) didn't match pod anti-affinity rules, 1 node(s) had taint {dedicated: db}, that the pod "
                 "didn't tolerate.", id="v1.22: the generic affinity reason is gone"),
    pytest.param((1, 24), "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                 "1 node(s) didn't match pod anti-affinity rules, 1 node(s) had taint {dedicated: db}, that the pod "
                 "didn't tolerate. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming "
                 "pod, 2 Preemption is not helpful for scheduling.", id="v1.24: the preemption part"),
    pytest.param((1, 25), "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                 "1 node(s) didn't match pod anti-affinity rules, 1 node(s) had untolerated taint {dedicated: db}. "
                 "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
                 "2 Preemption is not helpful for scheduling..", id="v1.25: untolerated taint, and a double stop"),
    pytest.param((1, 30), "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                 "1 node(s) didn't match pod anti-affinity rules, 1 node(s) had untolerated taint {dedicated: db}. "
                 "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
                 "2 Preemption is not helpful for scheduling.", id="v1.30: one full stop again"),
    pytest.param(None, "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                 "1 node(s) didn't match pod anti-affinity rules, 1 node(s) had untolerated taint(s). "
                 "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
                 "2 Preemption is not helpful for scheduling.", id="newest: the taint is not named"),
])
def test_each_release_writes_the_message_in_its_own_words(version: tuple[int, ...] | None, message: str) -> None:
    result = schedule(WEB, _one_of_each(), options=Options.for_version(version))
    assert result.message == message


def test_before_v1_21_a_pod_naming_another_node_is_told_about_the_hostname() -> None:
    result = schedule(pod("p", nodeName="elsewhere"), Cluster.from_objects([_node("a")]),
                      options=Options.for_version((1, 20)))
    assert result.message == "0/1 nodes are available: 1 node(s) didn't match the requested hostname."


NAMES_NO_NODE = pod("p", affinity=required_nodes(
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gone"]}]}))
CONFLICTING = pod("p", affinity=required_nodes({"matchFields": [
    {"key": "metadata.name", "operator": "In", "values": ["a"]},
    {"key": "metadata.name", "operator": "In", "values": ["b"]}]}))


@pytest.mark.parametrize(("incoming", "version", "message"), [
    pytest.param(NAMES_NO_NODE, (1, 20), "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity.",
                 id="before v1.24 every node is filtered, and fails NodeAffinity"),
    pytest.param(NAMES_NO_NODE, None, "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
                 "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
                 id="since v1.24 the nodes the PreFilterResult leaves out are counted with its status"),
    pytest.param(CONFLICTING, (1, 20), "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity.",
                 id="before v1.24 conflicting names are a NodeAffinity Filter failure on every node"),
    pytest.param(CONFLICTING, (1, 24), "0/2 nodes are available: 2 pod affinity terms conflict. preemption: "
                 "0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
                 id="v1.24 counts the PreFilter rejection on every node"),
    pytest.param(CONFLICTING, None, "0/2 nodes are available: pod affinity terms conflict. preemption: "
                 "0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
                 id="since v1.25 the PreFilter rejection is said once"),
])
def test_the_prefilter_paths_by_release(incoming: dict[str, Any], version: tuple[int, ...] | None,
                                        message: str) -> None:
    result = schedule(incoming, Cluster.from_objects([_node("a"), _node("b")]), options=Options.for_version(version))
    assert result.message == message


@pytest.mark.parametrize("incoming", [NAMES_NO_NODE, CONFLICTING], ids=["names no node", "conflicting names"])
def test_every_node_a_prefilter_turns_away_has_its_status_recorded(incoming: dict[str, Any]) -> None:
    """What the message counts, the result lists: each node with the status that rejected it."""
    result = schedule(incoming, Cluster.from_objects([_node("a"), _node("b")]))
    assert sorted(result.filtered) == ["a", "b"] == sorted(result.failures)
    assert all(f.plugin == "NodeAffinity" and f.code == "UnschedulableAndUnresolvable" for f in result.filtered.values())


@pytest.mark.parametrize(("text", "release"), [
    ("1.20", Release(1, 20, NEWEST_PATCH)),
    ("v1.20.2", Release(1, 20, 2)),
    ("v1.31.2-eks-7f9249a", Release(1, 31, 2)),
    (" 1.34.1\n", Release(1, 34, 1)),
    ("latest", None),
    ("1", None),
])
def test_a_release_is_read_from_major_minor_and_an_optional_patch(text: str, release: Release | None) -> None:
    assert parse_release(text) == release


def test_releases_order_as_versions_and_a_missing_patch_is_the_newest() -> None:
    assert Release(1, 20, 2) < Release(1, 21, 0) < Release(1, 34, 1) < Release(1, 34, 2) < Release(1, 35, 0)
    assert Release(1, 34, 99) < Release(1, 34) and str(Release(1, 34)) == "v1.34" and str(Release(1, 20, 2)) == "v1.20.2"
    assert Options.for_version((1, 20)).release == Release(1, 20) and Options.for_version(None).release is None
    assert Options.for_version((1, 34, 1)).release == Release(1, 34, 1)
