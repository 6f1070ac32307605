"""JSON pointers (RFC 6901): escaping keys, joining paths, reading values."""
from __future__ import annotations

import jsonpatch
import pytest

from webhook.kube import pointers


@pytest.mark.parametrize(
    ("key", "token"),
    [
        ("placement.novasphere.dev/applied", "placement.novasphere.dev~1applied"),
        ("a~b", "a~0b"),
        ("~/", "~0~1"),
        ("~1", "~01"),  # escape ~ first, or "~1" would read back as "/"
        ("plain", "plain"),
    ],
)
def test_keys_are_escaped_as_json_pointer_tokens_and_read_back(key: str, token: str) -> None:
    assert pointers.escape(key) == token
    assert jsonpatch.JsonPointer(f"/{token}").parts == [key]
    assert pointers.to_path(f"/{token}") == (key,)


def test_pointer_joins_escaped_keys_and_indexes() -> None:
    assert pointers.pointer(["metadata", "annotations", "a/b"]) == "/metadata/annotations/a~1b"
    assert pointers.pointer(["spec", "tolerations", 2]) == "/spec/tolerations/2"
    assert pointers.pointer([]) == ""


def test_a_pointer_must_start_with_a_slash() -> None:
    with pytest.raises(ValueError, match="must start with '/'"):
        pointers.to_path("spec/template")


def test_resolve_steps_into_mappings_and_lists_and_says_when_nothing_is_there() -> None:
    obj = {"spec": {"tolerations": [{"key": "a"}], "x/y": 1}}
    assert pointers.resolve(obj, "/spec/tolerations/0/key") == (True, "a")
    assert pointers.resolve(obj, "/spec/x~1y") == (True, 1)
    assert pointers.resolve(obj, "/spec/tolerations/1") == (False, None)
    assert pointers.resolve(obj, "/spec/nope") == (False, None)


def test_get_path_is_none_when_a_step_is_missing_or_not_a_mapping() -> None:
    obj = {"spec": {"template": {"spec": {"a": 1}}, "list": [1]}}
    assert pointers.get_path(obj, ("spec", "template", "spec")) == {"a": 1}
    assert pointers.get_path(obj, ("spec", "missing", "x")) is None
    assert pointers.get_path(obj, ("spec", "list", "0")) is None
