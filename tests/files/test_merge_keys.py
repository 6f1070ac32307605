"""YAML merge keys (``<<: *base``) are valid YAML: the mapping's own keys override merged ones.

The rule is the YAML 1.1 merge key type's: a key the mapping writes itself wins over a merged
one, and of several merged mappings (``<<: [*a, *b]``) the first wins; only two keys the
mapping writes itself are a duplicate, refused when strict (as policies are read).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.files import documents

BASE_AND_OVERRIDE = """\
base: &base
  image: app:1
  replicas: 1
web:
  <<: *base
  replicas: 3
"""


@pytest.mark.parametrize("strict", [False, True])
def test_a_key_written_after_a_merge_overrides_the_merged_one(strict: bool) -> None:
    [doc] = documents.load_text(BASE_AND_OVERRIDE, strict=strict)
    assert doc.data["web"] == {"image": "app:1", "replicas": 3}


@pytest.mark.parametrize("strict", [False, True])
def test_a_key_written_before_the_merge_still_wins(strict: bool) -> None:
    text = "base: &base {image: app:1, replicas: 1}\nweb:\n  replicas: 3\n  <<: *base\n"
    [doc] = documents.load_text(text, strict=strict)
    assert doc.data["web"] == {"image": "app:1", "replicas": 3}


def test_the_overriding_key_keeps_its_own_line_and_merged_keys_the_line_they_are_written_on() -> None:
    [doc] = documents.load_text(BASE_AND_OVERRIDE, strict=True)
    assert doc.line_of(["web", "replicas"]) == 6
    assert doc.line_of(["web", "image"]) == 2


@pytest.mark.parametrize("strict", [False, True])
def test_of_several_merged_mappings_the_first_wins(strict: bool) -> None:
    text = (
        "zone_a: &zone_a {zone: eu-1a, tier: web}\n"
        "zone_b: &zone_b {zone: eu-1b, disk: ssd}\n"
        "node:\n"
        "  <<: [*zone_a, *zone_b]\n"
        "  tier: api\n"
    )
    [doc] = documents.load_text(text, strict=strict)
    assert doc.data["node"] == {"zone": "eu-1a", "tier": "api", "disk": "ssd"}
    assert doc.line_of(["node", "zone"]) == 1
    assert doc.line_of(["node", "tier"]) == 5


def test_a_merged_mapping_brings_its_own_overrides_along() -> None:
    # PyYAML 6.0.4's safe_load gives {"cpu": "1"} for "pod" here: its flatten_mapping keeps the
    # first merged entry of a key, and "base"'s own override comes after the one it merged.
    text = "defaults: &defaults {cpu: '1'}\nbase: &base\n  <<: *defaults\n  cpu: '2'\npod:\n  <<: *base\n"
    [doc] = documents.load_text(text, strict=True)
    assert doc.data == {"defaults": {"cpu": "1"}, "base": {"cpu": "2"}, "pod": {"cpu": "2"}}


def test_two_keys_the_mapping_writes_itself_are_still_a_duplicate_when_strict() -> None:
    text = "base: &base {image: app:1}\nweb:\n  <<: *base\n  replicas: 3\n  replicas: 4\n"
    with pytest.raises(documents.YamlError, match=r"<stdin>:5: duplicate key 'replicas' \(first at line 4\)"):
        documents.load_text(text, strict=True)
    [doc] = documents.load_text(text)
    assert doc.data["web"] == {"image": "app:1", "replicas": 4}


def test_a_duplicate_inside_an_inline_merged_mapping_is_refused_when_strict() -> None:
    text = "web:\n  <<: {image: a,\n       image: b}\n"
    with pytest.raises(documents.YamlError, match=r"<stdin>:3: duplicate key 'image' \(first at line 2\)"):
        documents.load_text(text, strict=True)


def test_two_merge_keys_in_one_mapping_are_a_duplicate_when_strict() -> None:
    text = "a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: *a\n  <<: *b\n"
    with pytest.raises(documents.YamlError, match=r"<stdin>:5: duplicate key '<<' \(first at line 4\)"):
        documents.load_text(text, strict=True)
    [doc] = documents.load_text(text)
    assert doc.data["c"] == {"x": 1, "y": 2}


def test_one_anchor_merged_twice_is_no_duplicate() -> None:
    [doc] = documents.load_text("a: &a {x: 1}\nb:\n  <<: [*a, *a]\n  y: 2\n", strict=True)
    assert doc.data["b"] == {"x": 1, "y": 2}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a:\n  <<: 1\n", 2, "expected a mapping or list of mappings for merging, but found scalar"),
        ("a:\n  <<:\n  - {x: 1}\n  - [2]\n", 4, "expected a mapping for merging, but found sequence"),
    ],
)
def test_merging_what_is_not_a_mapping_is_an_error_at_its_line(text: str, line: int, message: str) -> None:
    with pytest.raises(documents.YamlError) as info:
        documents.load_text(text, file="m.yaml")
    assert (info.value.file, info.value.line) == ("m.yaml", line)
    assert message in info.value.message


def test_a_mapping_that_merges_itself_is_a_recursive_alias() -> None:
    with pytest.raises(documents.YamlError, match="recursive alias"):
        documents.load_text("a: &a\n  <<: *a\n  x: 1\n")


def test_merged_keys_stay_within_the_alias_budget() -> None:
    # Each level merges the one before twice: 2**30 entries once expanded, refused early.
    levels = ["l0: &l0 {k0: 0, k1: 1}"] + [f"l{i}: &l{i} {{<<: [*l{i - 1}, *l{i - 1}], k{i}: {i}}}" for i in range(1, 30)]
    with pytest.raises(documents.YamlError, match="excessive aliasing"):
        documents.load_text("\n".join(levels) + "\n")


def test_the_shipped_example_cluster_state_loads_strictly(root: Any) -> None:
    [doc] = documents.load_file(root / "examples" / "explain" / "cluster.yaml", strict=True)
    pods = [item for item in doc.data["items"] if item["kind"] == "Pod"]
    assert [p["spec"]["nodeName"] for p in pods] == ["worker-1", "worker-2", "worker-3"]
    assert all(p["spec"]["containers"] == pods[0]["spec"]["containers"] for p in pods)


# ---- property: the same data as PyYAML's own loader --------------------------------------------

# Keys of two letters or more: PyYAML 6.0.4's flatten_mapping drops a merged entry whose key
# *string object* it has already merged, and CPython shares one object for every one-letter
# string, so with one-letter keys it would keep first-merged entries where the rule keeps the
# mapping's own (see test_a_merged_mapping_brings_its_own_overrides_along).
KEYS = ["app", "cpu", "tier", "zone", "disk", "team"]
VALUES = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "yes", "1.5", "~", "web"]), st.booleans())


@dataclass
class Anchored:
    """A mapping written with an anchor: the earlier anchors it merges, and its own entries."""

    merges: list[int]
    own: dict[str, Any]


@st.composite
def merge_documents(draw: st.DrawFn) -> list[Anchored]:
    count = draw(st.integers(1, 5))
    mappings = []
    for index in range(count):
        merges = draw(st.lists(st.integers(0, index - 1), max_size=3)) if index else []
        own = draw(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4))
        mappings.append(Anchored(merges, own))
    return mappings


def render(mappings: list[Anchored], *, flow: bool) -> tuple[str, dict[tuple[str, str], int]]:
    """The YAML text, and the line of every key a mapping writes itself."""
    lines: list[str] = []
    where: dict[tuple[str, str], int] = {}
    for index, mapping in enumerate(mappings):
        lines.append(f"m{index}: &m{index}" + (" {}" if not mapping.merges and not mapping.own else ""))
        if mapping.merges:
            aliases = [f"*m{i}" for i in mapping.merges]
            merged = aliases[0] if len(aliases) == 1 and not flow else "[" + ", ".join(aliases) + "]"
            lines.append(f"  <<: {merged}")
        for key, value in mapping.own.items():
            lines.append(f"  {key}: {yaml.safe_dump(value).removesuffix(chr(10)).removesuffix('...').strip()}")
            where[(f"m{index}", key)] = len(lines)
    return "\n".join(lines) + "\n", where


def expected(mappings: list[Anchored]) -> dict[str, Any]:
    """The rule, stated plainly: merged mappings first to last fill in what is missing, then the
    mapping's own keys win over all of them."""
    built: list[dict[str, Any]] = []
    for mapping in mappings:
        out: dict[str, Any] = {}
        for i in mapping.merges:
            for key, value in built[i].items():
                out.setdefault(key, value)
        out.update(mapping.own)
        built.append(out)
    return {f"m{i}": data for i, data in enumerate(built)}


def pyyaml_agrees(mappings: list[Anchored]) -> bool:
    """Whether PyYAML 6.0.4 keeps the rule here: it lets the last of several merged mappings
    win where they share a key (``<<: [*a, *b]``), where the rule says the first."""
    built = expected(mappings)
    for mapping in mappings:
        seen: set[str] = set()
        for i in dict.fromkeys(mapping.merges):
            keys = set(built[f"m{i}"]) - set(mapping.own)
            if seen & keys:
                return False
            seen |= keys
    return True


@settings(max_examples=300, deadline=None)
@given(mappings=merge_documents(), flow=st.booleans(), strict=st.booleans())
def test_merge_keys_load_as_the_rule_says_with_the_lines_of_the_keys_written(
    mappings: list[Anchored], flow: bool, strict: bool
) -> None:
    text, where = render(mappings, flow=flow)
    [doc] = documents.load_text(text, strict=strict)
    assert doc.data == expected(mappings)
    for (name, key), line in where.items():
        assert doc.line_of([name, key]) == line


@settings(max_examples=300, deadline=None)
@given(mappings=merge_documents(), flow=st.booleans())
def test_merge_keys_load_as_pyyaml_safe_load_loads_them(mappings: list[Anchored], flow: bool) -> None:
    text, _ = render(mappings, flow=flow)
    [doc] = documents.load_text(text)
    if pyyaml_agrees(mappings):
        assert doc.data == yaml.safe_load(text)
