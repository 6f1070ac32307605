"""The pure rules underneath: selector parsing and matching, strategic merge, the disruption maths."""
from __future__ import annotations

import pytest

from tests.kit.fakeapi.disruption import scaled
from tests.kit.fakeapi.errors import ApiError
from tests.kit.fakeapi.patch import MERGE_KEYS, merge_patch, strategic_merge
from tests.kit.fakeapi.selectors import SelectorError, label_selector_reqs, labels_match, parse_fields, parse_labels


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    ("app=web", {"app": "web"}, True),
    ("app==web", {"app": "db"}, False),
    ("app!=web", {}, True),  # != matches objects without the label
    ("app notin (web,db)", {}, True),
    ("app in (web, db)", {"app": "db"}, True),
    ("app in (web)", {}, False),
    ("!app", {"tier": "x"}, True),
    ("app,tier", {"app": "1"}, False),
    ("size>3", {"size": "10"}, True),
    ("size<3", {"size": "x"}, False),
    ("example.com/role=edge", {"example.com/role": "edge"}, True),
    ("", {"anything": "x"}, True),
])
def test_label_selectors_match_like_labels_parse(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert labels_match(parse_labels(selector), labels) is matches


@pytest.mark.parametrize("selector", ["app in (web", "=web", "app=we b!", "Bad Key=1", "app=" + "x" * 64, "n>x"])
def test_malformed_label_selectors_are_rejected(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_labels(selector)


def test_field_selectors_split_on_unescaped_commas_and_take_the_first_operator() -> None:
    assert parse_fields(r"metadata.name=a\,b,status.phase!=Running") == [
        ("metadata.name", "=", "a,b"), ("status.phase", "!=", "Running")]
    assert parse_fields("spec.nodeName==n1") == [("spec.nodeName", "=", "n1")]
    with pytest.raises(SelectorError, match="can't understand 'spec.nodeName'"):
        parse_fields("spec.nodeName")


def test_a_nil_pdb_selector_matches_nothing_an_empty_one_everything_and_a_bad_one_nothing() -> None:
    assert label_selector_reqs(None) is None
    assert labels_match(label_selector_reqs({}) or [], {"any": "pod"})
    assert label_selector_reqs({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}) is None


def test_strategic_merge_follows_the_struct_tags_of_the_patched_fields() -> None:
    pod = {"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "rs"}]},
           "spec": {"containers": [{"name": "app", "image": "v1", "env": [{"name": "A", "value": "1"}]},
                                   {"name": "side", "image": "s1"}],
                    "tolerations": [{"key": "x"}]},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    patch = {"metadata": {"finalizers": ["b"]},
             "spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}]},
                                     {"name": "side", "$patch": "delete"}],
                      "tolerations": [{"key": "y"}]},
             "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    out = strategic_merge(pod, patch, MERGE_KEYS["Pod"])
    assert out["metadata"]["finalizers"] == ["a", "b"]  # patchStrategy:"merge" on a list of strings
    assert out["spec"]["containers"] == [{"name": "app", "image": "v1", "env": [{"name": "A", "value": "1"},
                                                                               {"name": "B", "value": "2"}]}]
    assert out["spec"]["tolerations"] == [{"key": "y"}]  # no patchStrategy: replaced
    assert [c["type"] for c in out["status"]["conditions"]] == ["Ready", "PodScheduled"]
    assert pod["spec"]["containers"][1]["name"] == "side"  # the original is untouched
    node = strategic_merge({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}},
                           {"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}}, MERGE_KEYS["Node"])
    assert node["spec"]["taints"] == [{"key": "b", "effect": "NoSchedule"}]


def test_strategic_merge_directives_replace_delete_and_retain_keys() -> None:
    original = {"spec": {"a": 1, "b": {"c": 2}}}
    assert strategic_merge(original, {"spec": {"$patch": "replace", "z": 1}}, {}) == {"spec": {"z": 1}}
    assert strategic_merge(original, {"spec": {"b": {"$patch": "delete"}}}, {}) == {"spec": {"a": 1, "b": {}}}
    assert strategic_merge(original, {"spec": {"$retainKeys": ["b"], "b": {"d": 3}}}, {}) == {
        "spec": {"b": {"c": 2, "d": 3}}}
    with pytest.raises(ApiError) as unknown:
        strategic_merge(original, {"spec": {"$patch": "bogus"}}, {})
    assert unknown.value.code == 500 and unknown.value.reason == ""
    with pytest.raises(ApiError) as keyless:
        strategic_merge({"metadata": {"ownerReferences": []}}, {"metadata": {"ownerReferences": [{"name": "x"}]}},
                        MERGE_KEYS["Pod"])
    assert keyless.value.code == 400


def test_merge_patch_is_rfc_7386() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3}, "l": [2]}


@pytest.mark.parametrize(("value", "total", "expected"), [(2, 10, 2), ("50%", 5, 3), ("10%", 1, 1), ("0%", 9, 0)])
def test_budget_percentages_round_up_like_get_scaled_value_from_int_or_percent(value: int | str, total: int,
                                                                                 expected: int) -> None:
    assert scaled(value, total) == expected
