"""Admission stops after one pass when the settling pass provably changes nothing.

A set with a policy that reads others' output is run again until a pass leaves the object
as it found it. After a pass in which no policy that reads the object was offered it before
the last change, no ``replace`` policy changed it and no policy matches on what the engine
writes, the next pass would change nothing (``admission._Run.settled_early``), so it is not
run. These tests hold that the answer is the one the settling pass would give, and that
each condition keeps the settling pass where it is needed.
"""
from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.test_admission_properties import CLUSTER, load_policies, policy_specs, workloads
from tests.kit.policies import policy, policy_set
from tests.kit.workloads import deployment
from webhook import ANNOTATION_APPLIED
from webhook.cluster.view import StaticClusterView
from webhook.engine import admission, placement, review
from webhook.policy.policyset import PolicySet

SETTLING = admission.Steps(settle_early=False)

# Half the policies only report (audit mode): a report reads the object it is offered.
specs = st.lists(policy_specs.flatmap(lambda s: st.sampled_from([s, {**s, "enforcement": "audit"}])),
                 min_size=1, max_size=4)


def _fields(out: admission.Outcome) -> dict[str, Any]:
    return {"object": out.object, "patch": out.patch, "applied": out.applied, "audited": out.audited,
            "result": out.result, "failed": out.failed, "error": out.error, "reason": out.reason}


def _same_answer(request: review.Request, policies: PolicySet, cluster: StaticClusterView | None) -> None:
    early = admission.admit(copy.deepcopy(request), policies=policies, cluster=cluster)
    settled = admission.admit(copy.deepcopy(request), policies=policies, cluster=cluster, steps=SETTLING)
    assert _fields(early) == _fields(settled)
    # The settling pass repeats what still holds and its warnings are the answer; one pass
    # says the same, in the same order, and besides only what a policy said as it changed the
    # object ("added placement.novasphere.dev/group", "dropped integer priority"): what a set
    # that reads nothing says in its only pass.
    assert [w for w in early.warnings if w in settled.warnings] == settled.warnings
    said_on_change = [w for w in early.warnings if w not in settled.warnings]
    assert all(w.split(": ", 1)[0] in early.applied for w in said_on_change), said_on_change


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=workloads(), specs=specs, cluster=st.sampled_from([None, CLUSTER]))
def test_stopping_after_one_pass_gives_the_answer_the_settling_pass_would(
    obj: dict[str, Any], specs: list[dict[str, Any]], cluster: StaticClusterView | None
) -> None:
    _same_answer(review.request_for_object(obj, namespace="prod"), load_policies(specs), cluster)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=workloads().filter(lambda o: o["kind"] in ("Deployment", "StatefulSet", "DaemonSet")),
       before=st.lists(policy_specs, min_size=1, max_size=3), after=specs, cluster=st.sampled_from([None, CLUSTER]))
def test_an_update_gets_the_answer_the_settling_pass_would(
    obj: dict[str, Any], before: list[dict[str, Any]], after: list[dict[str, Any]], cluster: StaticClusterView | None
) -> None:
    # The old object as earlier policies placed it; the update is the manifest applied again,
    # without the engine's fields: a kept template, held when today's policies would change it.
    old = admission.admit(review.request_for_object(obj, namespace="prod"), policies=load_policies(before)).object
    request = review.request_for_object(copy.deepcopy(obj), operation="UPDATE", old_object=old, namespace="prod")
    _same_answer(request, load_policies(after), cluster)


# ---------------------------------------------------------------- the conditions, one by one


def _passes(policies: PolicySet, apply: Any = placement.apply_policy) -> tuple[admission.Outcome, int]:
    calls: list[str] = []

    def counting(obj: dict[str, Any], **kw: Any) -> placement.Applied:
        calls.append(kw["policy"].name)
        return apply(obj, **kw)

    out = admission.admit(review.request_for_object(deployment()), policies=policies,
                          steps=admission.Steps(apply=counting))
    return out, calls.count(policies.names[0])


SPREAD = {"placement": {"podAntiAffinity": {"spread": "required"}}}
SAFE = {"rollout": {"mode": "safe"}}
ZONE = {"placement": {"nodeSelector": {"zone": "a"}}}


def test_a_reader_offered_the_object_last_settles_it_in_one_pass() -> None:
    out, passes = _passes(policy_set(policy("spread", order=1, **SPREAD), policy("safe", order=2, **SAFE)))
    assert (out.result, out.applied, passes) == ("patched", ["safe", "spread"], 1)


def test_a_reader_offered_the_object_before_the_last_change_gets_a_second_pass() -> None:
    # The rollout decides before the spread writes the anti-affinity it counts nodes for.
    out, passes = _passes(policy_set(policy("safe", order=1, **SAFE), policy("spread", order=2, **SPREAD)))
    assert (out.result, passes) == ("patched", 2)


def test_a_reader_before_a_policy_that_changes_nothing_settles_in_one_pass() -> None:
    # The zone policy selects no object of this namespace: the last change is the rollout's own.
    elsewhere = policy("zone", order=2, match={"namespaces": ["elsewhere"]}, **ZONE)
    out, passes = _passes(policy_set(policy("safe", order=1, **SPREAD, **SAFE), elsewhere))
    assert (out.applied, passes) == (["safe"], 1)


def test_a_replace_policy_that_changes_the_object_keeps_the_settling_pass() -> None:
    # replace takes away what another policy wrote: the one before it adds it again next pass.
    out, passes = _passes(policy_set(policy("zone", order=1, placement={"nodeSelector": {"zone": "a"}}),
                                     policy("pool", order=2, on_conflict="replace",
                                            placement={"nodeSelector": {"pool": "b"}})))
    assert (out.object["spec"]["template"]["spec"]["nodeSelector"], passes) == ({"pool": "b"}, 2)


def test_a_policy_matching_on_what_the_engine_writes_after_the_pass_keeps_the_settling_pass() -> None:
    # The applied annotation is written after the pass: "after-zone" selects the object only
    # in the next pass, though it is offered the object last.
    zone = policy("zone", order=1, **ZONE)
    after_zone = policy("after-zone", order=2, match={"annotations": {ANNOTATION_APPLIED: "zone"}}, **SPREAD, **SAFE)
    out, passes = _passes(policy_set(zone, after_zone))
    assert (out.applied, passes) == (["after-zone", "zone"], 3)


def test_an_audit_policy_before_the_last_change_keeps_the_settling_pass() -> None:
    # Its report reads the object: the settling pass reports on what the zone policy wrote.
    audit = policy("would-spread", order=1, enforcement="audit", **SPREAD)
    out, passes = _passes(policy_set(audit, policy("zone", order=2, **ZONE, **SAFE)))
    assert (out.audited, passes) == (["would-spread"], 2)


def test_a_set_that_never_settles_is_still_reported_as_such() -> None:
    def toggle(obj: dict[str, Any], **_: Any) -> placement.Applied:
        pod = obj["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"flip": "b" if (pod.get("nodeSelector") or {}).get("flip") == "a" else "a"}
        return placement.Applied(changed=True)

    flippers = [policy(f"flip-{i}", order=i, **SAFE) for i in (1, 2, 3)]  # each undoes the one before
    out = admission.admit(review.request_for_object(deployment()), policies=policy_set(*flippers),
                          steps=admission.Steps(apply=toggle))
    assert (out.result, out.patch, out.error) == (
        "error", [], "policies never settle (flip-1, flip-2, flip-3); object admitted unchanged")
