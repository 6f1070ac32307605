"""Plain data of Kubernetes objects: the JSON copy fragments are put into objects with."""
from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from webhook.kube.objects import by_kind, copy_json, kind_of

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def containers(value: Any) -> list[int]:
    """The ids of every dict and list inside ``value``, ``value`` included."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in containers(v))]
    return []


@given(json_values)
def test_a_json_copy_is_equal_and_shares_no_dict_or_list_with_the_original(value: Any) -> None:
    copied = copy_json(value)
    assert copied == value
    assert not set(containers(copied)) & set(containers(value))


def test_a_json_copy_does_not_alias_a_value_repeated_inside_the_original() -> None:
    shared = {"key": "zone", "operator": "Exists"}
    copied = copy_json([shared, shared])
    assert copied[0] is not copied[1]
    copied[0]["key"] = "region"
    assert copied[1]["key"] == "zone" and shared["key"] == "zone"


def test_a_dump_is_grouped_by_kind_nodes_first_then_kinds_as_they_appear() -> None:
    dump = [{"kind": "Pod", "metadata": {"name": "p1"}}, {"kind": "Namespace", "metadata": {"name": "prod"}},
            {"kind": "Node", "metadata": {"name": "n1"}}, {"kind": "Pod", "metadata": {"name": "p2"}},
            {"metadata": {"name": "kindless"}}]
    groups = by_kind(dump)
    assert list(groups) == ["Node", "Pod", "Namespace", ""]
    assert [p["metadata"]["name"] for p in groups["Pod"]] == ["p1", "p2"]
    assert "Node" not in by_kind(dump[:2])


def test_anything_that_carries_an_object_groups_by_the_objects_kind() -> None:
    wrapped = [("a", {"kind": "Pod"}), ("b", {"kind": "Node"})]
    assert by_kind(wrapped, kind=lambda w: kind_of(w[1])) == {"Node": [wrapped[1]], "Pod": [wrapped[0]]}
