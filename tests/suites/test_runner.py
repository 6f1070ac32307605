"""Suites run through admission.admit: every expectation type, passing and failing."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.kit.policies import SSD_POLICY
from webhook.suites import load
from webhook.suites import run as suite_run

from .helpers import (
    APPLIED,
    SSD_PATCH,
    WEB,
    case,
    web_with_ssd,
    write_suite,
)


def outcome_of(tmp_path: Path, expect: dict[str, Any], **extra: Any) -> suite_run.CaseResult:
    path = write_suite(tmp_path, [case("the case", expect, **extra)])
    [result] = suite_run.run([path]).results
    return result


SKIPPED = {**WEB, "metadata": {**WEB["metadata"], "annotations": {"placement.novasphere.dev/skip": "true"}}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}


@pytest.mark.parametrize(
    ("expect", "extra"),
    [
        ({"object": web_with_ssd()}, {}),
        ({"patch": SSD_PATCH}, {}),
        ({"contains": {"spec": {"template": {"spec": {"nodeSelector": {"disktype": "ssd"}}}}}}, {}),
        ({"absent": ["/spec/template/spec/affinity"]}, {}),
        ({"applied": ["ssd"], "audited": []}, {}),
        ({"unchanged": False, "result": "patched"}, {}),
        ({"unchanged": True, "result": "skipped", "warnings": ["skip"]}, {"object": SKIPPED}),
        ({"unchanged": True, "result": "ignored"}, {"object": SERVICE}),
        ({"unchanged": True, "result": "ignored"}, {"operation": "DELETE"}),
        ({"unchanged": True, "applied": []}, {"object": web_with_ssd()}),
    ],
)
def test_an_expectation_admission_meets_passes(tmp_path: Path, expect: dict[str, Any], extra: dict[str, Any]) -> None:
    result = outcome_of(tmp_path, expect, **extra)
    assert result.passed, [f.render() for f in result.failures]


@pytest.mark.parametrize(
    ("expect", "failed"),
    [
        ({"object": WEB}, ["object"]),
        ({"patch": SSD_PATCH[:1]}, ["patch"]),
        ({"contains": {"spec": {"template": {"spec": {"nodeSelector": {"disktype": "hdd"}}}}}}, ["contains"]),
        ({"absent": ["/spec/template/spec/nodeSelector"]}, ["absent"]),
        ({"applied": []}, ["applied"]),
        ({"audited": ["ssd"]}, ["audited"]),
        ({"warnings": ["^never said$"]}, ["warnings"]),
        ({"unchanged": True}, ["unchanged"]),
        ({"result": "unchanged"}, ["result"]),
    ],
)
def test_an_expectation_admission_misses_fails(tmp_path: Path, expect: dict[str, Any], failed: list[str]) -> None:
    result = outcome_of(tmp_path, expect)
    assert [f.expectation for f in result.failures] == failed


def test_the_namespace_defaults_to_the_objects_own_and_can_be_overridden(tmp_path: Path) -> None:
    policy = SSD_POLICY.replace("kinds: [Deployment]", "kinds: [Deployment]\n    namespaces: [prod]")
    path = write_suite(tmp_path, [
        case("own namespace", {"applied": ["ssd"]}),
        case("other namespace", {"unchanged": True}, namespace="dev"),
    ])
    (tmp_path / "ssd.yaml").write_text(policy)
    assert [r.passed for r in suite_run.run([path]).results] == [True, True]


def test_objects_and_expected_objects_may_come_from_files(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "testdata").mkdir()
    (tmp_path / "testdata" / "web.yaml").write_text(yaml.safe_dump(WEB))
    (tmp_path / "testdata" / "web.out.json").write_text(__import__("json").dumps(web_with_ssd()))
    path = write_suite(tmp_path, [{"name": "files", "objectFile": "testdata/web.yaml",
                                   "expect": {"objectFile": "testdata/web.out.json"}}])
    [result] = suite_run.run([path]).results
    assert result.passed, [f.render() for f in result.failures]


def test_inline_policies_are_loaded_like_policy_files(tmp_path: Path) -> None:
    import yaml

    inline = yaml.safe_load(SSD_POLICY.replace("name: ssd", "name: inline-ssd"))
    path = write_suite(tmp_path, [case("inline", {"applied": ["inline-ssd"]})], policies=[inline])
    assert suite_run.run([path]).results[0].passed


def test_a_suite_sees_a_policy_that_refuses_the_skip_annotation_apply(tmp_path: Path) -> None:
    import yaml

    refusing = yaml.safe_load(SSD_POLICY.replace("name: ssd", "name: residency").replace("spec:", "spec:\n  allowSkip: false"))
    path = write_suite(tmp_path, [
        case("skip refused", {"applied": ["residency"], "result": "patched", "warnings": ["skip refused"]},
             object=SKIPPED),
    ], policies=[refusing])
    [result] = suite_run.run([path]).results
    assert result.passed, result


def test_a_cluster_view_reaches_admission(tmp_path: Path) -> None:
    policy = SSD_POLICY.replace("kinds: [Deployment]", "kinds: [Deployment]\n    namespaceSelector: {matchLabels: {env: prod}}")
    cluster = {"namespaces": {"prod": {"env": "prod"}, "dev": {"env": "dev"}}}
    path = write_suite(tmp_path, [
        case("labelled namespace", {"applied": ["ssd"]}, cluster=cluster),
        case("other namespace", {"applied": []}, cluster=cluster, namespace="dev"),
    ])
    (tmp_path / "ssd.yaml").write_text(policy)
    assert [r.passed for r in suite_run.run([path]).results] == [True, True]


def test_cases_do_not_share_state_through_the_input_object(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [case("first", {"applied": ["ssd"]}), case("second", {"applied": ["ssd"]})])
    [loaded] = load.load_suites(path)
    for _ in range(2):
        result, _produced = suite_run.run_case(loaded, loaded.cases[0])
        assert result.passed
    assert APPLIED not in str(loaded.cases[0].object)


def test_discovery_finds_suite_files_in_folders_and_skips_hidden_ones(tmp_path: Path) -> None:
    write_suite(tmp_path / "a", [case("x", {"applied": ["ssd"]})])
    write_suite(tmp_path / "b" / "deeper", [case("x", {"applied": ["ssd"]})], file="more.suite.yml")
    write_suite(tmp_path / ".hidden", [case("x", {"applied": ["ssd"]})])
    (tmp_path / "a" / "notes.yaml").write_text("a: b\n")
    found = load.discover([tmp_path])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["a/ssd.suite.yaml", "b/deeper/more.suite.yml"]


def test_discovery_of_a_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        load.discover([tmp_path / "nope"])
