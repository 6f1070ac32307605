"""Safe rollouts (docs/policies.md, "rollout"): rules 1, 2 and 3, Recreate, and the values a user chose."""
from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.engine import apply
from tests.kit.policies import policy as make_policy
from tests.kit.workloads import deployment, node, pod_spec_of
from webhook.cluster.view import StaticClusterView
from webhook.engine import rollout
from webhook.kube.deployment import resolve

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
    # One warning, saying what the strategy is and that maxSurge is the author's: never a
    # "maxSurge 1" beside a "maxSurge 3 kept" that contradicts it.
    assert [w for w in result.warnings if "rollout:" in w] == [
        "p: rollout: maxSurge 3, maxUnavailable 0 (no required self anti-affinity across revisions; as written: maxSurge)"
    ]


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


@pytest.mark.parametrize(
    ("surge", "unavailable", "replicas", "resolved"),
    [
        ("25%", "25%", 4, (1, 1)),
        ("25%", "25%", 3, (1, 0)),   # maxSurge rounds up, maxUnavailable down
        ("0%", "0%", 10, (0, 1)),    # both zero: one unavailable (ResolveFenceposts)
        (0, "10%", 5, (0, 1)),       # 10% of 5 rounds down to 0, then the same fencepost
        (2, "50%", 3, (2, 1)),
        (1, 5, 3, (1, 3)),           # never more unavailable than replicas (MaxUnavailable)
    ],
)
def test_percentages_resolve_as_the_deployment_controller_resolves_them(
    surge: Any, unavailable: Any, replicas: int, resolved: tuple[int, int]
) -> None:
    assert resolve(surge, unavailable, replicas) == resolved


@given(st.integers(min_value=0, max_value=100), st.integers(min_value=0, max_value=100_000))
def test_a_percentage_of_the_replicas_rounds_as_the_controllers_float64_arithmetic(percent: int, replicas: int) -> None:
    # intstr.GetScaledValueFromIntOrPercent: math.Ceil (surge) or math.Floor (unavailable) of
    # float64(value) * float64(total) / 100; Python floats are the same IEEE doubles.
    surge, unavailable = resolve(f"{percent}%", f"{percent}%", replicas)
    assert surge == math.ceil(float(percent) * float(replicas) / 100)
    floor = math.floor(float(percent) * float(replicas) / 100)
    fencepost = 1 if surge == 0 and floor == 0 else floor  # ResolveFenceposts: never both zero
    assert unavailable == min(fencepost, replicas)


SPREAD_SAFE = {"placement": {"podAntiAffinity": {"spread": "required"}}, "rollout": {"mode": "safe"}}


def test_author_values_that_can_never_finish_with_the_added_spread_are_replaced_and_said_so() -> None:
    # 10% of 3 replicas resolves to 0 unavailable; with required spread and no spare node
    # known, the surge pod never schedules and no old pod is ever removed.
    obj = deployment(replicas=3, strategy={"type": "RollingUpdate",
                                           "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "10%"}})
    result = apply(obj, make_policy(**SPREAD_SAFE))
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": 1}
    assert any("the author's maxSurge 1, maxUnavailable 10% could never finish" in w for w in result.warnings)


def test_a_default_surge_gives_way_before_an_authors_unavailable() -> None:
    # maxSurge 25% is the API default, not a choice; with it at 0, 10% of 3 resolves to 0 and
    # the controller's fencepost makes it 1 unavailable: the author's 10% can stay.
    obj = deployment(replicas=3, strategy={"type": "RollingUpdate",
                                           "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "10%"}})
    result = apply(obj, make_policy(**SPREAD_SAFE))
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": "10%"}
    assert not any("could never finish" in w for w in result.warnings)


def test_author_values_that_can_finish_are_kept_even_with_the_added_spread() -> None:
    obj = deployment(replicas=3, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}})
    result = apply(obj, make_policy(**SPREAD_SAFE))
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": "50%"}
    assert [w for w in result.warnings if "rollout:" in w] == [
        "p: rollout: maxSurge 0, maxUnavailable 50% (required self anti-affinity, no cluster view; "
        "as written: maxUnavailable)"
    ]


def test_an_author_surge_is_kept_when_only_our_value_has_to_give_way() -> None:
    # The author chose maxSurge 2; a surge alone cannot finish here, so maxUnavailable (ours)
    # becomes 1 and the author's surge stays.
    obj = deployment(replicas=3, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}})
    apply(obj, make_policy(**SPREAD_SAFE))
    assert rolling(obj) == {"maxSurge": 2, "maxUnavailable": 1}


def test_values_an_earlier_admission_wrote_are_replaced_once_the_spare_node_is_gone() -> None:
    # maxSurge 1 / maxUnavailable 0 was right at creation, with a spare node; now there is none.
    pod = {"containers": [{"name": "app", "image": "nginx"}], "affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    obj = deployment(replicas=2, pod_spec=pod, strategy={"type": "RollingUpdate",
                                                          "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    two_nodes = StaticClusterView(nodes=[node("a", **{"kubernetes.io/hostname": "a"}),
                                         node("b", **{"kubernetes.io/hostname": "b"})])
    result = apply(obj, make_policy(**SPREAD_SAFE), two_nodes)
    assert rolling(obj) == {"maxSurge": 0, "maxUnavailable": 1}
    assert any("could never finish" in w for w in result.warnings)


def _zoned_nodes(count: int) -> list[dict[str, Any]]:
    nodes = [node(f"n{i}", **{"kubernetes.io/hostname": f"n{i}", "zone": f"z{i % 3}"}) for i in range(count)]
    nodes[0]["spec"] = {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}
    return nodes


def test_eligible_domains_over_a_node_set_match_a_fresh_count_for_each_question() -> None:
    nodes = _zoned_nodes(7)
    node_set = StaticClusterView(nodes=nodes).nodes()
    specs: list[dict[str, Any]] = [
        {},
        {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
        {"nodeSelector": {"zone": "z1"}},
        {"affinity": {"nodeAffinity": {rollout.REQUIRED: {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z2"]}]}]}}}},
    ]
    for _ in range(2):  # the second pass answers from the memo
        for spec in specs:
            for key in ("kubernetes.io/hostname", "zone"):
                assert rollout.eligible_domains(spec, node_set, key) == rollout.eligible_domains(spec, list(nodes), key)


def test_the_memo_ignores_key_order_but_not_the_tolerations() -> None:
    node_set = StaticClusterView(nodes=_zoned_nodes(4)).nodes()
    one = {"nodeSelector": {"a": "1", "b": "2"}}
    same = {"nodeSelector": {"b": "2", "a": "1"}}
    tolerant = {**one, "tolerations": [{"key": "gpu", "operator": "Exists"}]}
    keys = {rollout._eligibility_key(s, "zone") for s in (one, same, tolerant)}
    assert len(keys) == 2
    assert rollout.eligible_domains({}, node_set, "kubernetes.io/hostname") == 3
    assert rollout.eligible_domains({"tolerations": tolerant["tolerations"]}, node_set, "kubernetes.io/hostname") == 4


def test_a_changed_node_set_is_asked_afresh() -> None:
    before = StaticClusterView(nodes=_zoned_nodes(4)).nodes()
    assert rollout.eligible_domains({}, before, "kubernetes.io/hostname") == 3
    after = StaticClusterView(nodes=_zoned_nodes(6)).nodes()
    assert rollout.eligible_domains({}, after, "kubernetes.io/hostname") == 5


def test_the_memo_is_bounded() -> None:
    node_set = StaticClusterView(nodes=_zoned_nodes(2)).nodes()
    for i in range(node_set.MEMO_LIMIT + 10):
        rollout.eligible_domains({"nodeSelector": {"k": str(i)}}, node_set, "zone")
    assert len(node_set.memo()) <= node_set.MEMO_LIMIT
