"""priorityClassName, preemptionPolicy and the Priority admission plugin: every output must be
one the plugin admits, for Pods (which it has already defaulted) and for pod templates (whose
pods it admits later, when the controller creates them)."""
from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.engine import apply
from tests.kit.policies import policy
from tests.kit.workloads import deployment
from webhook.cluster.view import StaticClusterView

HIGH = {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "PreemptLowerPriority"}
BATCH = {"metadata": {"name": "batch"}, "value": 10, "preemptionPolicy": "Never"}
VIEW = StaticClusterView(priority_classes={"high": HIGH, "batch": BATCH})


def admit_pod(spec: dict[str, Any], classes: dict[str, dict[str, Any]]) -> str | None:
    """The Priority plugin's CREATE path ((*Plugin).admitPod, plugin/pkg/admission/priority),
    with no global default class: None when it admits the pod spec, else its error."""
    name = spec.get("priorityClassName")
    if not name:
        priority, policy_ = 0, "PreemptLowerPriority"
    elif name not in classes:
        return f"no PriorityClass with name {name} was found"
    else:
        priority, policy_ = classes[name]["value"], classes[name].get("preemptionPolicy") or "PreemptLowerPriority"
    if spec.get("priority") is not None and spec["priority"] != priority:
        return f"the integer value of priority ({spec['priority']}) must not be provided in pod spec"
    if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy_:
        return f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided in pod spec"
    return None


def defaulted_pod(**spec: Any) -> dict[str, Any]:
    """A Pod as the webhook sees it: the Priority plugin already ran (no class: 0, PreemptLowerPriority)."""
    pod_spec = {"containers": [{"name": "app", "image": "nginx"}], "priority": 0,
                "preemptionPolicy": "PreemptLowerPriority", **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "prod"}, "spec": pod_spec}


@pytest.mark.parametrize("cluster", [None, VIEW], ids=["no view", "view"])
def test_setting_a_class_on_a_pod_drops_the_values_the_plugin_filled_in(cluster: Any) -> None:
    pod = defaulted_pod()
    out = apply(pod, policy(scheduling={"priorityClassName": "batch"}), cluster)
    assert out.changed
    assert pod["spec"]["priorityClassName"] == "batch"
    assert "priority" not in pod["spec"] and "preemptionPolicy" not in pod["spec"]
    assert admit_pod(pod["spec"], {"batch": BATCH}) is None
    assert any("dropped integer priority 0" in w for w in out.warnings)
    assert any("dropped preemptionPolicy PreemptLowerPriority" in w for w in out.warnings)


def test_values_known_to_agree_with_the_class_stay_on_a_pod() -> None:
    pod = defaulted_pod(priority=1000)
    apply(pod, policy(scheduling={"priorityClassName": "high"}), VIEW)
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (1000, "PreemptLowerPriority")


def test_a_template_whose_own_preemption_policy_disagrees_with_the_class_keeps_its_class_unset() -> None:
    obj = deployment(pod_spec={"containers": [{"name": "app", "image": "nginx"}], "preemptionPolicy": "Never"})
    out = apply(obj, policy(scheduling={"priorityClassName": "high"}), VIEW)
    spec = obj["spec"]["template"]["spec"]
    assert "priorityClassName" not in spec and spec["preemptionPolicy"] == "Never"
    assert any("priorityClassName high not set: the template's preemptionPolicy Never differs from the class's "
               "PreemptLowerPriority" in w for w in out.warnings), out.warnings


def test_a_template_preemption_policy_is_not_trusted_against_a_class_nobody_can_see() -> None:
    obj = deployment(pod_spec={"containers": [{"name": "app", "image": "nginx"}], "preemptionPolicy": "Never"})
    out = apply(obj, policy(scheduling={"priorityClassName": "batch"}), None)
    assert "priorityClassName" not in obj["spec"]["template"]["spec"]
    assert any("cannot be checked against an unknown class" in w for w in out.warnings)


def test_a_template_preemption_policy_that_agrees_with_the_class_lets_it_be_set() -> None:
    obj = deployment(pod_spec={"containers": [{"name": "app", "image": "nginx"}], "preemptionPolicy": "Never"})
    apply(obj, policy(scheduling={"priorityClassName": "batch"}), VIEW)
    assert obj["spec"]["template"]["spec"]["priorityClassName"] == "batch"


_CLASSES = st.sampled_from([None, "high", "batch"])
_POLICIES = st.sampled_from([None, "Never", "PreemptLowerPriority"])


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["Pod", "Deployment"]),
    own_class=_CLASSES,
    own_priority=st.sampled_from([None, 0, 10, 1000]),
    own_policy=_POLICIES,
    wanted_class=st.sampled_from(["high", "batch"]),
    wanted_policy=_POLICIES,
    mode=st.sampled_from(["merge", "keep", "replace"]),
    with_view=st.booleans(),
)
def test_whatever_the_engine_writes_the_priority_plugin_admits(
    kind: str, own_class: str | None, own_priority: int | None, own_policy: str | None,
    wanted_class: str, wanted_policy: str | None, mode: str, with_view: bool,
) -> None:
    classes = {"high": HIGH, "batch": BATCH}
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if own_class:
        spec["priorityClassName"] = own_class
    if kind == "Pod":
        # What reaches the webhook: the plugin has run, so the pod is admissible as it is.
        own = classes[own_class] if own_class else {"value": 0, "preemptionPolicy": "PreemptLowerPriority"}
        spec["priority"], spec["preemptionPolicy"] = own["value"], own["preemptionPolicy"]
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
        pod_spec = obj["spec"]
    else:
        if own_priority is not None:
            spec["priority"] = own_priority
        if own_policy is not None:
            spec["preemptionPolicy"] = own_policy
        obj = deployment(pod_spec=spec)
        pod_spec = obj["spec"]["template"]["spec"]
    before = copy.deepcopy(pod_spec)
    scheduling = {"priorityClassName": wanted_class, **({"preemptionPolicy": wanted_policy} if wanted_policy else {})}
    apply(obj, policy(scheduling=scheduling, on_conflict=mode), VIEW if with_view else None)
    if admit_pod(before, classes) is None:  # an admissible input must stay admissible
        assert admit_pod(pod_spec, classes) is None, (before, pod_spec)


def test_without_a_cluster_view_the_class_check_says_it_was_skipped() -> None:
    out = apply(deployment(), policy(scheduling={"priorityClassName": "high"}), None)
    assert "p: PriorityClass high not checked: no cluster view" in out.warnings
    out = apply(deployment(), policy(scheduling={"priorityClassName": "gold"}), VIEW)
    assert "p: PriorityClass gold does not exist in the cluster" in out.warnings
