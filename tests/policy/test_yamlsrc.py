"""YAML loading with line numbers: the base of every ``file:line`` message."""
from __future__ import annotations

from pathlib import Path

import pytest

from webhook.files import documents


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


def test_unreadable_files_are_yaml_errors(tmp_path: Path) -> None:
    with pytest.raises(documents.YamlError, match="No such file"):
        documents.load_file(tmp_path / "missing.yaml")
