"""admit() with the real loader and engine: the merge and odd-input scenarios of the docs, end to end."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from webhook import ANNOTATION_APPLIED, codec
from webhook.engine import admission, patching, review
from webhook.files import documents
from webhook.policy import loader
from webhook.policy.policyset import PolicySet

ROOT = Path(__file__).resolve().parents[2]

AVOID = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: avoid-maintenance}
spec:
  order: 1
  placement:
    nodeAntiAffinity:
      required: [{matchExpressions: [{key: maintenance, operator: In, values: ["true"]}]}]
"""
SPREAD_AUDIT = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: spread-shadow}
spec:
  order: 2
  enforcement: audit
  placement:
    podAntiAffinity: {spread: required}
"""


def _policies(*texts: str) -> PolicySet:
    return loader.load_documents(documents.load_text("---\n".join(texts), file="<test>"))


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "annotations": {"example.com/team": "payments"}},
        "spec": {
            "selector": {"matchLabels": {"app": "api"}},
            "template": {
                "metadata": {"labels": {"app": "api"}},
                "spec": {
                    "containers": [{"name": "api", "image": "api:1"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                                ]
                            }
                        }
                    },
                },
            },
        },
    }


def _admit(obj: dict[str, Any], policies: PolicySet) -> admission.Outcome:
    return admission.admit(review.request_for_object(obj), policies=policies)


def test_existing_multi_term_required_affinity_is_anded_term_by_term() -> None:
    out = _admit(_deployment(), _policies(AVOID))
    terms = out.object["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    maintenance = {"key": "maintenance", "operator": "NotIn", "values": ["true"]}
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["a"], ["b"]]
    assert all(maintenance in t["matchExpressions"] for t in terms)
    ops = {op["path"] for op in out.patch}
    assert "/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/1" in ops


def test_audit_policy_with_the_real_engine_changes_nothing_and_says_what_it_would_add() -> None:
    out = _admit(_deployment(), _policies(AVOID, SPREAD_AUDIT))
    assert out.applied == ["avoid-maintenance"] and out.audited == ["spread-shadow"]
    assert "podAntiAffinity" not in out.object["spec"]["template"]["spec"]["affinity"]
    assert any(w.startswith("spread-shadow: audit: would add /spec/template/spec/affinity/podAntiAffinity") for w in out.warnings)


def test_the_applied_annotation_goes_next_to_existing_keys_with_slashes() -> None:
    obj = _deployment()
    out = _admit(copy.deepcopy(obj), _policies(AVOID))
    assert out.object["metadata"]["annotations"] == {"example.com/team": "payments", ANNOTATION_APPLIED: "avoid-maintenance"}
    assert {"op": "add", "path": "/metadata/annotations/placement.novasphere.dev~1applied", "value": "avoid-maintenance"} in out.patch
    assert jsonpatch.apply_patch(obj, out.patch) == out.object


def test_a_second_pass_is_empty_and_an_update_of_the_output_is_too() -> None:
    policies = _policies(AVOID, SPREAD_AUDIT)
    first = _admit(_deployment(), policies)
    assert _admit(copy.deepcopy(first.object), policies).patch == []
    update = admission.admit(review.request_for_object(copy.deepcopy(first.object), operation="UPDATE", old_object=first.object), policies=policies)
    assert update.patch == [] and update.result == "unchanged"


def test_a_review_round_trip_through_the_wire_format() -> None:
    body = (ROOT / "examples" / "review-deployment-v1.json").read_bytes()
    request = review.parse(body)
    out = admission.admit(request, policies=loader.load([ROOT / "policies"]))
    answer = review.respond(request, patch=codec.dumps(out.patch) if out.patch else b"", warnings=out.warnings)
    original = json.loads(body)["request"]["object"]
    patch = patching.decode(answer["response"]["patch"])
    assert jsonpatch.apply_patch(original, patch) == out.object
    assert answer["response"]["uid"] == request.uid and answer["apiVersion"] == "admission.k8s.io/v1"


def test_shipped_policies_leave_a_non_workload_review_alone() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    out = _admit(service, loader.load([ROOT / "policies"]))
    assert (out.result, out.patch, out.warnings) == ("ignored", [], [])


def test_every_example_manifest_is_mutated_idempotently_by_the_shipped_policies() -> None:
    policies = loader.load([ROOT / "policies"])
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            out = _admit(copy.deepcopy(obj), policies)
            assert out.result == "patched", path.name
            assert jsonpatch.apply_patch(obj, out.patch) == out.object
            assert _admit(copy.deepcopy(out.object), policies).patch == [], path.name


SAFE_SPREAD = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: a-spread}
spec:
  order: 1
  placement:
    podAntiAffinity: {spread: required}
  rollout: {mode: safe}
"""
PIN_TO_UNKNOWN_NODES = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: b-pin}
spec:
  order: 2
  placement:
    nodeSelector: {disk: nvme}
"""


def _nodes(count: int) -> Any:
    from webhook.cluster.view import StaticClusterView

    return StaticClusterView(
        nodes=[
            {"kind": "Node", "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}}}
            for i in range(count)
        ],
        match_label_keys=False,
    )


def test_a_policy_that_depends_on_a_later_one_is_settled_in_the_same_admission() -> None:
    # Pass 1: the rollout sees 4 eligible nodes and surges; then b-pin leaves no node
    # eligible. Pass 2 re-decides the rollout for the pinned pod: no surge, so no deadlock.
    policies, cluster = _policies(SAFE_SPREAD, PIN_TO_UNKNOWN_NODES), _nodes(4)
    first = admission.admit(review.request_for_object(_deployment()), policies=policies, cluster=cluster)
    assert first.object["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    again = admission.admit(review.request_for_object(first.object), policies=policies, cluster=cluster)
    assert again.patch == []


def test_policies_that_keep_undoing_each_other_fail_open_with_a_warning() -> None:
    flip = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: %s}
spec:
  order: %d
  onConflict: replace
  placement:
    nodeSelector: {disk: %s}
"""
    out = _admit(_deployment(), _policies(flip % ("p-ssd", 1, "ssd"), flip % ("p-hdd", 2, "hdd")))
    # replace + replace on one field group: the last one wins each pass, so it settles.
    assert out.result == "patched"
    assert out.object["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "hdd"}
    assert _admit(out.object, _policies(flip % ("p-ssd", 1, "ssd"), flip % ("p-hdd", 2, "hdd"))).patch == []


def test_a_policy_that_cannot_be_applied_is_reported_as_failed_and_leaves_no_trace() -> None:
    many_terms = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": [f"z{i}"]}]} for i in range(9)
        ]
    }
    anti = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: avoid-many}
spec:
  placement:
    nodeAntiAffinity:
      required:
      - matchExpressions:
%s
"""
    expressions = "\n".join(f"        - {{key: k{i}, operator: Gt, values: ['1']}}" for i in range(4))
    obj = _deployment()
    obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = many_terms
    out = _admit(obj, _policies(anti % expressions, AVOID))
    assert out.failed == ["avoid-many"]
    assert any("avoid-many: not applied" in w for w in out.warnings)
    assert out.applied == ["avoid-maintenance"]  # the others still apply
    assert jsonpatch.apply_patch(obj, out.patch) == out.object


def test_an_update_of_a_running_pod_is_not_mutated_because_its_placement_is_immutable() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    created = admission.admit(review.request_for_object(pod), policies=_policies(AVOID))
    assert created.result == "patched"
    updated = admission.admit(
        review.request_for_object(pod, operation="UPDATE", old_object=pod), policies=_policies(AVOID)
    )
    assert (updated.result, updated.patch) == ("ignored", [])
    assert "immutable" in updated.reason


ZONE_B = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: zone-b}
spec:
  placement:
    nodeAffinity:
      required: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [b]}]}]
"""


def _zone_a_deployment() -> dict[str, Any]:
    obj = _deployment()
    term = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}
    obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [term]
    }
    return obj


def test_a_merge_that_leaves_required_node_affinity_unsatisfiable_is_a_warning() -> None:
    out = _admit(_zone_a_deployment(), _policies(ZONE_B))
    assert out.result == "patched"  # the API server would accept it; the pods would stay Pending
    assert any("required node affinity can match no node" in w and "zone In [a]" in w for w in out.warnings), out.warnings
    assert all(len(w) < 120 for w in out.warnings)


def test_a_merge_that_keeps_one_satisfiable_term_names_the_dead_one() -> None:
    obj = _zone_a_deployment()
    terms = obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms["nodeSelectorTerms"].append({"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]})
    out = _admit(obj, _policies(ZONE_B))
    assert any(w.startswith("zone-b: required node affinity term 0 (") for w in out.warnings), out.warnings


JOB_POLICIES = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: ssd}
spec:
  match: {kinds: [Job, CronJob]}
  placement:
    nodeSelector: {disk: ssd}
"""
JOB_SPREAD = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: spread}
spec:
  match: {kinds: [Job]}
  placement:
    podAntiAffinity: {spread: preferred}
"""


def _job(*, suspend: bool | None = None, started: bool = False) -> dict[str, Any]:
    job: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch", "namespace": "prod"},
        "spec": {"template": {"metadata": {"labels": {"app": "batch"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}},
    }
    if suspend is not None:
        job["spec"]["suspend"] = suspend
    if started:
        job["status"] = {"startTime": "2026-11-23T10:00:00Z"}
    return job


def _update(obj: dict[str, Any], old: dict[str, Any], policies: PolicySet) -> admission.Outcome:
    return admission.admit(review.request_for_object(obj, operation="UPDATE", old_object=old), policies=policies)


def test_a_running_jobs_pod_template_is_never_patched_on_update() -> None:
    # validatePodTemplateUpdate: the template is immutable; a patch would fail the user's update.
    out = _update(_job(), _job(), _policies(JOB_POLICIES))
    assert (out.result, out.patch) == ("ignored", [])
    assert "pod template of a Job is immutable" in out.reason


def test_a_suspended_job_that_never_started_may_get_its_scheduling_directives_on_update() -> None:
    out = _update(_job(suspend=True), _job(suspend=True), _policies(JOB_POLICIES))
    assert out.result == "patched"
    assert out.object is not None and out.object["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}


def test_a_suspended_job_that_already_started_is_not_patched_on_update() -> None:
    out = _update(_job(suspend=True, started=True), _job(suspend=True, started=True), _policies(JOB_POLICIES))
    assert (out.result, out.patch) == ("ignored", [])


def test_a_suspended_jobs_template_gets_nothing_beyond_its_scheduling_directives() -> None:
    # Pod anti-affinity is not among the fields a suspended Job may change.
    out = _update(_job(suspend=True), _job(suspend=True), _policies(JOB_SPREAD))
    assert (out.result, out.patch) == ("unchanged", [])
    assert any("may change only in node affinity, nodeSelector and tolerations" in w for w in out.warnings)


def test_a_job_is_placed_on_create_and_a_cronjob_template_on_update_too() -> None:
    assert _admit(_job(), _policies(JOB_POLICIES)).result == "patched"
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "prod"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}}
    assert _update(cron, copy.deepcopy(cron), _policies(JOB_POLICIES)).result == "patched"


def test_a_scale_subresource_review_is_ignored_as_a_subresource_not_as_an_unknown_kind() -> None:
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "prod"},
             "spec": {"replicas": 3}}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "subResource": "scale",
        "namespace": "prod", "name": "web", "operation": "UPDATE", "object": scale, "oldObject": scale}}
    out = admission.admit(review.parse(body), policies=_policies(JOB_POLICIES))
    assert (out.result, out.reason) == ("ignored", "subresource scale is not mutated")


def test_an_object_without_an_api_version_is_said_to_have_none() -> None:
    out = _admit({"kind": "Deployment", "metadata": {"name": "web"}}, _policies(JOB_POLICIES))
    assert (out.result, out.reason) == ("ignored", "the Deployment has no apiVersion")


def test_a_replace_policy_before_a_merge_policy_on_the_same_group_is_settled_in_one_admission() -> None:
    # Found by the idempotency property: the replace wipes what the merge adds, so only a
    # settled first admission leaves nothing for the second to change (not even `applied`).
    replace = ("apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p0}\n"
               "spec: {order: 0, onConflict: replace, placement: {nodeSelector: {pool: a}}}\n")
    merge = ("apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p1}\n"
             "spec: {order: 1, placement: {nodeSelector: {zone: a}}}\n")
    policies = _policies(replace, merge)
    obj = _deployment()
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "a"}
    first = _admit(obj, policies)
    second = _admit(copy.deepcopy(first.object), policies)
    assert second.patch == []
    assert first.object is not None and first.object["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a", "zone": "a"}


def _rollout_policies(spread_order: int, selector_order: int) -> PolicySet:
    spread = ("apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: spread}\n"
              f"spec: {{order: {spread_order}, placement: {{podAntiAffinity: {{spread: required}}}}, "
              "rollout: {mode: safe}}\n")
    ssd = ("apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: ssd}\n"
           f"spec: {{order: {selector_order}, placement: {{nodeSelector: {{disk: ssd}}}}}}\n")
    return _policies(spread, ssd)


@pytest.mark.parametrize(("spread_order", "selector_order"), [(1, 2), (2, 1)])
def test_the_rollout_is_decided_on_the_object_as_the_whole_set_leaves_it(spread_order: int, selector_order: int) -> None:
    # Three nodes, two with SSDs, two replicas: counted before the nodeSelector there is a spare
    # node (surge 1); after it there is none, and a surge pod would never schedule.
    from webhook.cluster.view import StaticClusterView

    nodes = [{"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, **({"disk": "ssd"} if n != "c" else {})}}}
             for n in ("a", "b", "c")]
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}}
    out = admission.admit(review.request_for_object(obj), policies=_rollout_policies(spread_order, selector_order),
                          cluster=StaticClusterView(nodes=nodes))
    assert out.object is not None
    assert out.object["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    # One warning, the settled decision's: not the first pass's "maxSurge 1" beside it.
    assert [w for w in out.warnings if "rollout:" in w] == [
        "spread: rollout: maxSurge 0, maxUnavailable 1 (required self anti-affinity, not enough kubernetes.io/hostname "
        "domains)"
    ]
