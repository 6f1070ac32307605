"""A fake engine with a tiny, predictable placement, to test admission's orchestration
(order, audit mode, failures, settling, the applied annotation) apart from engine semantics."""
from __future__ import annotations

import copy
from typing import Any

from webhook.engine import admission, placement
from webhook.engine.context import PlacementError
from webhook.kube.kinds import BUILTIN, Target
from webhook.scheduler.nodeaffinity import PreferredTerms, node_identity
from webhook.policy.policyset import Policy


def fake_apply(obj: dict[str, Any], *, policy: Policy, target: Target, cluster: Any, **_: Any) -> placement.Applied:
    """Sets the policy's ``placement.nodeSelector`` keys that the pod spec lacks.

    ``nodeSelector: {fail: placement}`` edits the object and then raises PlacementError;
    ``{fail: crash}`` raises an unexpected error.
    """
    wanted = policy.spec.get("placement", {}).get("nodeSelector", {})
    if wanted.get("fail") == "placement":
        # Mutate first, then fail: admission must still leave no trace of this policy.
        _pod_spec(obj, target).setdefault("nodeSelector", {})["half"] = "done"
        raise PlacementError("more than 64 required node selector terms")
    if wanted.get("fail") == "crash":
        raise KeyError("boom")
    pod = _pod_spec(obj, target)
    current = pod.get("nodeSelector") or {}
    missing = {k: v for k, v in wanted.items() if k not in current}
    if not missing:
        return placement.Applied(changed=False, warnings=[])
    pod["nodeSelector"] = {**current, **missing}
    return placement.Applied(changed=True, warnings=[f"{policy.name}: set nodeSelector {sorted(missing)}"])


def _pod_spec(obj: dict[str, Any], target: Target) -> dict[str, Any]:
    cur = obj
    for key in target.pod_spec or ("spec",):
        cur = cur.setdefault(key, {})
    return cur


FAKE = admission.Steps(apply=fake_apply)


def apply(
    obj: dict[str, Any], policy: Policy, cluster: Any = None, *, original: dict[str, Any] | None = None
) -> placement.Applied:
    """The real engine: one policy onto ``obj``, in place. ``original`` is the object as the
    request carried it (default: ``obj`` as it is now), as admission passes it."""
    target = BUILTIN.for_object(obj)
    assert target is not None, obj.get("kind")
    before = copy.deepcopy(obj) if original is None else original
    return placement.apply_policy(obj, policy=policy, target=target, cluster=cluster, original=before)


def preferred_score(prefs: list[dict[str, Any]], node: dict[str, Any]) -> int:
    """The NodeAffinity score plugin's raw score: the weights of the matching preferred terms."""
    return PreferredTerms(prefs).score(*node_identity(node))
