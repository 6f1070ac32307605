"""match / exclude predicates: every criterion, globs and Kubernetes label-selector semantics."""
from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.policies import policy
from tests.kit.workloads import deployment
from webhook.cluster.view import StaticClusterView
from webhook.engine import matching
from webhook.kube.kinds import BUILTIN

DEPLOYMENT = BUILTIN.lookup("apps", "Deployment")
VM = BUILTIN.lookup("kubevirt.io", "VirtualMachine")
assert DEPLOYMENT is not None and VM is not None


def _subject(obj: dict[str, Any] | None = None, *, operation: str = "CREATE", namespace: str | None = None, cluster: Any = None) -> matching.Subject:
    obj = obj if obj is not None else deployment("web-api", labels={"tier": "web"}, annotations={"team.example.com/owner": "payments"})
    return matching.subject(obj, target=DEPLOYMENT, operation=operation, namespace=namespace, cluster=cluster)


def _verdict(match: dict[str, Any] | None = None, exclude: dict[str, Any] | None = None, **kw: Any) -> matching.Verdict:
    spec: dict[str, Any] = {}
    if match is not None:
        spec["match"] = match
    if exclude is not None:
        spec["exclude"] = exclude
    return matching.selects(policy("p", **spec), _subject(**kw))


def test_a_policy_without_match_selects_any_create_or_update() -> None:
    assert _verdict().matched
    assert _verdict(operation="UPDATE").matched
    assert not _verdict(operation="DELETE").matched


MATCH_TABLE = [
    # (match block, matched?, reason fragment when not; None when it matches)
    ({"kinds": ["Deployment"]}, True, None),
    ({"kinds": ["apps/Deployment"]}, True, None),
    ({"kinds": ["apps/v1/Deployment"]}, True, None),
    ({"kinds": ["StatefulSet"]}, False, "kind apps/v1/Deployment is not in kinds [StatefulSet]"),
    ({"kinds": ["batch/Deployment"]}, False, "is not in kinds"),
    ({"operations": ["UPDATE"]}, False, "operation CREATE is not in [UPDATE]"),
    ({"operations": ["CREATE"]}, True, None),
    ({"namespaces": ["prod"]}, True, None),
    ({"namespaces": ["team-*", "prod"]}, True, None),
    ({"namespaces": ["pro?"]}, True, None),
    ({"namespaces": ["Prod"]}, False, "namespace prod is not in [Prod]"),
    ({"namespaces": ["team-*"]}, False, "namespace prod is not in [team-*]"),
    ({"excludeNamespaces": ["kube-*"]}, True, None),
    ({"excludeNamespaces": ["prod"]}, False, "namespace prod is in excludeNamespaces [prod]"),
    ({"names": ["web-*"]}, True, None),
    ({"names": ["api-*"]}, False, "name web-api is not in [api-*]"),
    ({"selector": {"matchLabels": {"tier": "web"}}}, True, None),
    ({"selector": {"matchLabels": {"tier": "db"}}}, False, "selector: label tier=db required, found tier=web"),
    ({"selector": {}}, True, None),
    ({"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]}]}}, True, None),
    ({"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]}}, False, "label tier In [db]"),
    ({"selector": {"matchExpressions": [{"key": "absent", "operator": "In", "values": ["x"]}]}}, False, "no such label"),
    ({"selector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}}, True, None),
    ({"selector": {"matchExpressions": [{"key": "absent", "operator": "NotIn", "values": ["x"]}]}}, True, None),
    ({"selector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]}}, False, "NotIn"),
    ({"selector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}}, True, None),
    ({"selector": {"matchExpressions": [{"key": "absent", "operator": "Exists"}]}}, False, "label absent Exists does not hold"),
    ({"selector": {"matchExpressions": [{"key": "absent", "operator": "DoesNotExist"}]}}, True, None),
    ({"selector": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}}, False, "DoesNotExist"),
    ({"selector": {"matchLabels": {"tier": "web"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}}, False, "DoesNotExist"),
    ({"podSelector": {"matchLabels": {"app": "web-api"}}}, True, None),
    ({"podSelector": {"matchLabels": {"tier": "web"}}}, False, "podSelector: label tier=web required"),
    ({"annotations": {"team.example.com/owner": "*"}}, True, None),
    ({"annotations": {"team.example.com/owner": "pay*"}}, True, None),
    ({"annotations": {"team.example.com/owner": "search"}}, False, "does not match 'search'"),
    ({"annotations": {"other": "*"}}, False, "annotation other is not set"),
    ({"kinds": ["Deployment"], "namespaces": ["prod"], "names": ["web-*"], "selector": {"matchLabels": {"tier": "web"}}}, True, None),
]


@pytest.mark.parametrize(("match", "matched", "reason"), MATCH_TABLE)
def test_every_match_criterion(match: dict[str, Any], matched: bool, reason: str | None) -> None:
    verdict = _verdict(match, namespace="prod")
    assert verdict.matched is matched
    if reason is None:
        assert verdict.reason == "matched"
    else:
        assert reason in verdict.reason
    assert not verdict.undecided


def test_resolved_policy_targets_decide_the_kind() -> None:
    p = policy("vm-only", targets=("kubevirt.io/v1/VirtualMachine",))
    verdict = matching.selects(p, _subject())
    assert not verdict.matched
    assert "not in match.kinds [kubevirt.io/v1/VirtualMachine]" in verdict.reason
    vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "gpu"}}
    assert matching.selects(p, matching.subject(vm, target=VM, operation="CREATE", namespace="x")).matched


def test_the_request_namespace_wins_over_the_objects_own() -> None:
    obj = deployment(namespace="ignored")
    assert _verdict({"namespaces": ["prod"]}, obj=obj, namespace="prod").matched


def test_an_object_with_only_generate_name_matches_names_against_it() -> None:
    obj = deployment()
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "batch-"
    assert _verdict({"names": ["batch-*"]}, obj=obj).matched
    assert not _verdict({"names": ["web"]}, obj=obj).matched


def test_an_object_without_labels_or_annotations_fails_selectors_but_not_negative_ones() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bare"}, "spec": {}}
    assert not _verdict({"selector": {"matchLabels": {"a": "b"}}}, obj=obj).matched
    assert not _verdict({"annotations": {"a": "*"}}, obj=obj).matched
    assert _verdict({"podSelector": {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}}, obj=obj).matched


def test_an_object_without_namespace_matches_no_namespace_list_and_is_not_excluded_by_one() -> None:
    obj = deployment(namespace=None)
    assert "has no namespace" in _verdict({"namespaces": ["*"]}, obj=obj).reason
    assert _verdict({"excludeNamespaces": ["*"]}, obj=obj).matched


def test_namespace_selector_without_a_cluster_view_does_not_match_and_says_why() -> None:
    verdict = _verdict({"namespaceSelector": {"matchLabels": {"env": "prod"}}}, namespace="prod")
    assert not verdict.matched
    assert verdict.undecided
    assert "no cluster view" in verdict.reason


def test_namespace_selector_uses_the_cluster_views_namespace_labels() -> None:
    cluster = StaticClusterView(namespaces={"prod": {"env": "prod"}, "dev": {"env": "dev"}})
    sel = {"namespaceSelector": {"matchLabels": {"env": "prod"}}}
    assert _verdict(sel, namespace="prod", cluster=cluster).matched
    dev = _verdict(sel, namespace="dev", cluster=cluster)
    assert not dev.matched and not dev.undecided and "namespace dev" in dev.reason
    unknown = _verdict(sel, namespace="new", cluster=cluster)
    assert not unknown.matched and unknown.undecided and "unknown to the cluster view" in unknown.reason


EXCLUDE_TABLE = [
    ({"namespaces": ["prod"]}, False),
    ({"namespaces": ["dev"]}, True),
    ({"namespaces": ["prod"], "names": ["api-*"]}, True),  # every exclude criterion must hold
    ({"namespaces": ["prod"], "names": ["web-*"]}, False),
    ({"kinds": ["Deployment"]}, False),
    ({"kinds": ["StatefulSet"]}, True),
    ({"operations": ["UPDATE"]}, True),
    ({"operations": ["CREATE"]}, False),
    ({"selector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}}, False),
    ({"annotations": {"team.example.com/owner": "payments"}}, False),
    ({}, True),  # an empty exclude excludes nothing
]


@pytest.mark.parametrize(("exclude", "matched"), EXCLUDE_TABLE)
def test_exclude_removes_objects_only_when_all_its_criteria_hold(exclude: dict[str, Any], matched: bool) -> None:
    verdict = _verdict(exclude=exclude, namespace="prod")
    assert verdict.matched is matched
    assert verdict.reason.startswith("excluded") is (not matched)


def test_an_exclude_that_cannot_be_evaluated_keeps_the_policy_from_applying() -> None:
    # An unknown never makes a policy apply: without namespace labels the exclude may hold.
    verdict = _verdict(exclude={"namespaceSelector": {"matchLabels": {"env": "dev"}}}, namespace="prod")
    assert not verdict.matched and verdict.undecided
    assert "no cluster view" in verdict.reason


def test_an_exclude_with_a_criterion_known_not_to_hold_excludes_nothing_even_with_an_unknown_one() -> None:
    exclude = {"namespaces": ["dev"], "namespaceSelector": {"matchLabels": {"env": "dev"}}}
    verdict = _verdict(exclude=exclude, namespace="prod")
    assert verdict.matched and not verdict.undecided


def test_an_exclude_of_a_namespace_the_view_does_not_know_keeps_the_policy_from_applying() -> None:
    cluster = StaticClusterView(namespaces={"other": {}})
    verdict = _verdict(exclude={"namespaceSelector": {"matchLabels": {"env": "dev"}}}, namespace="prod", cluster=cluster)
    assert not verdict.matched and verdict.undecided


def test_predicates_are_compiled_once_per_policy() -> None:
    p = policy("p", match={"namespaces": ["prod"]})
    matching.selects(p, _subject(namespace="prod"))
    compiled = p.cache["matching"]
    matching.selects(p, _subject(namespace="dev"))
    assert p.cache["matching"] is compiled


def test_a_policy_set_a_reload_replaced_is_freed_with_its_index_without_the_cyclic_collector() -> None:
    # The server memoises a candidate index per set; a reload drops the old set. Were the
    # index to keep the set alive (or in a cycle), every reload would leak the whole set.
    import gc
    import weakref

    from tests.kit.policies import policy_set

    policies = policy_set(policy("a", match={"namespaces": ["prod"]}), policy("b"))
    deployment_kind = BUILTIN.lookup("apps", "Deployment")
    assert deployment_kind is not None
    index = matching.index_for(policies)
    assert [p.name for p in index.candidates(deployment_kind, "prod")] == ["a", "b"]
    assert [p.name for p in index.candidates(deployment_kind, "dev")] == ["b"]
    assert matching.index_for(policies) is index  # memoised
    gone = weakref.ref(policies)  # (a compiled CandidateIndex takes no weak reference)
    del policies, index
    gc.disable()
    try:
        assert gone() is None  # reference counting alone freed it, and the index it holds
    finally:
        gc.enable()


# Globs drawn from the characters that mean something to fnmatch (and to a regular expression).
GLOB_TEXT = st.text(alphabet="ab-.*?[]!^\\", max_size=6)


@settings(max_examples=300, deadline=None)
@given(patterns=st.lists(GLOB_TEXT, min_size=1, max_size=4), namespace=st.text(alphabet="ab-.*?[]!^\\\n", min_size=1, max_size=6))
def test_a_namespace_matches_a_list_of_globs_exactly_when_fnmatchcase_matches_one_of_them(
        patterns: list[str], namespace: str) -> None:
    expected = any(fnmatchcase(namespace, p) for p in patterns)
    assert _verdict({"namespaces": patterns}, namespace=namespace).matched == expected
    assert _verdict({"excludeNamespaces": patterns}, namespace=namespace).matched != expected
