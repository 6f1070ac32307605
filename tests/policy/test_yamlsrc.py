"""YAML loading with line numbers: the base of every ``file:line`` message."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.kit.yaml_bombs import billion_laughs
from webhook.files import documents

ROOT = Path(__file__).resolve().parents[2]


def test_every_path_knows_its_line_and_map_entries_use_the_key_line() -> None:
    [doc] = documents.load_text("a:\n  b:\n  - x: 1\n    y: [2, 3]\n  - z\n")
    assert doc.lines[("a",)] == 1
    assert doc.lines[("a", "b")] == 2
    assert doc.lines[("a", "b", 0)] == 3
    assert doc.lines[("a", "b", 0, "y")] == 4
    assert doc.lines[("a", "b", 1)] == 5


def test_line_of_a_missing_path_is_its_deepest_known_ancestor() -> None:
    [doc] = documents.load_text("top: 1\nspec:\n  match: {}\n")
    assert doc.line_of(["spec", "match", "kinds", 0]) == 3
    assert doc.line_of(["nothing", "here"]) == doc.line == 1


def test_documents_know_where_they_start_and_empty_ones_are_dropped() -> None:
    docs = documents.load_text("---\na: 1\n---\n# only a comment\n---\n\n---\nb: 2\n---\n", file="f.yaml")
    assert [(d.data, d.line, d.file) for d in docs] == [({"a": 1}, 2, "f.yaml"), ({"b": 2}, 8, "f.yaml")]


def test_crlf_and_a_byte_order_mark_change_nothing() -> None:
    plain = documents.load_text("a: 1\nb:\n  c: x\n")
    windows = documents.load_text("\ufeffa: 1\r\nb:\r\n  c: x\r\n")
    assert [(d.data, dict(d.lines)) for d in windows] == [(d.data, dict(d.lines)) for d in plain]


def test_anchors_aliases_and_merge_keys_resolve_to_plain_data() -> None:
    [doc] = documents.load_text("base: &b {x: 1}\nuse: *b\nmerged:\n  <<: *b\n  y: 2\n")
    assert doc.data == {"base": {"x": 1}, "use": {"x": 1}, "merged": {"x": 1, "y": 2}}


def test_timestamps_stay_the_text_that_was_written() -> None:
    [doc] = documents.load_text("when: 2024-01-02\n")
    assert doc.data == {"when": "2024-01-02"}


def test_syntax_errors_name_file_and_line() -> None:
    with pytest.raises(documents.YamlError) as info:
        documents.load_text("a: 1\nb: c: d\n", file="bad.yaml")
    assert (info.value.file, info.value.line) == ("bad.yaml", 2)
    assert str(info.value).startswith("bad.yaml:2: invalid YAML")


def test_duplicate_keys_are_kept_last_by_default_and_rejected_when_strict() -> None:
    [doc] = documents.load_text("a: 1\na: 2\n")
    assert doc.data == {"a": 2}
    with pytest.raises(documents.YamlError, match="<stdin>:2: duplicate key 'a' \\(first at line 1\\)"):
        documents.load_text("a: 1\na: 2\n", strict=True)


def test_recursive_aliases_are_an_error_not_a_hang() -> None:
    with pytest.raises(documents.YamlError, match="recursive alias"):
        documents.load_text("a: &x\n  b: *x\n")


@pytest.mark.parametrize(
    ("name", "text", "data"),
    [
        ("p.json", '{\n  "a": [1, 2],\n  "b": {"c": null}\n}\n', {"a": [1, 2], "b": {"c": None}}),
        ("tabs.json", '{\n\t"a": "x\\/y"\n}\n', {"a": "x/y"}),  # JSON that YAML 1.1 rejects
        ("p.yml", "a: b\n", {"a": "b"}),
    ],
)
def test_files_load_as_yaml_or_json(tmp_path: Path, name: str, text: str, data: object) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    [doc] = documents.load_file(path)
    assert doc.data == data and doc.file == str(path)


def test_invalid_json_reports_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "a": 1,\n  "b": [1, 2\n}\n', encoding="utf-8")
    with pytest.raises(documents.YamlError) as info:
        documents.load_file(path)
    assert info.value.line == 4 and "invalid JSON" in info.value.message


def test_unreadable_files_are_yaml_errors_that_name_no_line(tmp_path: Path) -> None:
    with pytest.raises(documents.YamlError) as info:
        documents.load_file(tmp_path / "missing.yaml")
    assert info.value.line == 0
    assert str(info.value) == f"{tmp_path / 'missing.yaml'}: no such file or directory"


# The "billion laughs" of CVE-2019-11253: nine levels of nine aliases, 9**9 strings once expanded.
BILLION_LAUGHS = billion_laughs("")


def test_a_billion_laughs_document_is_refused_quickly_as_excessive_aliasing_at_an_alias_line() -> None:
    started = time.monotonic()
    with pytest.raises(documents.YamlError) as info:
        documents.load_text(BILLION_LAUGHS, file="bomb.yaml")
    assert time.monotonic() - started < 5, "the expansion must stop early, not run to its end"
    assert info.value.message == "document contains excessive aliasing"
    assert info.value.file == "bomb.yaml"
    assert info.value.line == 4, "the line of the alias being expanded when the budget ran out"


def test_a_small_document_may_be_almost_all_aliases() -> None:
    # go-yaml checks the ratio only past 1000 decoded nodes: small documents are never refused.
    text = "base: &b [1, 2, 3]\nuses: [" + ", ".join(["*b"] * 150) + "]\n"
    [doc] = documents.load_text(text)
    assert doc.data["uses"] == [[1, 2, 3]] * 150


def test_many_merge_keys_of_one_anchor_still_load() -> None:
    text = "defaults: &d {cpu: 1, memory: 2}\n" + "".join(f"item{i}:\n  <<: *d\n  name: n{i}\n" for i in range(500))
    [doc] = documents.load_text(text)
    assert doc.data["item499"] == {"cpu": 1, "memory": 2, "name": "n499"}
    assert doc.lines[("item499", "name")] == 1 + 3 * 499 + 3


def test_the_depth_limit_is_ten_thousand_or_the_parsers_own_when_lower() -> None:
    limit = documents.max_depth()
    assert 1 < limit <= documents.MAX_DEPTH == 10_000
    # The limit is exactly what the installed parser reads: one more level is what it refuses.
    list(yaml.parse("[" * limit + "]" * limit, Loader=documents._Loader))
    if limit < documents.MAX_DEPTH:
        with pytest.raises(yaml.YAMLError, match="maximum nesting depth"):
            list(yaml.parse("[" * (limit + 1) + "]" * (limit + 1), Loader=documents._Loader))


def test_the_limit_loads_and_one_more_level_is_refused_with_its_line() -> None:
    limit = documents.max_depth()
    inner = limit - 1  # the mapping holding the sequence is a level too
    [doc] = documents.load_text("a:\n  " + "[" * inner + "]" * inner + "\n")
    assert doc.data["a"] is not None
    with pytest.raises(documents.YamlError) as info:
        documents.load_text("a:\n  " + "[" * limit + "]" * limit + "\n", file="deep.yaml")
    assert str(info.value) == f"deep.yaml:2: document nests deeper than {limit} levels"


def test_deep_block_nesting_is_refused_with_the_same_message_and_its_line() -> None:
    limit = documents.max_depth()
    text = "".join("  " * i + "k:\n" for i in range(limit + 5)) + "  " * (limit + 5) + "v\n"
    with pytest.raises(documents.YamlError, match=rf"^block.yaml:\d+: document nests deeper than {limit} levels$"):
        documents.load_text(text, file="block.yaml")


def test_a_syntax_error_in_a_deep_document_is_still_a_syntax_error() -> None:
    depth = documents.max_depth() // 2 + 10
    text = "[" * depth + "a: }" + "]" * depth + "\n" + "[" * depth + "]" * depth
    with pytest.raises(documents.YamlError, match="invalid YAML"):
        documents.load_text(text, file="bad.yaml")


def test_a_million_levels_are_refused_before_libyaml_recurses_into_a_crash() -> None:
    # libyaml's composer recurses in C: without a depth check first, this overflows the stack.
    script = (
        "from webhook.files import documents\n"
        "try:\n"
        "    documents.load_text('[' * 1_000_000 + ']' * 1_000_000)\n"
        "except documents.YamlError as exc:\n"
        "    print(exc)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120, cwd=ROOT)
    limit = documents.max_depth()
    assert (run.returncode, run.stdout) == (0, f"<stdin>:1: document nests deeper than {limit} levels\n"), run.stderr


def test_a_json_file_too_deep_for_yaml_is_refused_and_not_retried_as_json(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    depth = documents.max_depth() + 1
    path.write_text("[" * depth + "]" * depth, encoding="utf-8")
    with pytest.raises(documents.YamlError, match=f"deep.json:1: document nests deeper than {depth - 1} levels"):
        documents.load_file(path)


def test_deep_json_that_only_the_json_fallback_reads_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    key = "k" * 1100  # YAML's implicit keys stop at 1024 characters; JSON's do not
    path.write_text(f'{{"{key}": ' + "[" * 5_000 + "]" * 5_000 + "}\n", encoding="utf-8")
    with pytest.raises(documents.YamlError, match="long.json:1: invalid JSON: nests too deeply"):
        documents.load_file(path)


def test_bulk_json_skips_the_line_map_and_reads_the_same_data(tmp_path: Path) -> None:
    dump = tmp_path / "state.yaml"  # kubectl get -o json output saved under any name
    dump.write_text('{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a"}}]}')
    (fast,) = documents.load_file(dump, locate=False)
    (slow,) = documents.load_file(dump)
    assert fast.data == slow.data and fast.lines == {(): 1} and len(slow.lines) > 1


def test_bulk_json_that_is_broken_still_names_its_line(tmp_path: Path) -> None:
    dump = tmp_path / "state.json"
    dump.write_text('{\n  "kind": "List",\n  "items": [,]\n}')
    with pytest.raises(documents.YamlError, match=r"state.json:3: invalid JSON"):
        documents.load_file(dump, locate=False)
