"""admission.admit orchestration: guard clauses, order, audit mode, failures, the applied annotation.

These tests use a fake engine (nodeSelector keys set when absent) so they pin admission's
own behaviour; test_admission_engine.py runs the real engine.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any

import jsonpatch
import pytest

from tests.kit.engine import FAKE, fake_apply
from tests.kit.policies import policy, policy_set
from tests.kit.workloads import deployment
from webhook import ANNOTATION_APPLIED, ANNOTATION_SKIP
from webhook.engine import admission, matching, placement, review, working
from webhook.kube.affinity import REQUIRED
from webhook.kube.kinds import BUILTIN
from webhook.policy.policyset import PolicySet

ZONE = policy("zone", order=1, placement={"nodeSelector": {"zone": "a"}})
DISK = policy("disk", order=2, placement={"nodeSelector": {"disk": "ssd"}})


def _admit(obj: dict[str, Any], policies: PolicySet | None = None, **kw: Any) -> admission.Outcome:
    req = review.request_for_object(obj, **kw)
    return admission.admit(req, policies=policies or policy_set(ZONE, DISK), steps=FAKE)


def _node_selector(obj: dict[str, Any]) -> Any:
    return obj["spec"]["template"]["spec"].get("nodeSelector")


def test_matching_policies_patch_the_object_and_are_recorded_sorted() -> None:
    obj = deployment()
    before = copy.deepcopy(obj)
    out = _admit(obj)
    assert out.result == "patched"
    assert _node_selector(out.object) == {"zone": "a", "disk": "ssd"}
    assert out.applied == ["disk", "zone"]
    assert out.object["metadata"]["annotations"] == {ANNOTATION_APPLIED: "disk,zone"}
    assert jsonpatch.apply_patch(before, out.patch) == out.object
    assert obj == before, "the request's object must not be mutated"


def test_the_applied_annotation_key_is_escaped_in_the_patch() -> None:
    out = _admit(deployment(annotations={"team.example.com/owner": "a"}))
    paths = [op["path"] for op in out.patch]
    assert "/metadata/annotations/placement.novasphere.dev~1applied" in paths


def test_the_applied_annotation_is_the_sorted_union_with_names_already_there() -> None:
    obj = deployment(annotations={ANNOTATION_APPLIED: "zzz, alpha"})
    out = _admit(obj)
    assert out.object["metadata"]["annotations"][ANNOTATION_APPLIED] == "alpha,disk,zone,zzz"


def test_an_object_with_no_labels_annotations_or_metadata_is_patched() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": []}}}}
    out = _admit(obj)
    assert out.result == "patched"
    assert out.object["metadata"] == {"annotations": {ANNOTATION_APPLIED: "disk,zone"}}
    assert jsonpatch.apply_patch(obj, out.patch) == out.object


def test_a_second_pass_over_the_output_gives_an_empty_patch() -> None:
    first = _admit(deployment())
    second = _admit(first.object)
    assert second.patch == []
    assert second.result == "unchanged"
    assert second.applied == []
    assert second.object is first.object


def test_policies_run_in_order_and_each_sees_the_previous_ones_output() -> None:
    early = policy("b-early", order=1, placement={"nodeSelector": {"zone": "a"}})
    late = policy("a-late", order=5, placement={"nodeSelector": {"zone": "b", "rack": "1"}})
    out = _admit(deployment(), policy_set(late, early))
    assert _node_selector(out.object) == {"zone": "a", "rack": "1"}
    assert out.warnings == ["b-early: set nodeSelector ['zone']", "a-late: set nodeSelector ['rack']"]


def test_a_policy_that_changes_nothing_is_not_recorded() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    out = _admit(obj)
    assert out.applied == ["disk"]


def test_policies_that_do_not_match_are_left_out() -> None:
    only_dev = policy("dev-only", match={"namespaces": ["dev"]}, placement={"nodeSelector": {"x": "y"}})
    out = _admit(deployment(), policy_set(only_dev), namespace="prod")
    assert out.result == "unchanged" and out.patch == [] and out.applied == []


@pytest.mark.parametrize(
    ("request_kw", "reason"),
    [
        ({"operation": "DELETE"}, "operation DELETE is not mutated"),
        ({"operation": "CONNECT"}, "operation CONNECT is not mutated"),
        ({"sub_resource": "scale", "operation": "UPDATE"}, "subresource scale is not mutated"),
        ({"kind": "Service", "group": "", "version": "v1"}, "kind Service is not a workload kind"),
        ({"kind": "CronTab", "group": "stable.example.com"}, "kind stable.example.com/CronTab is not"),
        ({"object": None}, "no object"),
    ],
)
def test_requests_admission_does_not_mutate_are_ignored_with_a_reason(request_kw: dict[str, Any], reason: str) -> None:
    req = dataclasses.replace(review.request_for_object(deployment()), **request_kw)
    out = admission.admit(req, policies=policy_set(ZONE), steps=FAKE)
    assert out.result == "ignored"
    assert out.patch == [] and out.warnings == []
    assert reason in out.reason


@pytest.mark.parametrize("value", ["true", "True", " TRUE "])
def test_the_skip_annotation_skips_every_policy_with_a_warning(value: str) -> None:
    out = _admit(deployment(annotations={ANNOTATION_SKIP: value}))
    assert out.result == "skipped"
    assert out.patch == []
    assert out.warnings == [f"{ANNOTATION_SKIP}=true: placement policies skipped"]


@pytest.mark.parametrize("value", ["false", "", "yes"])
def test_other_skip_values_do_not_skip(value: str) -> None:
    assert _admit(deployment(annotations={ANNOTATION_SKIP: value})).result == "patched"


def test_audit_mode_changes_nothing_but_says_what_it_would_do() -> None:
    audit = policy("shadow", enforcement="audit", placement={"nodeSelector": {"gpu": "yes"}})
    obj = deployment()
    out = _admit(obj, policy_set(audit))
    assert out.result == "unchanged" and out.patch == [] and out.object is obj
    assert out.applied == [] and out.audited == ["shadow"]
    assert "(audit) shadow: set nodeSelector ['gpu']" in out.warnings
    assert "shadow: audit: would add /spec/template/spec/nodeSelector" in out.warnings


def test_audit_mode_sees_the_enforced_policies_before_it_but_later_ones_do_not_see_it() -> None:
    audit = policy("shadow", order=1, enforcement="audit", placement={"nodeSelector": {"zone": "b", "gpu": "yes"}})
    late = policy("late", order=2, placement={"nodeSelector": {"gpu": "no"}})
    out = _admit(deployment(), policy_set(ZONE, audit, late))
    assert _node_selector(out.object) == {"zone": "a", "gpu": "no"}
    assert out.audited == ["shadow"] and out.applied == ["late", "zone"]


def test_a_placement_error_is_a_warning_and_leaves_no_trace_of_that_policy() -> None:
    broken = policy("broken", order=2, placement={"nodeSelector": {"fail": "placement"}})
    late = policy("late", order=3, placement={"nodeSelector": {"rack": "1"}})
    out = _admit(deployment(), policy_set(ZONE, broken, late))
    assert out.result == "patched"
    assert _node_selector(out.object) == {"zone": "a", "rack": "1"}
    assert "broken: not applied: more than 64 required node selector terms" in out.warnings
    assert out.applied == ["late", "zone"]


def test_an_unexpected_engine_exception_fails_open_without_a_patch() -> None:
    crash = policy("crash", order=2, placement={"nodeSelector": {"fail": "crash"}})
    obj = deployment()
    out = _admit(obj, policy_set(ZONE, crash))
    assert out.result == "error"
    assert out.patch == [] and out.object is obj
    assert out.error == "KeyError: 'boom'"
    assert out.warnings and out.warnings[0].startswith("placement-webhook: internal error")


def test_admit_never_raises_even_when_matching_fails() -> None:
    steps = dataclasses.replace(FAKE, selects=lambda *a, **k: 1 / 0)
    out = admission.admit(review.request_for_object(deployment()), policies=policy_set(ZONE), steps=steps)
    assert out.result == "error" and "ZeroDivisionError" in str(out.error)


def test_namespace_selector_without_cluster_view_is_noted_as_a_warning() -> None:
    p = policy("by-ns-label", match={"namespaceSelector": {"matchLabels": {"env": "prod"}}}, placement={"nodeSelector": {"a": "b"}})
    out = _admit(deployment(), policy_set(p))
    assert out.result == "unchanged"
    assert out.warnings == ["by-ns-label: namespaceSelector needs namespace labels; no cluster view is configured"]


def test_every_warning_is_under_120_characters() -> None:
    chatty = policy("chatty", placement={"nodeSelector": {"k" * 200: "v"}})
    out = _admit(deployment(), policy_set(chatty))
    assert out.warnings and all(len(w) < 120 for w in out.warnings)


def test_the_working_copy_shares_containers_but_not_placement_fields() -> None:
    obj = deployment()
    copy_ = working.working_copy(obj)
    assert copy_ == obj
    assert copy_["spec"]["template"]["spec"]["containers"] is obj["spec"]["template"]["spec"]["containers"]
    assert copy_["spec"]["template"]["spec"] is not obj["spec"]["template"]["spec"]
    assert copy_["metadata"] is not obj["metadata"]


def test_the_working_copy_of_a_kind_copies_only_what_the_engine_writes() -> None:
    obj = deployment(annotations={"a": "b"})
    obj["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {}}
    target = BUILTIN.lookup("apps", "Deployment")
    copy_ = working.working_copy(obj, target)
    assert copy_ == obj
    pod, orig_pod = copy_["spec"]["template"]["spec"], obj["spec"]["template"]["spec"]
    assert pod is not orig_pod and pod["affinity"] is not orig_pod["affinity"]
    assert pod["containers"] is orig_pod["containers"]
    assert copy_["metadata"]["annotations"] is not obj["metadata"]["annotations"]
    assert copy_["spec"]["selector"] is obj["spec"]["selector"]  # never written


def test_the_working_copy_copies_owned_lists_but_shares_their_entries() -> None:
    # The engine replaces or appends list entries, never edits one: sharing them keeps the
    # copy cheap and lets the differ skip every entry the policies left alone.
    obj = deployment()
    pod = obj["spec"]["template"]["spec"]
    pod["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    pod["affinity"] = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}}
    copy_ = working.working_copy(obj, BUILTIN.lookup("apps", "Deployment"))
    assert copy_ == obj
    copied_pod = copy_["spec"]["template"]["spec"]
    assert copied_pod["tolerations"] is not pod["tolerations"]
    assert copied_pod["tolerations"][0] is pod["tolerations"][0]
    copied_terms = copied_pod["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    assert copied_pod["affinity"]["nodeAffinity"][REQUIRED] is not pod["affinity"]["nodeAffinity"][REQUIRED]
    assert copied_terms is not terms and copied_terms[0] is terms[0]


def test_a_pass_that_grows_what_the_previous_pass_added_is_not_taken_for_a_settled_one() -> None:
    def grow(obj: dict, *, policy: Any, target: Any, cluster: Any, **_: Any) -> placement.Applied:
        # One toleration more per pass, edited into the list the previous pass added, up to three.
        tolerations = obj["spec"]["template"]["spec"].setdefault("tolerations", [])
        if policy.name != "grower" or len(tolerations) == 3:
            return placement.Applied(changed=False)
        tolerations.append({"key": f"t{len(tolerations)}", "operator": "Exists"})
        return placement.Applied(changed=True)

    # A rollout reads other policies' output: admission passes until the object settles. The
    # grower changes its own output, which no policy of the real engine does, and which
    # admission relies on to stop after one pass (``settled_early``): that is turned off here.
    policies = policy_set(policy("grower", order=1, rollout={"mode": "safe"}), policy("b", order=2),
                          policy("c", order=3))
    obj = deployment()
    steps = admission.Steps(apply=grow, settle_early=False)
    out = admission.admit(review.request_for_object(obj), policies=policies, steps=steps)
    assert out.result == "patched" and out.object is not None
    assert [t["key"] for t in out.object["spec"]["template"]["spec"]["tolerations"]] == ["t0", "t1", "t2"]
    assert jsonpatch.apply_patch(obj, out.patch) == out.object
    assert "tolerations" not in obj["spec"]["template"]["spec"]


def test_outcome_result_is_one_of_the_documented_values() -> None:
    results: set[str] = set()
    for obj in (deployment(), deployment(annotations={ANNOTATION_SKIP: "true"}), {"apiVersion": "v1", "kind": "Service"}):
        results.add(_admit(obj).result)
    assert results <= set(admission.RESULTS)
    assert results == {"patched", "skipped", "ignored"}



def test_policies_that_never_settle_fail_open_with_an_error_naming_them() -> None:
    def toggle(obj: dict, *, policy: Any, target: Any, cluster: Any, **_: Any) -> placement.Applied:
        # Each pass flips the value: a set with no fixed point.
        pod = obj["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"flip": "b" if (pod.get("nodeSelector") or {}).get("flip") == "a" else "a"}
        return placement.Applied(changed=True, warnings=[])

    # Rollouts read other policies' output, so admission keeps passing until it settles. Each
    # flipper undoes the one before it: three of them never settle. (A lone policy that undid
    # its own output would break the engine's idempotency, which admission relies on to stop
    # after a pass whose last change no reader saw before: ``settled_early``.)
    flippers = [policy(f"flipper-{i}", order=i, rollout={"mode": "safe"}) for i in (1, 2, 3)]
    out = admission.admit(review.request_for_object(deployment()), policies=policy_set(*flippers),
                          steps=admission.Steps(apply=toggle))
    assert (out.result, out.patch) == ("error", [])
    assert out.error and "flipper-1, flipper-2, flipper-3" in out.error
    assert any("never settle" in w for w in out.warnings)


def test_a_policy_failing_in_the_settling_pass_leaves_the_answer_consistent() -> None:
    # Pass 1: "ok" applies and "fail-late" is not yet matched... both run every pass; the
    # failing one fails in pass 1 after "ok" changed the object, then pass 2 settles.
    policies = policy_set(
        policy("ok", order=1, placement={"nodeSelector": {"disk": "ssd"}}),
        policy("fail-late", order=2, placement={"nodeSelector": {"fail": "placement"}}),
    )
    obj = deployment()
    out = admission.admit(review.request_for_object(obj), policies=policies, steps=FAKE)
    assert out.failed == ["fail-late"] and out.applied == ["ok"]
    assert jsonpatch.apply_patch(obj, out.patch) == out.object
    assert out.object["metadata"]["annotations"][ANNOTATION_APPLIED] == "ok"


@pytest.mark.parametrize(
    ("spec", "passes"),
    [
        ({"placement": {"nodeSelector": {"disk": "ssd"}}}, 1),
        # replace rewrites what a later merge policy adds to the same group: it settles
        ({"placement": {"nodeSelector": {"disk": "ssd"}}, "onConflict": "replace"}, 2),
        # a lone reader saw every change (its own): its output is settled (``settled_early``)
        ({"placement": {"nodeSelector": {"disk": "ssd"}}, "rollout": {"mode": "safe"}}, 1),
        ({"placement": {"nodeSelector": {"disk": "ssd"}}, "scheduling": {"preemptionPolicy": "Never"}}, 1),
        ({"placement": {"nodeSelector": {"disk": "ssd"}}, "match": {"podSelector": {"matchLabels": {"app": "web"}}}}, 2),
    ],
)
def test_a_second_pass_runs_only_when_a_policy_reads_what_others_write(spec: dict[str, Any], passes: int) -> None:
    calls: list[str] = []

    def counting(obj: dict, **kw: Any) -> Any:
        calls.append(kw["policy"].name)
        return fake_apply(obj, **kw)

    p = policy("p", **spec)
    out = admission.admit(review.request_for_object(deployment()), policies=policy_set(p),
                          steps=admission.Steps(apply=counting))
    assert out.result == "patched"
    assert len(calls) == passes


def _counting_selects(asked: list[str]) -> Any:
    def selects(policy: Any, subject: Any) -> Any:
        asked.append(policy.name)
        return matching.selects(policy, subject)

    return selects


def test_a_policy_matching_on_nothing_the_engine_writes_is_asked_once_per_admission() -> None:
    # The rollout, before the policy that changes the object last, makes admission settle over
    # a second pass; neither policy's criteria read pod labels or annotations, so neither
    # verdict can change between the passes.
    policies = policy_set(policy("safe", order=1, placement={"nodeSelector": {"disk": "ssd"}}, rollout={"mode": "safe"}),
                          policy("zone", order=2, placement={"nodeSelector": {"zone": "a"}}))
    asked: list[str] = []
    calls: list[str] = []

    def counting(obj: dict, **kw: Any) -> Any:
        calls.append(kw["policy"].name)
        return fake_apply(obj, **kw)

    steps = admission.Steps(selects=_counting_selects(asked), apply=counting)
    out = admission.admit(review.request_for_object(deployment()), policies=policies, steps=steps)
    assert out.applied == ["safe", "zone"]
    assert calls == ["safe", "zone", "safe", "zone"]  # two passes ...
    assert asked == ["safe", "zone"]  # ... one question each


def test_a_policy_matching_on_a_pod_label_a_later_policy_writes_is_asked_again_in_the_next_pass() -> None:
    # "reader" cannot match in the first pass: the label it selects on is written after it
    # runs. A verdict kept from that pass, or one asked of the object as it was before the
    # label was written, would leave it out of the answer for good.
    reader = policy("reader", order=1, match={"podSelector": {"matchLabels": {"group": "web"}}},
                    placement={"nodeSelector": {"disk": "ssd"}})
    labeller = policy("labeller", order=2)

    def labelling(obj: dict, *, policy: Any, **kw: Any) -> placement.Applied:
        if policy.name != "labeller":
            return fake_apply(obj, policy=policy, **kw)
        template = obj["spec"]["template"]["metadata"]
        if (template.get("labels") or {}).get("group") == "web":
            return placement.Applied(changed=False)
        template["labels"] = {**(template.get("labels") or {}), "group": "web"}  # a new mapping
        return placement.Applied(changed=True)

    asked: list[str] = []
    steps = admission.Steps(selects=_counting_selects(asked), apply=labelling)
    obj = deployment()
    out = admission.admit(review.request_for_object(obj), policies=policy_set(reader, labeller), steps=steps)
    assert out.applied == ["labeller", "reader"]
    assert out.object is not None and _node_selector(out.object) == {"disk": "ssd"}
    assert jsonpatch.apply_patch(obj, out.patch) == out.object
    assert asked.count("reader") == 3 and asked.count("labeller") == 1  # the last pass changed nothing
