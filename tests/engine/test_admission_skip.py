"""The skip annotation is governed by the policy: ``placement.novasphere.dev/skip: "true"``
opts an object out of the policies that allow it (``spec.allowSkip``, default true); a policy
with ``allowSkip: false`` (data residency, say) still applies, and says the skip was refused."""
from __future__ import annotations

from typing import Any

from tests.kit.engine import FAKE
from tests.kit.policies import policy, policy_set
from tests.kit.workloads import deployment
from webhook import ANNOTATION_APPLIED, ANNOTATION_SKIP
from webhook.engine import admission, review
from webhook.files import documents
from webhook.policy import loader
from webhook.policy.policyset import PolicySet

SKIP = {ANNOTATION_SKIP: "true"}
SKIPPED = f"{ANNOTATION_SKIP}=true: placement policies skipped"
REFUSED = f"residency: {ANNOTATION_SKIP} refused: the policy has allowSkip: false"
ZONE = policy("zone", order=1, placement={"nodeSelector": {"zone": "a"}})
RESIDENCY = policy("residency", order=2, allowSkip=False, placement={"nodeSelector": {"region": "eu"}})


def _admit(obj: dict[str, Any], policies: PolicySet, *, steps: admission.Steps = FAKE, **kw: Any) -> admission.Outcome:
    return admission.admit(review.request_for_object(obj, **kw), policies=policies, steps=steps)


def _node_selector(obj: dict[str, Any]) -> Any:
    return obj["spec"]["template"]["spec"].get("nodeSelector")


def test_a_policy_that_refuses_the_skip_still_applies_and_says_the_skip_was_refused() -> None:
    out = _admit(deployment(annotations=SKIP), policy_set(ZONE, RESIDENCY))
    assert out.result == "patched" and out.applied == ["residency"]
    assert _node_selector(out.object) == {"region": "eu"}, "the policy that allows the skip is skipped"
    assert REFUSED in out.warnings
    assert out.object["metadata"]["annotations"][ANNOTATION_APPLIED] == "residency"


def test_policies_allow_the_skip_unless_they_say_otherwise() -> None:
    out = _admit(deployment(annotations=SKIP), policy_set(ZONE, policy("disk", placement={"nodeSelector": {"d": "1"}})))
    assert (out.result, out.patch, out.warnings) == ("skipped", [], [SKIPPED])


def test_an_object_without_the_annotation_gets_every_policy_and_no_refusal() -> None:
    out = _admit(deployment(), policy_set(ZONE, RESIDENCY))
    assert out.applied == ["residency", "zone"]
    assert not any("refused" in w for w in out.warnings)


def test_a_refusing_policy_that_does_not_select_the_object_leaves_the_skip_whole() -> None:
    elsewhere = policy("residency", allowSkip=False, match={"namespaces": ["team-eu-*"]},
                       placement={"nodeSelector": {"region": "eu"}})
    out = _admit(deployment(annotations=SKIP), policy_set(ZONE, elsewhere))
    assert (out.result, out.patch, out.warnings) == ("skipped", [], [SKIPPED])


def test_a_refusing_policy_with_nothing_left_to_do_still_says_it_refused() -> None:
    placed = deployment(annotations={**SKIP, ANNOTATION_APPLIED: "residency"},
                        pod_spec={"containers": [{"name": "app", "image": "nginx"}], "nodeSelector": {"region": "eu"}})
    out = _admit(placed, policy_set(ZONE, RESIDENCY))
    assert (out.result, out.patch) == ("unchanged", [])
    assert out.warnings == [REFUSED]


def test_a_refusing_audit_policy_audits_the_skipped_object() -> None:
    shadow = policy("residency", allowSkip=False, enforcement="audit", placement={"nodeSelector": {"region": "eu"}})
    out = _admit(deployment(annotations=SKIP), policy_set(shadow))
    assert (out.result, out.patch, out.audited) == ("unchanged", [], ["residency"])
    assert REFUSED in out.warnings


RESIDENCY_YAML = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: residency}
spec:
  allowSkip: false
  match: {kinds: [Deployment]}
  placement:
    nodeAffinity:
      required: [{matchExpressions: [{key: topology.kubernetes.io/region, operator: In, values: [eu-west-1]}]}]
---
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: ssd}
spec:
  placement: {nodeSelector: {disktype: ssd}}
"""


def test_allow_skip_false_from_a_policy_file_keeps_the_policy_in_force_with_the_real_engine() -> None:
    policies = loader.load_documents(documents.load_text(RESIDENCY_YAML, file="<test>"))
    out = _admit(deployment(annotations=SKIP), policies, steps=admission.ENGINE)
    assert out.result == "patched" and out.applied == ["residency"]
    pod_spec = out.object["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod_spec
    assert pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west-1"]}]}]
    assert REFUSED in out.warnings
