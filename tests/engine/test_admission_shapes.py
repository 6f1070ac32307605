"""Objects of the wrong shape, as no API server decodes but a client can send (and a CRD that keeps
unknown fields stores): admission leaves the policy out with a warning naming the field, as for any
other policy it cannot apply, and never fails with an internal error.

Found by the fault tier's flood (tests/faults/test_floods.py): each field of a Deployment replaced
by a value of each other JSON type.
"""
from __future__ import annotations

from typing import Any

import pytest

from tests.kit.e2e_workloads import workload
from tests.kit.malformed import WRONG_VALUES, paths, replaced
from webhook.engine import admission, review, shapes
from webhook.kube.affinity import REQUIRED
from webhook.policy import loader
from webhook.policy.policyset import PolicySet

from tests.conftest import POLICIES


def deployment() -> dict[str, Any]:
    obj = workload("Deployment", "web")
    pod = obj["spec"]["template"]["spec"]
    pod["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]},
    }
    pod["tolerations"] = [{"key": "k", "operator": "Exists"}]
    obj["metadata"]["labels"]["tier"] = "web"
    obj["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    return obj


def misshapen() -> list[tuple[str, dict[str, Any]]]:
    valid = deployment()
    cases = []
    for path in paths(valid):
        here: Any = valid
        for key in path:
            here = here[key]
        for wrong in WRONG_VALUES:
            if type(wrong) is not type(here):
                cases.append((f"/{'/'.join(map(str, path))} = {wrong!r}", replaced(valid, path, wrong)))
    return cases


@pytest.fixture(scope="module")
def shipped() -> PolicySet:
    return loader.load([POLICIES])


@pytest.mark.parametrize(("case", "obj"), misshapen(), ids=[c for c, _ in misshapen()])
def test_a_misshapen_workload_gets_no_internal_error(shipped: PolicySet, case: str, obj: dict[str, Any]) -> None:
    outcome = admission.admit(review.request_for_object(obj, namespace="prod"), policies=shipped)
    assert outcome.result != "error", (case, outcome.error)
    assert not any("internal error" in w for w in outcome.warnings), (case, outcome.warnings)


def test_the_warning_names_the_field_and_the_policy_is_left_out(shipped: PolicySet) -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"][0]["matchExpressions"] = 5
    outcome = admission.admit(review.request_for_object(obj, namespace="prod"), policies=shipped)
    assert outcome.failed and outcome.result != "error"
    said = ": not applied: matchExpressions is not a list (at spec.template.spec.affinity."
    assert sorted(w.split(said)[0] for w in outcome.warnings if said in w) == sorted(outcome.failed), outcome.warnings


def test_null_fields_are_absent_as_go_decodes_them(shipped: PolicySet) -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["affinity"] = None
    obj["metadata"]["annotations"] = None
    outcome = admission.admit(review.request_for_object(obj, namespace="prod"), policies=shipped)
    assert not outcome.failed and outcome.result == "patched", outcome.warnings


def test_a_well_shaped_object_has_its_shapes_checked_once_per_admission(
        shipped: PolicySet, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[object] = []
    real = shapes.check

    def counting(obj: dict[str, Any], target: Any) -> None:
        checked.append(obj)
        real(obj, target)

    monkeypatch.setattr(shapes, "check", counting)
    outcome = admission.admit(review.request_for_object(deployment(), namespace="prod"), policies=shipped)
    assert outcome.result == "patched" and len(outcome.applied) > 1
    assert len(checked) == 1


def test_a_misshapen_object_leaves_out_every_policy_in_every_pass(shipped: PolicySet) -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["tolerations"] = [None]
    outcome = admission.admit(review.request_for_object(obj, namespace="prod"), policies=shipped)
    assert outcome.failed and not outcome.applied and outcome.result == "unchanged"
    assert all("tolerations[0] is null (at spec.template.spec.tolerations[0])" in w
               for w in outcome.warnings if ": not applied: " in w)


@pytest.mark.parametrize(("rolling_update", "said"), [
    ({"maxSurge": "x"}, "maxSurge is not an integer or a percentage (at spec.strategy.rollingUpdate)"),
    ({"maxUnavailable": []}, "maxUnavailable is not an integer or a percentage (at spec.strategy.rollingUpdate)"),
    ("x", "spec.strategy.rollingUpdate is not a mapping"),
])
def test_a_rolling_update_the_controller_cannot_read_leaves_only_the_rollout_policy_out(
    shipped: PolicySet, rolling_update: Any, said: str
) -> None:
    # The API server refuses such values (ValidatePositiveIntOrPercent); only the policy that
    # reads the strategy is left out, naming the field, and the others still apply.
    obj = deployment()
    obj["spec"]["strategy"]["rollingUpdate"] = rolling_update
    outcome = admission.admit(review.request_for_object(obj, namespace="prod"), policies=shipped)
    assert outcome.failed == ["safe-rollouts"]
    assert f"safe-rollouts: not applied: {said}" in outcome.warnings
    assert outcome.applied and outcome.result == "patched"
