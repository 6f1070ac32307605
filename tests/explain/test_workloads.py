"""Workloads of every kind as the pods their controllers would make."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.explain.workloads import build, wukong_pod_spec
from webhook.kube.kinds import BUILTIN
from webhook.scheduler.nodeaffinity import PreferredTerms, RequiredNodeAffinity, node_identity, terms_match


def target(kind: str) -> Any:
    (found,) = BUILTIN.with_kind(kind)
    return found


def test_a_deployments_pods_carry_the_template_hash_its_replicaset_selects() -> None:
    deployment = {"metadata": {"name": "web", "namespace": "prod"},
                  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}}
    work = build(deployment, target("Deployment"))
    hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in work.pods}
    assert len(work.pods) == 3 and len(hashes) == 1
    assert work.default_selector == {"matchLabels": {"app": "web", "pod-template-hash": hashes.pop()}}
    assert work.own_selector == {"matchLabels": {"app": "web"}}


def test_replicas_default_to_one_and_the_flag_overrides_them() -> None:
    sts = {"metadata": {"name": "db"}, "spec": {"template": {"spec": {}}}}
    assert [p["metadata"]["name"] for p in build(sts, target("StatefulSet")).pods] == ["db-0"]
    assert len(build(sts, target("StatefulSet"), replicas=4).pods) == 4


def test_a_suspended_job_makes_no_pods_and_says_so() -> None:
    job = {"metadata": {"name": "j"}, "spec": {"suspend": True, "parallelism": 3, "template": {"spec": {}}}}
    work = build(job, target("Job"))
    assert work.pods == [] and "suspended" in work.notes[0]


def test_a_cronjob_runs_its_job_templates_parallelism() -> None:
    cron = {"metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"parallelism": 2, "template": {"spec": {}}}}}}
    assert len(build(cron, target("CronJob")).pods) == 2


def test_the_global_default_priority_class_applies_when_none_is_named() -> None:
    classes = {"low": {"value": -5, "globalDefault": True, "preemptionPolicy": "Never"}}
    pod = {"metadata": {"name": "p"}, "spec": {"containers": []}}
    spec = build(pod, target("Pod"), priority_classes=classes).pods[0]["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (-5, "Never")


def test_the_built_in_critical_classes_need_no_object() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"priorityClassName": "system-node-critical"}}
    assert build(pod, target("Pod")).pods[0]["spec"]["priority"] == 2000001000


def test_a_daemonset_pod_keeps_its_preferred_terms_and_is_pinned_to_its_node() -> None:
    preferred = [{"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]
    ds = {"metadata": {"name": "agent"}, "spec": {"template": {"spec": {
        "nodeSelector": {"role": "edge"}, "hostNetwork": True,
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}}}}}
    nodes = [{"metadata": {"name": "n1", "labels": {"role": "edge"}}},
             {"metadata": {"name": "n2", "labels": {"role": "core"}}}]
    (pod,) = build(ds, target("DaemonSet"), nodes=nodes).pods
    affinity = pod["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    keys = {t["key"] for t in pod["spec"]["tolerations"]}
    assert "node.kubernetes.io/network-unavailable" in keys and "node.kubernetes.io/unschedulable" in keys


def test_wukong_resource_affinity_is_the_labelers_node_terms() -> None:
    vm = {"metadata": {"name": "vm"}, "spec": {"scheduling": {"resourceAffinity": {
        "requiredResources": [{"resourceType": "gpu", "minAvailable": "1"}],
        "preferredCPU": {"weight": 50, "threshold": "70%"}}}}}
    spec = wukong_pod_spec(vm, [])
    node_affinity = spec["affinity"]["nodeAffinity"]
    assert node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "placement.novasphere.dev/gpu-available", "operator": "Gt", "values": ["0"]}]}]
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 50


KEYS = ("a", "b")
VALUES = ("1", "2", "x")
requirement = st.one_of(
    st.builds(lambda k, op, vs: {"key": k, "operator": op, "values": sorted(set(vs))},
              st.sampled_from(KEYS), st.sampled_from(["In", "NotIn"]), st.lists(st.sampled_from(VALUES), min_size=1)),
    st.builds(lambda k, op: {"key": k, "operator": op}, st.sampled_from(KEYS), st.sampled_from(["Exists", "DoesNotExist"])),
    st.builds(lambda k, op, v: {"key": k, "operator": op, "values": [v]},
              st.sampled_from(KEYS), st.sampled_from(["Gt", "Lt"]), st.sampled_from(["1", "2"])),
)
term = st.builds(lambda exprs: {"matchExpressions": exprs}, st.lists(requirement, min_size=1, max_size=3))
# Integer label values only: the one case the negation of Gt/Lt cannot express is a non-integer.
labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(("0", "1", "2", "3")))


@settings(max_examples=300, deadline=None)
@given(affinity=st.lists(term, max_size=2), anti=st.lists(term, min_size=1, max_size=2), node_labels=labels)
def test_a_wukong_node_is_allowed_exactly_when_affinity_matches_and_no_anti_term_does(
        affinity: list[dict[str, Any]], anti: list[dict[str, Any]], node_labels: dict[str, str]) -> None:
    vm = {"metadata": {"name": "vm"}, "spec": {"scheduling": {
        "nodeAffinity": {"required": affinity}, "nodeAntiAffinity": {"required": anti}}}}
    node = {"metadata": {"name": "n", "labels": node_labels}}
    wanted = (not affinity or terms_match(affinity, node)) and not any(terms_match([t], node) for t in anti)
    spec = wukong_pod_spec(vm, [])
    assert RequiredNodeAffinity.of(spec).matches(*node_identity(node)) == wanted


MAX_LABEL = str(2**63 - 1)  # the largest integer a node label can hold (kube.nodes.label_int)
EDGE_NODES: list[dict[str, Any]] = [{"metadata": {"name": name, "labels": labels}} for name, labels in (
    ("bare", {}), ("low", {"load": "3"}), ("five", {"load": "5"}), ("six", {"load": "6"}),
    ("top", {"load": MAX_LABEL}))]


def _wukong_vm(anti: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "vm"}, "spec": {"scheduling": {"nodeAntiAffinity": anti}}}


def _allowed(spec: dict[str, Any]) -> list[str]:
    return [str(n["metadata"]["name"]) for n in EDGE_NODES if RequiredNodeAffinity.of(spec).matches(*node_identity(n))]


@pytest.mark.parametrize("anti", [{"key": "load", "operator": "Gt", "values": [MAX_LABEL]},
                                  {"key": "load", "operator": "Lt", "values": ["0"]}])
def test_a_wukong_anti_term_no_label_can_satisfy_avoids_no_node(anti: dict[str, Any]) -> None:
    # Admission writes no requirement for it (kube.nodeterms.negate); explain read it as
    # "Lt 2^63 or DoesNotExist", a term the scheduler cannot parse, and kept only bare nodes.
    notes: list[str] = []
    spec = wukong_pod_spec(_wukong_vm({"required": [{"matchExpressions": [anti]}]}), notes)
    assert _allowed(spec) == ["bare", "low", "five", "six", "top"]
    assert any("avoids none" in note for note in notes)


def test_a_preferred_wukong_anti_term_on_gt_is_scored_as_admission_writes_it() -> None:
    # Avoiding load > 5 is preferring load < 6 or no load label, two terms of one weight;
    # explain dropped the pair as if it were an OR it could not score.
    anti = {"preferred": [{"weight": 10, "preference": {"matchExpressions": [
        {"key": "load", "operator": "Gt", "values": ["5"]}]}}]}
    spec = wukong_pod_spec(_wukong_vm(anti), [])
    prefs = PreferredTerms(spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"])
    assert {n["metadata"]["name"]: prefs.score(*node_identity(n)) for n in EDGE_NODES} == {
        "bare": 10, "low": 10, "five": 10, "six": 0, "top": 0}


def test_a_preferred_wukong_anti_term_of_two_requirements_is_not_scored_and_says_why() -> None:
    anti = {"preferred": [{"weight": 10, "preference": {"matchExpressions": [
        {"key": "load", "operator": "Exists"}, {"key": "gpu", "operator": "Exists"}]}}]}
    notes: list[str] = []
    spec = wukong_pod_spec(_wukong_vm(anti), notes)
    assert "affinity" not in spec and any("not scored" in note for note in notes)
