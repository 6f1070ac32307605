"""admit() with the real loader and engine: the scenarios SPEC 3.2 and 4.2 name, end to end."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from webhook import ANNOTATION_APPLIED, admission, loader, patching, review, yamlsrc
from webhook.policyset import PolicySet

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
    return loader.load_documents(yamlsrc.load_text("---\n".join(texts), file="<test>"))


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
    answer = review.respond(request, out)
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
