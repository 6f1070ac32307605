"""Safe rollouts (docs/policies.md, "rollout"): rules 1, 2 and 3, Recreate, and the values a user chose."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kit.engine import apply
from tests.kit.policies import policy as make_policy
from tests.kit.workloads import deployment, node, pod_spec_of
from webhook.cluster.view import StaticClusterView

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
HOST = "kubernetes.io/hostname"
SAFE = {"rollout": {"mode": "safe"}}


def safe_spread(mode: str = "required") -> dict[str, Any]:
    return {"rollout": {"mode": "safe"}, "placement": {"podAntiAffinity": {"spread": mode}}}


def rolling(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj["spec"]["strategy"]["rollingUpdate"])


def nodes(count: int, **labels: str) -> list[dict[str, Any]]:
    return [node(f"n{i}", **{HOST: f"n{i}"}, **labels) for i in range(count)]


def test_rule_1_without_self_anti_affinity_surges_one_with_none_unavailable() -> None:
    obj = deployment()
    result = apply(obj, make_policy(**SAFE))
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 0}
    assert "p: rollout: maxSurge 1, maxUnavailable 0 (no required self anti-affinity across revisions)" in result.warnings


def test_rule_1_holds_with_preferred_spread() -> None:
    obj = deployment()
    apply(obj, make_policy(**safe_spread("preferred")))
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 0}


def test_rule_3_without_a_cluster_view_takes_one_down_instead_of_surging() -> None:
    obj = deployment()
    result = apply(obj, make_policy(**safe_spread()))
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": 1}
    assert any("no cluster view" in w for w in result.warnings)


@pytest.mark.parametrize(("node_count", "expected"), [(4, (1, 0)), (3, (0, 1)), (2, (0, 1))])
def test_rule_2_surges_only_when_there_are_more_eligible_nodes_than_replicas(
    node_count: int, expected: tuple[int, int]
) -> None:
    obj = deployment(replicas=3)
    apply(obj, make_policy(**safe_spread()), StaticClusterView(nodes=nodes(node_count)))
    assert (rolling(obj)["maxSurge"], rolling(obj)["maxUnavailable"]) == expected


@pytest.mark.parametrize(
    "ineligible",
    [
        {"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}},
        {"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}},
        {"spec": {"unschedulable": True}},
        {"metadata": {"name": "n3", "labels": {HOST: "n3", "disk": "hdd"}}},
        {"metadata": {"name": "n3", "labels": {"disk": "ssd"}}},  # no topology key: not counted
    ],
)
def test_rule_2_counts_only_nodes_the_pod_may_run_on(ineligible: dict[str, Any]) -> None:
    fourth = {"kind": "Node", "metadata": {"name": "n3", "labels": {HOST: "n3", "disk": "ssd"}}}
    fourth.update(ineligible)
    cluster = StaticClusterView(nodes=nodes(3, disk="ssd") + [fourth])
    obj = deployment(replicas=3)
    apply(obj, make_policy(placement={"nodeSelector": {"disk": "ssd"}, "podAntiAffinity": {"spread": "required"}},
                           rollout={"mode": "safe"}), cluster)
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": 1}


def test_rule_2_honours_the_pods_tolerations_and_required_node_affinity() -> None:
    tainted = [{**n, "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]}} for n in nodes(4, gpu="yes")]
    policy = make_policy(placement={
        "podAntiAffinity": {"spread": "required"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "nodeAffinity": {"required": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}]}]},
    }, rollout={"mode": "safe"})
    obj = deployment(replicas=3)
    apply(obj, policy, StaticClusterView(nodes=tainted))
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 0}


def test_rule_3_with_match_label_keys_scopes_the_spread_to_one_revision() -> None:
    cluster = StaticClusterView(nodes=nodes(3), match_label_keys=True)
    obj = deployment(replicas=3)
    policy = make_policy(**safe_spread())
    apply(obj, policy, cluster)
    term = pod_spec_of(obj)["affinity"]["podAntiAffinity"][REQ][0]
    assert term["matchLabelKeys"] == ["pod-template-hash"]
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 0}
    once = copy.deepcopy(obj)
    assert apply(obj, policy, cluster).changed is False
    assert obj == once


@pytest.mark.parametrize("support", [None, False])
def test_match_label_keys_are_not_used_unless_the_cluster_is_known_to_honour_them(support: bool | None) -> None:
    obj = deployment(replicas=3)
    apply(obj, make_policy(**safe_spread()), StaticClusterView(nodes=nodes(3), match_label_keys=support))
    assert "matchLabelKeys" not in pod_spec_of(obj)["affinity"]["podAntiAffinity"][REQ][0]
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": 1}


def test_a_users_own_required_self_anti_affinity_is_not_rewritten_for_rule_3() -> None:
    user_term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}
    obj = deployment(pod_spec={"containers": [{"name": "a", "image": "b"}],
                               "affinity": {"podAntiAffinity": {REQ: [copy.deepcopy(user_term)]}}})
    apply(obj, make_policy(**SAFE), StaticClusterView(nodes=nodes(3), match_label_keys=True))
    assert pod_spec_of(obj)["affinity"]["podAntiAffinity"][REQ] == [user_term]
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": 1}


def test_anti_affinity_on_other_workloads_does_not_block_a_surge() -> None:
    other = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST}
    obj = deployment(pod_spec={"containers": [], "affinity": {"podAntiAffinity": {REQ: [other]}}})
    apply(obj, make_policy(**SAFE))
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 0}


def test_recreate_is_left_alone_with_a_warning() -> None:
    obj = deployment(strategy={"type": "Recreate"})
    result = apply(obj, make_policy(**SAFE))
    assert obj["spec"]["strategy"] == {"type": "Recreate"}
    assert result.changed is False
    assert "p: rollout: strategy Recreate left alone" in result.warnings


def test_the_api_defaults_are_replaced_but_a_users_choice_is_kept() -> None:
    obj = deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": "25%"}})
    result = apply(obj, make_policy(**SAFE))
    assert rolling(obj) == {"maxSurge": 3, "maxUnavailable": 0}
    assert "p: rollout: maxSurge 3 kept (a user's choice)" in result.warnings


def test_values_that_would_both_be_zero_are_left_as_they_are() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"}}
    obj = deployment(strategy=copy.deepcopy(strategy))
    result = apply(obj, make_policy(**SAFE))
    assert obj["spec"]["strategy"] == strategy
    assert any("would both be 0" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (None, {"maxSurge": "50%", "maxUnavailable": 0}),
        ({}, {"maxSurge": "50%", "maxUnavailable": 0}),
        ({"type": "RollingUpdate"}, {"maxSurge": "50%", "maxUnavailable": 0}),
        ({"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}, {"maxSurge": "50%", "maxUnavailable": 0}),
        ({"rollingUpdate": {"maxSurge": 2, "maxUnavailable": "25%"}}, {"maxSurge": 2, "maxUnavailable": 0}),
    ],
)
def test_explicit_mode_fills_absent_and_default_values_only(
    strategy: dict[str, Any] | None, expected: dict[str, Any]
) -> None:
    obj = deployment(strategy=strategy)
    apply(obj, make_policy(rollout={"mode": "explicit", "maxSurge": "50%", "maxUnavailable": 0}))
    assert rolling(obj) == expected


def test_replace_mode_overrides_a_users_values() -> None:
    obj = deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}})
    apply(obj, make_policy(on_conflict="replace", **SAFE))
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 0}


@pytest.mark.parametrize(
    ("strategy", "changed"),
    [
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}, False),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}, True),
    ],
)
def test_keep_mode_leaves_a_user_set_strategy_but_fills_the_api_default(
    strategy: dict[str, Any], changed: bool
) -> None:
    obj = deployment(strategy=copy.deepcopy(strategy))
    apply(obj, make_policy(on_conflict="keep", **SAFE))
    assert (obj["spec"]["strategy"] != strategy) is changed


@pytest.mark.parametrize(("existing", "expected"), [(None, 5), (0, 0), (30, 30)])
def test_min_ready_seconds_is_set_only_when_absent(existing: int | None, expected: int) -> None:
    obj = deployment()
    if existing is not None:
        obj["spec"]["minReadySeconds"] = existing
    apply(obj, make_policy(rollout={"mode": "safe", "minReadySeconds": 5}))
    assert obj["spec"]["minReadySeconds"] == expected


def test_kinds_without_a_rollout_ignore_the_rollout_section() -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
           "spec": {"selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": []}}}}
    before = copy.deepcopy(sts)
    assert apply(sts, make_policy(rollout={"mode": "safe", "minReadySeconds": 5})).changed is False
    assert sts == before


def test_replicas_default_to_one_when_absent() -> None:
    obj = deployment(replicas=None)
    apply(obj, make_policy(**safe_spread()), StaticClusterView(nodes=nodes(2)))
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 0}


SPEC_EXAMPLE = {"mode": "safe", "maxUnavailable": 0, "maxSurge": 1, "minReadySeconds": 5}


def test_the_spec_example_rollout_gives_zero_unavailable_and_one_surge() -> None:
    obj = deployment()
    apply(obj, make_policy(rollout=SPEC_EXAMPLE))
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 0}
    assert obj["spec"]["minReadySeconds"] == 5


def test_safe_mode_uses_the_policys_values_when_nothing_can_block_a_surge() -> None:
    obj = deployment()
    apply(obj, make_policy(rollout={"mode": "safe", "maxSurge": "50%", "maxUnavailable": 1}))
    assert rolling(obj) == {"maxSurge": "50%", "maxUnavailable": 1}


def test_safe_mode_keeps_one_surge_when_the_cluster_proves_room_for_only_one() -> None:
    obj = deployment(replicas=3)
    policy = make_policy(rollout={"mode": "safe", "maxSurge": 3, "maxUnavailable": 1},
                         placement={"podAntiAffinity": {"spread": "required"}})
    apply(obj, policy, StaticClusterView(nodes=nodes(4)))
    assert rolling(obj) == {"maxSurge": 1, "maxUnavailable": 1}


def test_safe_mode_overrides_the_policys_values_when_a_surge_could_deadlock() -> None:
    obj = deployment(replicas=3)
    policy = make_policy(rollout={"mode": "safe", "maxSurge": 2, "maxUnavailable": 0},
                         placement={"podAntiAffinity": {"spread": "required"}})
    apply(obj, policy)
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": 1}
