"""Which running pods are a workload's own replicas, left out when it is placed as on creation.

Only the pods its controller made are: a pod's controller reference says so, never its labels.
A bare Pod has no selector and no replicas, so the pods that share its labels stay, and their
anti-affinity still repels it. The first rows are kube-scheduler's own
(interpodaffinity/filtering_test.go, TestRequiredAffinitySingleNode), run through explain as
bare Pods.
"""
from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.builders import node, pod, pod_affinity, selector, term
from webhook.explain.report import Explanation, explain
from webhook.explain.state import ClusterState
from webhook.kube.kinds import BUILTIN

SCAN = {"service": "securityscan"}
MACHINE1 = {**node("machine1", {"region": "r1", "zone": "z11"}, capacity={"cpu": "4", "pods": "110"}),
            "apiVersion": "v1", "kind": "Node"}
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"


def _in(key: str, *values: str) -> dict[str, Any]:
    return selector(in_=[(key, list(values))])


def _bare(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", **obj}


def _explain(incoming: dict[str, Any], *objects: dict[str, Any], **kw: Any) -> Explanation:
    target = BUILTIN.for_object(incoming)
    assert target is not None
    return explain(incoming, target, ClusterState.from_objects([MACHINE1, *objects]), suggestions=False, **kw)


ROWS = [
    pytest.param(
        _bare(pod("incoming", labels=SCAN, affinity=pod_affinity(required=[term(_in("service", "securityscan", "value2"), "region")],
                                                                 anti=[term(_in("service", "antivirusscan", "value2"), "node")]))),
        _bare(pod("existing", on="machine1", labels=SCAN, affinity=pod_affinity(anti=[term(_in("service", "securityscan", "value2"), "zone")]))),
        id="TestRequiredAffinitySingleNode: satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy "
           "PodAntiAffinity symmetry with the existing pod"),
    pytest.param(
        _bare(pod("incoming", labels=SCAN)),
        _bare(pod("existing", on="machine1", labels=SCAN, affinity=pod_affinity(anti=[term(_in("service", "securityscan", "value2"), "zone")]))),
        id="TestRequiredAffinitySingleNode: verify that PodAntiAffinity from existing pod is respected when pod has "
           "no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod"),
]


@pytest.mark.parametrize(("incoming", "existing"), ROWS)
def test_a_bare_pod_is_repelled_by_a_running_pod_with_its_labels_as_the_scheduler_repels_it(
        incoming: dict[str, Any], existing: dict[str, Any]) -> None:
    found = _explain(incoming, existing)
    (row,) = found.rows
    assert row.node is None
    assert row.message.startswith(f"0/1 nodes are available: 1 {EXISTING}.")
    assert not any("left out" in note for note in found.notes)


def _owned(name: str, labels: dict[str, str], kind: str, owner: str, api_version: str = "apps/v1") -> dict[str, Any]:
    obj = _bare(pod(name, on="machine1", labels=labels, affinity=pod_affinity(anti=[term(_in("app", "web"), "zone")])))
    obj["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner, "uid": "u-1",
                                           "controller": True}]
    return obj


def _web_deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}}


def test_a_deployments_own_pods_are_left_out_and_a_look_alike_is_not() -> None:
    web = {"app": "web", "pod-template-hash": "abc12"}
    own = _owned("web-abc12-x", web, "ReplicaSet", "web-abc12")
    stranger = _owned("copy", {"app": "web"}, "ReplicaSet", "copycat-1")
    alone = _explain(_web_deployment(), own, update=False)
    assert alone.rows[0].node == "machine1"
    assert alone.notes == ["the 1 running pod(s) of web are left out: its replicas are placed as on creation"]
    beside = _explain(_web_deployment(), own, stranger, update=False)
    assert beside.rows[0].node is None and EXISTING in beside.rows[0].message


def test_a_replicaset_in_the_state_ties_its_pods_to_the_deployment_whatever_its_name() -> None:
    replica_set = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
        "name": "renamed", "namespace": "default",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": True}]}}
    found = _explain(_web_deployment(), replica_set, _owned("renamed-x", {"app": "web"}, "ReplicaSet", "renamed"),
                     update=False)
    assert found.rows[0].node == "machine1" and len(found.notes) == 1


def test_a_statefulsets_pods_are_its_own_by_controller_reference() -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}}
    owned = _explain(sts, _owned("db-0", {"app": "web"}, "StatefulSet", "db"), update=False)
    assert owned.rows[0].node == "machine1"
    other = _explain(sts, _owned("db-0", {"app": "web"}, "StatefulSet", "other"), update=False)
    assert other.rows[0].node is None
