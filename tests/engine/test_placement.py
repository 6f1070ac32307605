"""apply_policy on every workload kind: spread, priority, VM eviction, idempotency per feature."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kit.engine import apply
from tests.kit.policies import policy as make_policy
from tests.kit.policies import policy_set
from tests.kit.workloads import deployment, pod_spec_of
from webhook import LABEL_GROUP
from webhook.cluster.view import StaticClusterView
from webhook.engine import admission, review
from webhook.engine.placement import PlacementError, group_value
from webhook.kube.pointers import get_path
from webhook.policy.policyset import Policy

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
HOST = "kubernetes.io/hostname"
POD = {"containers": [{"name": "app", "image": "nginx"}]}


def spread(mode: str = "required", **extra: Any) -> dict[str, Any]:
    return {"placement": {"podAntiAffinity": {"spread": mode, **extra}}}


def anti_terms(obj: dict[str, Any], which: str = REQ) -> list[Any]:
    return list(((pod_spec_of(obj).get("affinity") or {}).get("podAntiAffinity") or {}).get(which) or [])


def templated(api_version: str, kind: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": labels} if labels is not None else {}
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"},
            "spec": {"template": {"metadata": meta, "spec": copy.deepcopy(POD)}}}


KINDS: list[tuple[dict[str, Any], tuple[str, ...]]] = [
    (deployment(), ("spec", "template", "spec")),
    (templated("apps/v1", "StatefulSet"), ("spec", "template", "spec")),
    (templated("apps/v1", "ReplicaSet"), ("spec", "template", "spec")),
    (templated("apps/v1", "DaemonSet"), ("spec", "template", "spec")),
    (templated("batch/v1", "Job"), ("spec", "template", "spec")),
    ({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
      "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": copy.deepcopy(POD)}}}}},
     ("spec", "jobTemplate", "spec", "template", "spec")),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": copy.deepcopy(POD)}, ("spec",)),
    (templated("kubevirt.io/v1", "VirtualMachine"), ("spec", "template", "spec")),
    ({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "v"},
      "spec": {"domain": {"devices": {}}}}, ("spec",)),
    (templated("kubevirt.io/v1", "VirtualMachineInstanceReplicaSet"), ("spec", "template", "spec")),
    ({"apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool", "metadata": {"name": "pool"},
      "spec": {"virtualMachineTemplate": {"spec": {"template": {"spec": {"domain": {}}}}}}},
     ("spec", "virtualMachineTemplate", "spec", "template", "spec")),
]


@pytest.mark.parametrize(("obj", "path"), KINDS, ids=lambda v: v.get("kind") if isinstance(v, dict) else "")
def test_placement_lands_in_each_kinds_pod_spec(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    obj = copy.deepcopy(obj)
    apply(obj, make_policy(placement={"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "x", "operator": "Exists"}]}))
    assert get_path(obj, path)["nodeSelector"] == {"disk": "ssd"}
    assert get_path(obj, path)["tolerations"] == [{"key": "x", "operator": "Exists"}]


@pytest.mark.parametrize(("obj", "path"), KINDS, ids=lambda v: v.get("kind") if isinstance(v, dict) else "")
def test_vm_eviction_strategy_goes_to_kubevirt_kinds_only(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    obj = copy.deepcopy(obj)
    apply(obj, make_policy(vm={"evictionStrategy": "LiveMigrate"}))
    kubevirt = obj["apiVersion"].startswith(("kubevirt.io/", "pool.kubevirt.io/"))
    assert get_path(obj, path).get("evictionStrategy") == ("LiveMigrate" if kubevirt else None)


def test_a_users_eviction_strategy_is_kept_under_merge() -> None:
    vm = templated("kubevirt.io/v1", "VirtualMachine")
    vm["spec"]["template"]["spec"]["evictionStrategy"] = "None"
    result = apply(vm, make_policy(vm={"evictionStrategy": "LiveMigrate"}))
    assert vm["spec"]["template"]["spec"]["evictionStrategy"] == "None"
    assert result.warnings == ["p: evictionStrategy None kept (policy wants LiveMigrate)"]


def test_an_object_without_its_pod_spec_is_a_placement_error() -> None:
    broken = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}}
    with pytest.raises(PlacementError, match="no pod spec at spec.template.spec"):
        apply(broken, make_policy(placement={"nodeSelector": {"a": "b"}}))


# --- spread and the workload selector ---------------------------------------------------------


def test_required_spread_selects_on_the_workload_selector() -> None:
    obj = deployment(pod_labels={"app": "web", "tier": "front"}, selector={"matchLabels": {"app": "web"}})
    apply(obj, make_policy(**spread()))
    assert anti_terms(obj) == [{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}]


def test_selector_match_expressions_are_copied_too() -> None:
    selector = {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "track", "operator": "In", "values": ["stable"]}]}
    obj = deployment(pod_labels={"app": "web", "track": "stable"}, selector=selector)
    apply(obj, make_policy(**spread()))
    assert anti_terms(obj)[0]["labelSelector"] == selector


def test_preferred_spread_carries_its_weight_and_topology_key() -> None:
    obj = deployment()
    apply(obj, make_policy(**spread("preferred", weight=30, topologyKey="topology.kubernetes.io/zone")))
    assert anti_terms(obj, PREF) == [
        {"weight": 30, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                           "topologyKey": "topology.kubernetes.io/zone"}}
    ]


def test_without_a_selector_the_pod_labels_minus_volatile_keys_are_used() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-abc",
           "labels": {"app": "web", "pod-template-hash": "5d8f7"}}, "spec": copy.deepcopy(POD)}
    apply(pod, make_policy(**spread()))
    assert anti_terms(pod)[0]["labelSelector"] == {"matchLabels": {"app": "web"}}


def test_a_selector_made_only_of_volatile_keys_falls_back_to_the_pod_labels() -> None:
    job = templated("batch/v1", "Job", labels={"app": "etl", "batch.kubernetes.io/controller-uid": "u"})
    job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}}
    apply(job, make_policy(**spread()))
    assert anti_terms(job)[0]["labelSelector"] == {"matchLabels": {"app": "etl"}}


def test_an_explicit_label_selector_and_match_label_keys_are_used_as_written() -> None:
    obj = deployment()
    apply(obj, make_policy(**spread(labelSelector={"matchLabels": {"tier": "web"}}, matchLabelKeys=["version"])))
    assert anti_terms(obj) == [{"labelSelector": {"matchLabels": {"tier": "web"}}, "topologyKey": HOST,
                                "matchLabelKeys": ["version"]}]


def test_objects_with_no_labels_at_all_get_a_group_label_to_select_on() -> None:
    vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "db-1"},
          "spec": {"template": {"spec": {"domain": {}}}}}
    result = apply(vm, make_policy(**spread()))
    assert vm["spec"]["template"]["metadata"]["labels"] == {LABEL_GROUP: "db-1"}
    assert anti_terms(vm)[0]["labelSelector"] == {"matchLabels": {LABEL_GROUP: "db-1"}}
    assert any("no usable label" in w for w in result.warnings)
    once = copy.deepcopy(vm)
    assert apply(vm, make_policy(**spread())).changed is False
    assert vm == once


@pytest.mark.parametrize(
    ("metadata", "value"),
    [
        ({"name": "web"}, "web"),
        ({"generateName": "web-"}, "web"),
        ({"generateName": "batch.run."}, "batch.run"),
        ({"name": "x" * 70}, "x" * 63),
        ({"name": "a" * 62 + ".b"}, "a" * 62),
    ],
)
def test_the_group_label_value_is_the_name_or_generate_name_stem(metadata: dict[str, str], value: str) -> None:
    assert group_value(metadata) == value


def test_an_object_with_neither_name_nor_generate_name_cannot_be_grouped() -> None:
    with pytest.raises(PlacementError, match="neither a name nor a generateName"):
        group_value({})


def test_daemonsets_get_no_self_anti_affinity_but_other_terms() -> None:
    ds = templated("apps/v1", "DaemonSet", labels={"app": "agent"})
    other = {"labelSelector": {"matchLabels": {"app": "noisy"}}, "topologyKey": HOST}
    result = apply(ds, make_policy(placement={"podAntiAffinity": {"spread": "required", "topologyKey": HOST,
                                                                  "weight": 100, "terms": {"required": [other]}}}))
    assert anti_terms(ds) == [other]
    assert "p: no self anti-affinity: a DaemonSet runs one pod per node" in result.warnings


def test_keep_with_existing_anti_affinity_adds_no_group_label() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {**copy.deepcopy(POD), "affinity": {"podAntiAffinity": {PREF: []}}}}
    pod["spec"]["affinity"]["podAntiAffinity"][PREF] = [{"weight": 1, "podAffinityTerm": {"topologyKey": HOST}}]
    before = copy.deepcopy(pod)
    assert apply(pod, make_policy(on_conflict="keep", **spread())).changed is False
    assert pod == before


# --- priority -------------------------------------------------------------------------------


def classes(**pcs: dict[str, Any]) -> StaticClusterView:
    return StaticClusterView(priority_classes={name: {"kind": "PriorityClass", **pc} for name, pc in pcs.items()})


def test_setting_a_priority_class_drops_a_stale_integer_priority() -> None:
    obj = deployment(pod_spec={**POD, "priority": 1000})
    result = apply(obj, make_policy(scheduling={"priorityClassName": "high"}))
    assert pod_spec_of(obj)["priorityClassName"] == "high"
    assert "priority" not in pod_spec_of(obj)
    assert "p: dropped integer priority 1000: high decides it" in result.warnings


def test_an_integer_priority_equal_to_the_known_class_value_is_kept() -> None:
    obj = deployment(pod_spec={**POD, "priority": 1000})
    apply(obj, make_policy(scheduling={"priorityClassName": "high"}), classes(high={"value": 1000}))
    assert pod_spec_of(obj)["priority"] == 1000


def test_a_kept_priority_class_keeps_its_priority_too() -> None:
    obj = deployment(pod_spec={**POD, "priorityClassName": "low", "priority": 10})
    apply(obj, make_policy(scheduling={"priorityClassName": "high"}))
    assert (pod_spec_of(obj)["priorityClassName"], pod_spec_of(obj)["priority"]) == ("low", 10)


@pytest.mark.parametrize(
    ("pod", "cluster", "written", "warning"),
    [
        ({"priorityClassName": "high"}, classes(high={"value": 1, "preemptionPolicy": "Never"}), True, None),
        ({"priorityClassName": "high"}, classes(high={"value": 1}), False, "high has PreemptLowerPriority"),
        ({"priorityClassName": "high"}, None, False, "PriorityClass high not known"),
        ({"priorityClassName": "high"}, classes(), False, "PriorityClass high not known"),
        ({}, classes(high={"value": 1, "preemptionPolicy": "Never"}), False, "no priorityClassName"),
    ],
)
def test_preemption_policy_is_written_only_when_the_class_carries_the_same_value(
    pod: dict[str, Any], cluster: StaticClusterView | None, written: bool, warning: str | None
) -> None:
    obj = deployment(pod_spec={**POD, **pod})
    result = apply(obj, make_policy(scheduling={"preemptionPolicy": "Never"}), cluster)
    assert ("preemptionPolicy" in pod_spec_of(obj)) is written
    if warning:
        assert any(warning in w for w in result.warnings), result.warnings


def test_the_class_a_policy_sets_decides_its_preemption_policy() -> None:
    obj = deployment()
    cluster = classes(critical={"value": 9, "preemptionPolicy": "Never"})
    apply(obj, make_policy(scheduling={"priorityClassName": "critical", "preemptionPolicy": "Never"}), cluster)
    assert pod_spec_of(obj)["preemptionPolicy"] == "Never"


def test_kubevirt_kinds_get_no_preemption_policy_field() -> None:
    vm = templated("kubevirt.io/v1", "VirtualMachine")
    vm["spec"]["template"]["spec"]["priorityClassName"] = "high"
    result = apply(vm, make_policy(scheduling={"preemptionPolicy": "Never"}), classes(high={"value": 1, "preemptionPolicy": "Never"}))
    assert "preemptionPolicy" not in vm["spec"]["template"]["spec"]
    assert "p: preemptionPolicy skipped: this kind has no such field" in result.warnings


def test_a_missing_priority_class_is_reported_when_the_cluster_is_known() -> None:
    result = apply(deployment(), make_policy(scheduling={"priorityClassName": "ghost"}), classes())
    assert "p: PriorityClass ghost does not exist in the cluster" in result.warnings


# --- idempotency and warnings per feature ------------------------------------------------------

T = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
FEATURES: dict[str, dict[str, Any]] = {
    "nodeSelector": {"placement": {"nodeSelector": {"disk": "ssd"}}},
    "nodeAffinity": {"placement": {"nodeAffinity": {"required": [T, {"matchFields": [
        {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}], "preferred": [{"weight": 5, "preference": T}]}}},
    "nodeAntiAffinity": {"placement": {"nodeAntiAffinity": {
        "required": [{"matchExpressions": [{"key": "m", "operator": "Gt", "values": ["3"]},
                                           {"key": "x", "operator": "Exists"}]}],
        "preferred": [{"weight": 9, "preference": {"matchExpressions": [{"key": "m", "operator": "Lt", "values": ["2"]}]}}]}}},
    "spread": spread(),
    "podAffinity": {"placement": {"podAffinity": {"required": [{"labelSelector": {"matchLabels": {"app": "db"}},
                                                                "topologyKey": HOST}]}}},
    "tolerations": {"placement": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}},
    "capacity": {"placement": {"capacity": {"prefer": "spot", "require": "spot", "provider": "aks"}}},
    "resources": {"placement": {"resources": {"preferredCPU": {"weight": 80, "threshold": "70%"},
                                              "requiredResources": [{"resourceType": "gpu", "minAvailable": "1"}]}}},
    "scheduling": {"scheduling": {"priorityClassName": "high", "schedulerName": "s", "preemptionPolicy": "Never"}},
    "rollout": {"rollout": {"mode": "safe", "minReadySeconds": 5}},
    "explicit rollout": {"rollout": {"mode": "explicit", "maxSurge": "50%", "maxUnavailable": 0}},
}


@pytest.mark.parametrize("feature", sorted(FEATURES))
@pytest.mark.parametrize("existing", ["bare", "busy"])
def test_each_feature_applied_twice_changes_nothing_the_second_time(feature: str, existing: str) -> None:
    pod = copy.deepcopy(POD)
    if existing == "busy":
        pod.update({"priority": 7, "nodeSelector": {"team": "a"}, "tolerations": [{"key": "t", "operator": "Exists"}],
                    "affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                        {"matchExpressions": [{"key": "b", "operator": "Exists"}]}]}}}})
    obj = deployment(pod_spec=pod, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    policy = make_policy(**FEATURES[feature])
    assert apply(obj, policy).changed
    once = copy.deepcopy(obj)
    assert apply(obj, policy).changed is False
    assert obj == once


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_every_warning_is_prefixed_and_under_120_characters(feature: str) -> None:
    name = "a-policy-with-a-rather-long-name-to-push-the-limits-of-warnings"
    obj = deployment(pod_spec={**POD, "nodeSelector": {"disk": "hdd"}, "schedulerName": "x" * 60, "priorityClassName": "y" * 60})
    result = apply(obj, make_policy(name, **FEATURES[feature]))
    for warning in result.warnings:
        assert warning.startswith(name + ": ")
        assert len(warning) < 120


def _admitted(obj: dict[str, Any], *policies: Policy, cluster: StaticClusterView | None = None,
              steps: admission.Steps = admission.ENGINE) -> admission.Outcome:
    return admission.admit(review.request_for_object(obj), policies=policy_set(*policies), cluster=cluster, steps=steps)


def _hosts(count: int, **labels: str) -> StaticClusterView:
    return StaticClusterView(nodes=[{"kind": "Node", "metadata": {"name": f"n{i}", "labels": {HOST: f"n{i}", **labels}}}
                                    for i in range(count)])


def test_required_spread_over_too_few_eligible_domains_is_reported() -> None:
    out = _admitted(deployment(), make_policy(**spread()), cluster=_hosts(2))
    assert "p: required spread: 3 replicas but 2 eligible kubernetes.io/hostname domains" in out.warnings


def test_enough_eligible_domains_raise_no_spread_warning() -> None:
    out = _admitted(deployment(), make_policy(**spread()), cluster=_hosts(3))
    assert not any("eligible" in w for w in out.warnings)


# Found by hypothesis (tests/engine/test_admission_settling.py): the spread came first, and the
# policy after it took every node away; counted as the spread was written, it said nothing.
@pytest.mark.parametrize("steps", [admission.ENGINE, admission.Steps(settle_early=False)], ids=["one pass", "settling"])
@pytest.mark.parametrize("settling_set", [False, True], ids=["set reads nothing", "set reads others' output"])
def test_eligible_domains_are_counted_in_the_object_admission_answers_with(steps: admission.Steps,
                                                                           settling_set: bool) -> None:
    avoid_zone_a = make_policy("avoid-a", order=2, placement={"nodeAntiAffinity": {"required": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}})
    reader = [make_policy("reader", order=3, scheduling={"priorityClassName": "high", "preemptionPolicy": "Never"})]
    out = _admitted(deployment(), make_policy("spread", order=1, **spread()), avoid_zone_a,
                    *(reader if settling_set else ()), cluster=_hosts(3, zone="a"), steps=steps)
    assert "spread: required spread: 3 replicas but 0 eligible kubernetes.io/hostname domains" in out.warnings


@pytest.mark.parametrize(("mode", "expected"), [("merge", "None"), ("keep", "None"), ("replace", "LiveMigrate")])
def test_eviction_strategy_follows_each_on_conflict_mode(mode: str, expected: str) -> None:
    vm = templated("kubevirt.io/v1", "VirtualMachine")
    vm["spec"]["template"]["spec"]["evictionStrategy"] = "None"
    apply(vm, make_policy(on_conflict=mode, vm={"evictionStrategy": "LiveMigrate"}))
    assert vm["spec"]["template"]["spec"]["evictionStrategy"] == expected


@pytest.mark.parametrize(("mode", "expected"), [("merge", None), ("keep", None), ("replace", "Never")])
def test_preemption_policy_follows_each_on_conflict_mode(mode: str, expected: str | None) -> None:
    obj = deployment(pod_spec={**POD, "priorityClassName": "high", "preemptionPolicy": "PreemptLowerPriority"})
    cluster = classes(high={"value": 1, "preemptionPolicy": "Never"})
    apply(obj, make_policy(on_conflict=mode, scheduling={"preemptionPolicy": "Never"}), cluster)
    assert pod_spec_of(obj)["preemptionPolicy"] == (expected or "PreemptLowerPriority")


def test_a_users_spread_term_written_with_in_is_the_same_term_and_is_not_added_twice() -> None:
    term = {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
            "topologyKey": "kubernetes.io/hostname"}
    pod = {"containers": [{"name": "app", "image": "nginx"}],
           "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    obj = deployment(pod_spec=pod)
    out = apply(obj, make_policy(placement={"podAntiAffinity": {"spread": "required"}}))
    terms = pod_spec_of(obj)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == [term] and not out.changed


def test_a_pools_spread_selects_the_vm_pods_by_their_template_labels_not_by_the_pool_selector() -> None:
    # A VirtualMachinePool's spec.selector selects VirtualMachines, not the pods the spread repels.
    pool = {
        "apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool",
        "metadata": {"name": "workers", "namespace": "vms"},
        "spec": {"selector": {"matchLabels": {"pool": "workers"}},
                 "virtualMachineTemplate": {"metadata": {"labels": {"pool": "workers"}},
                                            "spec": {"template": {"metadata": {"labels": {"vm-role": "worker"}},
                                                                  "spec": {"domain": {}}}}}},
    }
    apply(pool, make_policy(placement={"podAntiAffinity": {"spread": "required"}}))
    spec = pool["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]
    [term] = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"] == {"matchLabels": {"vm-role": "worker"}}


def test_match_label_keys_the_workload_selector_already_has_are_left_out_with_a_warning() -> None:
    # From 1.31 the API server rejects a pod whose matchLabelKeys repeat a selector key.
    obj = deployment(pod_labels={"app": "web", "track": "stable"}, selector={"matchLabels": {"app": "web"}})
    spread = {"spread": "required", "matchLabelKeys": ["app", "track"]}
    out = apply(obj, make_policy(placement={"podAntiAffinity": spread}))
    [term] = pod_spec_of(obj)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"] == {"matchLabels": {"app": "web"}}
    assert term["matchLabelKeys"] == ["track"]
    assert any("matchLabelKeys app left out" in w for w in out.warnings)


def test_without_a_cluster_view_required_spread_says_its_domains_were_not_counted() -> None:
    out = _admitted(deployment(), make_policy(placement={"podAntiAffinity": {"spread": "required"}}))
    assert "p: required spread: kubernetes.io/hostname domains not counted: no cluster view" in out.warnings
