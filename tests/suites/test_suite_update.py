"""``--update`` replaces only the expected object's text and keeps the rest of the file."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook.suites.update import Edits, UpdateError, rewrite, write_object

NEW = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}}
PATH = ("cases", 0, "expect", "object")

BLOCK = """\
# the suite's own comment stays
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementTest
metadata: {name: s}
policies: [p.yaml]   # so does this one
cases:
- name: one
  object: {apiVersion: v1, kind: Pod, metadata: {name: p}}
  expect:
    applied: [x]
    object:
      apiVersion: v1
      kind: Pod   # lost: it is inside the rewritten object
      metadata:
        name: old
    # a comment after the object stays
    unchanged: false
- name: two
  object: {apiVersion: v1, kind: Pod, metadata: {name: q}}
  expect: {unchanged: true}
"""


def test_a_block_object_is_replaced_and_everything_around_it_kept() -> None:
    text = rewrite(BLOCK, [(PATH, 11, NEW)])
    assert yaml.safe_load(text)["cases"][0]["expect"]["object"] == NEW
    before, after = BLOCK.split("    object:\n")
    assert text.startswith(before + "    object:\n      apiVersion: v1\n")
    assert text.endswith(after[after.index("    # a comment after"):])
    assert "lost:" not in text


def test_a_flow_expect_gets_a_flow_object() -> None:
    text = "cases:\n- name: x\n  expect: {object: {kind: Old}, applied: []}\n"
    out = rewrite(text, [(PATH[:1] + (0, "expect", "object"), 3, NEW)])
    assert yaml.safe_load(out)["cases"][0]["expect"] == {"object": NEW, "applied": []}


def test_an_alias_is_replaced_by_the_object_and_the_anchor_left_alone() -> None:
    text = "base: &b {kind: Old}\ncases:\n- expect:\n    object: *b\n    unchanged: false\n"
    out = rewrite(text, [(("cases", 0, "expect", "object"), 4, NEW)])
    data = yaml.safe_load(out)
    assert data["base"] == {"kind": "Old"}
    assert data["cases"][0]["expect"] == {"object": NEW, "unchanged": False}


def test_an_anchor_on_the_object_is_kept() -> None:
    text = "cases:\n- expect:\n    object: &e\n      kind: Old\n    unchanged: false\nother: *e\n"
    out = rewrite(text, [(("cases", 0, "expect", "object"), 3, NEW)])
    assert yaml.safe_load(out)["other"] == NEW


def test_crlf_files_stay_crlf() -> None:
    out = rewrite(BLOCK.replace("\n", "\r\n"), [(PATH, 11, NEW)])
    assert "\n" not in out.replace("\r\n", "")
    assert yaml.safe_load(out)["cases"][0]["expect"]["object"] == NEW


def test_edits_in_several_documents_and_cases_all_land() -> None:
    two = BLOCK + "---\n" + BLOCK
    edits = [(PATH, 11, NEW), (PATH, 11 + BLOCK.count("\n") + 1, {"kind": "Second"})]
    docs = list(yaml.safe_load_all(rewrite(two, edits)))
    assert [d["cases"][0]["expect"]["object"] for d in docs] == [NEW, {"kind": "Second"}]


def test_a_path_that_is_not_there_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(UpdateError, match="cannot find"):
        rewrite(BLOCK, [(PATH, 99, NEW)])


def test_edits_write_the_suite_and_object_files(tmp_path: Path) -> None:
    suite = tmp_path / "s.suite.yaml"
    suite.write_text(BLOCK)
    edits = Edits(suite)
    edits.inline(PATH, 11, NEW)
    edits.object_file(tmp_path / "out" / "expected.json", NEW)
    edits.apply()
    assert yaml.safe_load(suite.read_text())["cases"][0]["expect"]["object"] == NEW
    assert yaml.safe_load((tmp_path / "out" / "expected.json").read_text()) == NEW


def test_two_cases_sharing_an_object_file_must_agree(tmp_path: Path) -> None:
    edits = Edits(tmp_path / "s.suite.yaml")
    edits.object_file(tmp_path / "e.yaml", NEW)
    with pytest.raises(UpdateError, match="different objects"):
        edits.object_file(tmp_path / "e.yaml", {"kind": "Other"})


def test_object_files_are_written_in_the_objects_own_key_order(tmp_path: Path) -> None:
    write_object(tmp_path / "e.yaml", NEW)
    assert (tmp_path / "e.yaml").read_text().splitlines()[:2] == ["apiVersion: v1", "kind: Pod"]
