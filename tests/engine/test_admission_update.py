"""UPDATE never starts a rollout the user did not start.

When an UPDATE leaves the pod template as the old object had it, apart from the fields the
engine writes there, the template leaves admission exactly as the old object had it: the
engine's fields are kept, or written back when a ``kubectl replace`` dropped them, even if
the policies changed since; what today's policies would do is reported as an audit. When
the request changes anything else of the template, a rollout starts anyway and the policies
apply as on CREATE.
"""
from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.test_admission_properties import load_policies, policy_specs, workloads
from tests.kit.policies import policy, policy_set
from tests.kit.workloads import target_of, workload
from webhook import ANNOTATION_APPLIED
from webhook.engine import admission, placement, review
from webhook.engine.placement import template_fields
from webhook.files import documents
from webhook.kube.kinds import BUILTIN
from webhook.kube.objects import copy_json
from webhook.kube.pointers import get_path
from webhook.policy import loader
from webhook.policy.policyset import PolicySet
from webhook.scheduler.rollouts import template_hash

ZONE_A = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: zone-a}
spec:
  placement:
    nodeAffinity:
      required: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]}]
    tolerations: [{key: dedicated, operator: Equal, value: web, effect: NoSchedule}]
"""
ZONE_B = ZONE_A.replace("zone-a", "zone-b").replace("values: [a]", "values: [b]")
SPREAD = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: spread}
spec:
  match: {kinds: [Deployment]}
  placement:
    podAntiAffinity: {spread: required}
  rollout: {mode: safe}
"""
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _policies(*texts: str) -> PolicySet:
    return loader.load_documents(documents.load_text("---\n".join(texts), file="<test>"))


def _create(obj: dict[str, Any], policies: PolicySet) -> dict[str, Any]:
    out = admission.admit(review.request_for_object(obj), policies=policies)
    assert out.result == "patched" and out.object is not None, out.warnings
    return out.object


def _update(new: dict[str, Any], old: dict[str, Any], policies: PolicySet) -> admission.Outcome:
    before = copy.deepcopy(new)
    out = admission.admit(review.request_for_object(new, operation="UPDATE", old_object=old), policies=policies)
    assert new == before, "the request's object was modified"
    assert jsonpatch.apply_patch(before, out.patch) == out.object
    return out


def _template(obj: dict[str, Any] | None) -> Any:
    return get_path(obj, ("spec", "template"))


def _web() -> dict[str, Any]:
    return workload(target_of({"apiVersion": "apps/v1", "kind": "Deployment"}), "web")


def _scaled(obj: dict[str, Any], replicas: int) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["spec"]["replicas"] = replicas
    return new


def test_after_a_policy_change_a_scale_keeps_the_pod_template_and_audits_the_difference() -> None:
    old = _create(_web(), _policies(ZONE_A))
    out = _update(_scaled(old, 5), old, _policies(ZONE_B))
    assert _template(out.object) == _template(old)
    assert (out.result, out.patch, out.applied, out.audited) == ("unchanged", [], [], ["zone-b"])
    assert out.warnings[0] == admission.KEPT
    assert any(w.startswith("zone-b: audit: would ") for w in out.warnings), out.warnings


def test_an_annotation_added_after_a_policy_change_keeps_the_pod_template() -> None:
    old = _create(_web(), _policies(ZONE_A))
    new = copy.deepcopy(old)
    new["metadata"]["annotations"]["team.example.com/owner"] = "payments"
    out = _update(new, old, _policies(ZONE_A, ZONE_B))
    assert _template(out.object) == _template(old) and out.patch == []
    assert out.object["metadata"]["annotations"][ANNOTATION_APPLIED] == "zone-a", "zone-b changed nothing"


def test_with_the_same_policies_an_update_changes_nothing_and_says_nothing() -> None:
    policies = _policies(ZONE_A, SPREAD)
    old = _create(_web(), policies)
    out = _update(_scaled(old, 5), old, policies)
    assert (out.result, out.patch, out.audited) == ("unchanged", [], [])
    assert admission.KEPT not in out.warnings and admission.WRITTEN_BACK not in out.warnings


def test_fields_a_replace_dropped_are_written_back_as_they_were_even_after_a_policy_change() -> None:
    manifest = _web()
    old = _create(manifest, _policies(ZONE_A))
    replaced = copy.deepcopy(manifest)  # kubectl replace -f web.yaml: the author's manifest as it is
    out = _update(replaced, old, _policies(ZONE_B))
    assert _template(out.object) == _template(old)
    assert out.object["metadata"]["annotations"][ANNOTATION_APPLIED] == "zone-a"
    assert out.result == "patched" and out.audited == ["zone-b"]
    assert admission.WRITTEN_BACK in out.warnings


def test_the_engines_term_dropped_from_the_authors_own_node_affinity_is_written_back() -> None:
    # A server-side apply of the original manifest removes what admission added to a field
    # the author also writes: the author's term stays, the ANDed expression goes.
    own = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}}
    manifest = _web()
    manifest["spec"]["template"]["spec"]["affinity"] = own
    old = _create(manifest, _policies(ZONE_A))
    assert _template(old)["spec"]["affinity"] != own
    out = _update(copy.deepcopy(manifest), old, _policies(ZONE_A))
    assert _template(out.object) == _template(old)


def test_a_new_image_starts_a_rollout_with_todays_policies_as_on_create() -> None:
    old = _create(_web(), _policies(ZONE_A))
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    out = _update(new, old, _policies(ZONE_B))
    created = admission.admit(review.request_for_object(new), policies=_policies(ZONE_B))
    assert _template(out.object) == _template(created.object)
    assert out.applied == ["zone-b"] and admission.KEPT not in out.warnings


def test_a_node_selector_of_the_authors_own_starts_a_rollout_and_is_kept() -> None:
    old = _create(_web(), _policies(ZONE_A))
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "ssd"}
    out = _update(new, old, _policies(ZONE_A))
    assert _template(out.object)["spec"]["nodeSelector"] == {"disktype": "ssd"}
    assert admission.KEPT not in out.warnings


def test_a_strategy_a_replace_reset_to_the_api_defaults_is_decided_again_with_the_kept_template() -> None:
    policies = _policies(SPREAD)
    old = _create(_web(), policies)
    assert old["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    new = copy.deepcopy(old)
    new["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    out = _update(new, old, policies)
    assert _template(out.object) == _template(old)
    assert out.object["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


def test_policies_held_by_a_kept_template_do_not_touch_the_strategy_either() -> None:
    old = _create(_web(), _policies(ZONE_A))
    new = _scaled(old, 4)
    out = _update(new, old, _policies(ZONE_A, SPREAD))
    assert out.patch == [] and "strategy" not in out.object["spec"]
    assert out.audited == ["spread"]


def test_the_output_of_a_kept_update_is_settled() -> None:
    old = _create(_web(), _policies(ZONE_A))
    out = _update(copy.deepcopy(_web()), old, _policies(ZONE_B))
    again = _update(copy.deepcopy(out.object), old, _policies(ZONE_B))
    assert again.patch == []


def test_with_no_policy_left_the_engines_fields_are_still_written_back() -> None:
    manifest = _web()
    old = _create(manifest, _policies(ZONE_A))
    out = _update(copy.deepcopy(manifest), old, PolicySet(()))
    assert _template(out.object) == _template(old) and out.result == "patched"


def test_policies_that_never_settle_on_a_kept_template_leave_it_kept_and_say_so() -> None:
    def toggle(obj: dict[str, Any], **_: Any) -> placement.Applied:
        pod = obj["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"flip": "b" if (pod.get("nodeSelector") or {}).get("flip") == "a" else "a"}
        return placement.Applied(changed=True, warnings=[])

    # Rollouts: admission passes until settled. Each flipper undoes the one before it, so three
    # never settle (a lone one undoing its own output is no policy of the real engine).
    flippers = [policy(f"flipper-{i}", order=i, rollout={"mode": "safe"}) for i in (1, 2, 3)]
    old = _web()
    request = review.request_for_object(_scaled(old, 4), operation="UPDATE", old_object=old)
    out = admission.admit(request, policies=policy_set(*flippers), steps=admission.Steps(apply=toggle))
    assert (out.result, out.patch) == ("unchanged", [])
    assert out.warnings[0] == admission.KEPT and any("never settle" in w for w in out.warnings)


@pytest.mark.parametrize("kind", [("apps", "StatefulSet"), ("apps", "DaemonSet"), ("kubevirt.io", "VirtualMachine"),
                                  ("pool.kubevirt.io", "VirtualMachinePool")])
def test_every_kind_whose_template_rolls_its_pods_keeps_it(kind: tuple[str, str]) -> None:
    target = BUILTIN.lookup(*kind)
    assert target is not None
    old = _create(workload(target), _policies(ZONE_A))
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "web"}
    out = _update(new, old, _policies(ZONE_B))
    path = target.pod_metadata[:-1]
    assert get_path(out.object, path) == get_path(old, path)


@pytest.mark.parametrize("kind", [("apps", "ReplicaSet"), ("batch", "CronJob"),
                                  ("kubevirt.io", "VirtualMachineInstanceReplicaSet")])
def test_a_kind_whose_template_only_stamps_its_next_pods_is_placed_on_update_as_before(kind: tuple[str, str]) -> None:
    target = BUILTIN.lookup(*kind)
    assert target is not None
    old = _create(workload(target), _policies(ZONE_A))
    out = _update(copy.deepcopy(old), old, _policies(ZONE_B))
    assert out.applied == ["zone-b"] and admission.KEPT not in out.warnings


# ---------------------------------------------------------------- the property

ROLLING = ("Deployment", "StatefulSet", "DaemonSet")


@st.composite
def removals(draw: st.DrawFn, template: dict[str, Any], owned: list[tuple[str, ...]]) -> dict[str, Any]:
    """``template`` with some of what the engine's fields hold left out, as a replace or a
    server-side apply of a manifest without them leaves it. Copied as JSON, as the API server
    sends it: an admitted object may hold one requirement in two terms (engine.working), and a
    deepcopy would keep them one, so thinning one would thin both."""
    template = copy_json(template)
    for path in owned:
        parent = get_path(template, path[:-1])
        if not isinstance(parent, dict) or path[-1] not in parent:
            continue
        choice = draw(st.sampled_from(["keep", "drop", "thin"]))
        if choice == "drop":
            del parent[path[-1]]
        elif choice == "thin":
            _thin(parent[path[-1]], draw)
    return template


def _thin(value: Any, draw: st.DrawFn) -> None:
    if isinstance(value, dict):
        for key in list(value):
            if draw(st.booleans()):
                del value[key]
            else:
                _thin(value[key], draw)
    elif isinstance(value, list):
        for index in reversed(range(len(value))):
            if draw(st.booleans()):
                del value[index]


non_template_edits = st.fixed_dictionaries({}, optional={
    "replicas": st.integers(0, 7),
    "annotation": st.sampled_from(["kubectl.kubernetes.io/last-applied-configuration", "team.example.com/owner"]),
    "label": st.just("tier"),
    "drop_applied": st.just(True),
    "strategy": st.sampled_from([{"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                                 {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 1}}]),
})


def _edited(obj: dict[str, Any], edits: dict[str, Any]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    if "replicas" in edits and obj["kind"] != "DaemonSet":
        obj["spec"]["replicas"] = edits["replicas"]
    if "annotation" in edits:
        meta.setdefault("annotations", {})[edits["annotation"]] = "x"
    if "label" in edits:
        meta.setdefault("labels", {})[edits["label"]] = "web"
    if edits.get("drop_applied"):
        (meta.get("annotations") or {}).pop(ANNOTATION_APPLIED, None)
    if "strategy" in edits and obj["kind"] == "Deployment":
        obj["spec"]["strategy"] = copy.deepcopy(edits["strategy"])
    return obj


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), obj=workloads().filter(lambda o: o["kind"] in ROLLING),
       before=st.lists(policy_specs, min_size=1, max_size=3), after=st.lists(policy_specs, max_size=3),
       edits=non_template_edits)
def test_an_update_that_keeps_the_template_but_for_the_engines_fields_never_changes_its_hash(
    data: st.DataObject, obj: dict[str, Any], before: list[dict[str, Any]], after: list[dict[str, Any]],
    edits: dict[str, Any],
) -> None:
    old = admission.admit(review.request_for_object(obj, namespace="prod"), policies=load_policies(before)).object
    assert old is not None
    target = target_of(old)
    owned = [field[2:] for field in template_fields(target)]  # below spec.template
    new = _edited(copy_json(old), edits)
    new["spec"]["template"] = data.draw(removals(old["spec"]["template"], owned))
    request = review.request_for_object(new, operation="UPDATE", old_object=old, namespace="prod")
    out = admission.admit(request, policies=load_policies(after))
    assert out.result in ("patched", "unchanged"), out.warnings
    assert out.object is not None and jsonpatch.apply_patch(new, out.patch) == out.object
    assert template_hash(out.object["spec"]["template"]) == template_hash(old["spec"]["template"])
    assert out.object["spec"]["template"] == old["spec"]["template"]
    again = review.request_for_object(copy.deepcopy(out.object), operation="UPDATE", old_object=old, namespace="prod")
    assert admission.admit(again, policies=load_policies(after)).patch == [], "a second admission changes nothing"
