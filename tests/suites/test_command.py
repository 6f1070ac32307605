"""``placement-webhook test``: output, exit codes, broken suites, --junit and --update."""
from __future__ import annotations

import argparse
import io
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.commands import test as test_command

from .helpers import WEB, case, web_with_ssd, write_suite


def run(*paths: Path, junit: Path | None = None, update: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = test_command.run_suites(paths=[str(p) for p in paths], junit=str(junit) if junit else None,
                             update=update, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def mixed_suite(folder: Path) -> Path:
    return write_suite(folder, [
        case("adds ssd", {"applied": ["ssd"]}),
        case("claims nothing happens", {"unchanged": True}),
        case("expects the wrong object", {"object": WEB}),
    ])


def test_all_passing_exits_0_with_one_line_per_case_and_the_summary_last(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [case("adds ssd", {"applied": ["ssd"]}), case("patches", {"result": "patched"})])
    code, out, err = run(path)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"PASS {path}:") and lines[0].endswith(": ssd: adds ssd")
    assert lines[1].endswith(": ssd: patches")
    assert lines[-1] == "2 passed, 0 failed"


def test_a_failure_exits_1_and_shows_a_diff_under_its_line(tmp_path: Path) -> None:
    code, out, _ = run(mixed_suite(tmp_path))
    assert code == 1
    assert out.splitlines()[-1] == "1 passed, 2 failed"
    failed = out[out.index("ssd: expects the wrong object"):]
    assert "    object: the result differs from the expected object" in failed
    assert "    --- expected" in failed and "    +++ actual" in failed
    assert "    +      nodeSelector:" in failed


def test_the_line_of_a_case_points_at_it_in_the_suite_file(tmp_path: Path) -> None:
    path = mixed_suite(tmp_path)
    _, out, _ = run(path)
    line = int(out.splitlines()[1].split(":")[1])
    assert path.read_text().splitlines()[line - 1].lstrip("- ").startswith("name: claims nothing happens")


BROKEN = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementTest
metadata: {name: broken}
policies: [ssd.yaml]
cases:
- name: typo
  object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}}
  expect:
    objct: {}
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BROKEN, 'broken.suite.yaml:9: cases[0].expect.objct: unknown field "objct"; did you mean "object"?'),
        (BROKEN.replace("[ssd.yaml]", "[sdd.yaml]").replace("objct: {}", "unchanged: true"),
         "broken.suite.yaml:4: policies[0]: no such file or directory"),
        (BROKEN.replace("  object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}}",
                        "  objectFile: testdata/missing.yaml").replace("objct: {}", "unchanged: true"),
         "broken.suite.yaml:7: cases[0].objectFile: cannot read"),
        (BROKEN.replace("objct: {}", "objectFile: missing.out.yaml"),
         "broken.suite.yaml:9: cases[0].expect.objectFile: cannot read"),
        (BROKEN.replace("policies: [ssd.yaml]\n", "").replace("objct: {}", "unchanged: true"),
         "broken.suite.yaml:1: policies: required field is missing"),
        (BROKEN.replace("name: typo", "name: [typo"), "broken.suite.yaml:7: invalid YAML"),
        ("", "broken.suite.yaml:1: no PlacementTest document in the file"),
    ],
)
def test_a_broken_suite_exits_2_with_file_line_errors(tmp_path: Path, text: str, expected: str) -> None:
    write_suite(tmp_path, [case("x", {"applied": ["ssd"]})])
    (tmp_path / "broken.suite.yaml").write_text(text)
    code, _, err = run(tmp_path / "broken.suite.yaml")
    assert code == 2
    assert any(line.startswith(str(tmp_path / expected)) for line in err.splitlines()), err


def test_policies_that_do_not_load_break_the_suite_with_the_policy_files_errors(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [case("x", {"applied": ["ssd"]})])
    (tmp_path / "ssd.yaml").write_text((tmp_path / "ssd.yaml").read_text().replace("nodeSelector", "nodeSelectr"))
    code, _, err = run(path)
    assert code == 2
    assert "ssd.suite.yaml:5: policies: the policies under test do not load" in err
    assert f"{tmp_path / 'ssd.yaml'}:" in err and "nodeSelectr" in err


def test_a_broken_suite_does_not_stop_the_others_from_running(tmp_path: Path) -> None:
    write_suite(tmp_path, [case("fine", {"applied": ["ssd"]})])
    (tmp_path / "broken.suite.yaml").write_text(BROKEN)
    code, out, err = run(tmp_path)
    assert code == 2
    assert "PASS" in out and out.splitlines()[-1] == "1 passed, 0 failed"
    assert "objct" in err


def test_no_suites_found_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run(tmp_path)
    assert code == 2 and "no *.suite.yaml files" in err


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run(tmp_path / "nope")
    assert code == 2 and "no such file or directory" in err


def test_junit_xml_parses_back_with_the_right_counts(tmp_path: Path) -> None:
    mixed_suite(tmp_path / "a")
    write_suite(tmp_path / "b", [case("fine", {"applied": ["ssd"]})], name="other")
    (tmp_path / "b" / "broken.suite.yaml").write_text(BROKEN)
    report = tmp_path / "reports" / "junit.xml"
    code, _, _ = run(tmp_path, junit=report)
    assert code == 2
    root = ET.parse(report).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("5", "2", "1")
    by_name = {s.get("name"): s for s in root.findall("testsuite")}
    assert by_name["ssd"].get("tests") == "3" and by_name["ssd"].get("failures") == "2"
    assert by_name["other"].get("tests") == "1" and by_name["other"].get("failures") == "0"
    failure = by_name["ssd"].find("testcase[@name='expects the wrong object']/failure")
    assert failure is not None and "+++ actual" in (failure.text or "")
    [broken] = [s for s in root.findall("testsuite") if s.get("errors") == "1"]
    error = broken.find("testcase/error")
    assert error is not None and "objct" in error.get("message", "")


def test_update_rewrites_a_stale_inline_object_and_the_next_run_passes(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [case("stale", {"object": WEB, "applied": ["ssd"]}), case("other", {"applied": ["ssd"]})])
    text = path.read_text()
    code, out, err = run(path, update=True)
    assert code == 0 and "UPDATED" in out and "updated the expected object of 1 case(s)" in err
    data = yaml.safe_load(path.read_text())
    assert data["cases"][0]["expect"] == {"object": web_with_ssd(), "applied": ["ssd"]}
    assert path.read_text().split("- name: other")[1] == text.split("- name: other")[1]
    assert run(path)[0] == 0


def test_update_writes_a_missing_or_stale_expected_object_file(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [case("new", {"objectFile": "testdata/web.out.yaml"})])
    assert run(path)[0] == 2
    code, out, _ = run(path, update=True)
    assert code == 0 and "UPDATED" in out
    assert yaml.safe_load((tmp_path / "testdata" / "web.out.yaml").read_text()) == web_with_ssd()
    assert run(path) == (0, run(path)[1], "")


def test_update_leaves_passing_cases_and_other_expectations_alone(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [case("right", {"object": web_with_ssd()}), case("wrong", {"object": WEB, "unchanged": True})])
    before = path.read_text()
    code, out, _ = run(path, update=True)
    assert code == 1
    assert "PASS" in out.splitlines()[0] and "FAIL" in out.splitlines()[1]
    assert "unchanged: expected no patch" in out
    data = yaml.safe_load(path.read_text())
    assert data["cases"][0] == yaml.safe_load(before)["cases"][0]
    assert data["cases"][1]["expect"] == {"object": web_with_ssd(), "unchanged": True}


def test_the_command_line_takes_paths_junit_and_update() -> None:
    parser = argparse.ArgumentParser()
    test_command.configure(parser)
    args = parser.parse_args(["a", "b", "--junit", "out.xml", "--update"])
    assert (args.paths, args.junit, args.update) == (["a", "b"], "out.xml", True)
    assert parser.parse_args([]).paths == ["policies"]


def test_the_placement_webhook_entry_point_runs_suites(tmp_path: Path, capsys: Any) -> None:
    from webhook import cli

    path = write_suite(tmp_path, [case("adds ssd", {"applied": ["ssd"]})])
    assert cli.main(["test", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 0 failed"
