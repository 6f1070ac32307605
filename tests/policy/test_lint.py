"""The ``lint`` and ``schema`` commands, called through the real CLI dispatcher."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kit.yaml_bombs import billion_laughs
from webhook import cli

PolicyFile = Callable[..., Path]

# CVE-2019-11253's "billion laughs" in a policy: nine levels of nine aliases, 9**9 strings expanded.
BILLION_LAUGHS_POLICY = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: bomb
  annotations:
""" + billion_laughs("    ") + """\
spec:
  scheduling: {schedulerName: s}
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_clean_set_prints_the_count_and_exits_0(policy_file: PolicyFile, capsys: pytest.CaptureFixture[str]) -> None:
    path = policy_file("placement: {nodeSelector: {disktype: ssd}}")
    assert _run(capsys, "lint", str(path.parent)) == (0, "1 policy OK\n", "")


def test_errors_go_to_stderr_as_file_line_field_message_and_exit_1(
    policy_file: PolicyFile, capsys: pytest.CaptureFixture[str]
) -> None:
    path = policy_file("placement: {nodeSelecter: {}}")
    code, out, err = _run(capsys, "lint", str(path))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f'{path}:6: spec.placement.nodeSelecter: unknown field "nodeSelecter"; did you mean "nodeSelector"?',
        "1 error",
    ]


def test_the_count_is_pluralised(policy_file: PolicyFile, capsys: pytest.CaptureFixture[str]) -> None:
    path = policy_file("scheduling: {schedulerName: s}", name="one", file="one.yaml")
    assert _run(capsys, "lint", str(path))[:2] == (0, "1 policy OK\n")
    policy_file("scheduling: {schedulerName: s}", name="two", file="two.yaml")
    assert _run(capsys, "lint", str(path.parent))[:2] == (0, "2 policies OK\n")


def test_a_folder_without_policy_files_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "polcies"  # a typo in a CI path: it exists, but holds no policy
    folder.mkdir()
    (folder / "README.md").write_text("not a policy\n", encoding="utf-8")
    (folder / "spread.suite.yaml").write_text("kind: PlacementTest\n", encoding="utf-8")
    assert _run(capsys, "lint", str(folder)) == (2, "", f"placement-webhook lint: no policy files under {folder}\n")


def test_each_path_without_policy_files_is_named_even_beside_one_with_policies(
    policy_file: PolicyFile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = policy_file("scheduling: {schedulerName: s}")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _run(capsys, "lint", str(good), str(empty)) == (2, "", f"placement-webhook lint: no policy files under {empty}\n")


def test_a_billion_laughs_policy_is_a_load_error_naming_file_and_line(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write("bomb.yaml", BILLION_LAUGHS_POLICY)
    started = time.monotonic()
    code, out, err = _run(capsys, "lint", str(path))
    assert time.monotonic() - started < 5, "lint must refuse the expansion, not run it"
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{path}:9: document contains excessive aliasing", "1 error"]  # the line of d: [*c, ...]


def test_a_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "lint", str(tmp_path / "nope"))
    assert (code, out) == (2, "")
    assert "nope: no such file or directory" in err


def test_the_default_path_is_policies_in_the_working_directory(
    policy_file: PolicyFile, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = policy_file("scheduling: {schedulerName: s}", file="policies/p.yaml")
    monkeypatch.chdir(path.parent.parent)
    assert _run(capsys, "lint")[:2] == (0, "1 policy OK\n")


def test_a_bad_kinds_config_is_a_usage_error(
    policy_file: PolicyFile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = policy_file("scheduling: {schedulerName: s}")
    config = tmp_path / "kinds.yaml"
    config.write_text("kinds: [{kind: Widget}]\n", encoding="utf-8")
    assert _run(capsys, "lint", "--kinds-config", str(config), str(path))[0] == 2


def test_extra_kinds_from_a_config_file_are_known_to_lint(
    policy_file: PolicyFile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = policy_file("match: {kinds: [example.com/Widget]}\nscheduling: {schedulerName: s}")
    config = tmp_path / "kinds.yaml"
    config.write_text(
        "kinds:\n- {group: example.com, version: v1, kind: Widget, podSpecPath: /spec/pod, podLabelsPath: /metadata/labels}\n",
        encoding="utf-8",
    )
    assert _run(capsys, "lint", str(path))[0] == 1
    assert _run(capsys, "lint", "--kinds-config", str(config), str(path))[:2] == (0, "1 policy OK\n")


class TestConflicts:
    """Two policies that can select one object and set a scalar field differently."""

    def _lint(self, policy_file: PolicyFile, capsys: pytest.CaptureFixture[str], a: str, b: str) -> tuple[int, str]:
        policy_file(a, name="first", file="a.yaml")
        path = policy_file(b, name="second", file="b.yaml")
        code, _, err = _run(capsys, "lint", str(path.parent))
        return code, err

    @pytest.mark.parametrize("field", ["priorityClassName", "schedulerName"])
    def test_overlapping_policies_setting_different_values_are_reported(
        self, policy_file: PolicyFile, capsys: pytest.CaptureFixture[str], field: str
    ) -> None:
        code, err = self._lint(
            policy_file, capsys,
            f"order: 1\nmatch: {{kinds: [Deployment], namespaces: ['team-*']}}\nscheduling: {{{field}: one}}",
            f"order: 2\nmatch: {{kinds: [Deployment, StatefulSet], namespaces: [team-a]}}\nscheduling: {{{field}: two}}",
        )
        assert code == 1
        assert f"b.yaml:8: spec.scheduling.{field}: conflicts with policy 'first' (" in err
        assert "a.yaml:8), which sets 'one'" in err

    def test_preemption_policy_conflicts_are_reported(
        self, policy_file: PolicyFile, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, err = self._lint(
            policy_file, capsys,
            "scheduling: {preemptionPolicy: Never}", "scheduling: {preemptionPolicy: PreemptLowerPriority}",
        )
        assert code == 1 and "spec.scheduling.preemptionPolicy: conflicts with policy" in err

    @pytest.mark.parametrize(
        ("match_a", "match_b"),
        [
            ("kinds: [Deployment]", "kinds: [StatefulSet]"),
            ("namespaces: [prod]", "namespaces: [staging, 'dev-*']"),
            ("namespaces: ['team-a-*']", "namespaces: ['team-b-*']"),
            ("names: ['api-*']", "names: ['web-*']"),
            ("selector: {matchLabels: {tier: web}}", "selector: {matchLabels: {tier: db}}"),
            ("selector: {matchLabels: {tier: web}}",
             "selector: {matchExpressions: [{key: tier, operator: NotIn, values: [web]}]}"),
            ("podSelector: {matchExpressions: [{key: gpu, operator: Exists}]}",
             "podSelector: {matchExpressions: [{key: gpu, operator: DoesNotExist}]}"),
            ("operations: [CREATE]", "operations: [UPDATE]"),
            ("annotations: {team.example.com/owner: 'a-*'}", "annotations: {team.example.com/owner: 'b-*'}"),
            ("namespaces: [prod]", "excludeNamespaces: [prod]"),
        ],
    )
    def test_policies_that_cannot_select_the_same_object_do_not_conflict(
        self, policy_file: PolicyFile, capsys: pytest.CaptureFixture[str], match_a: str, match_b: str
    ) -> None:
        code, err = self._lint(
            policy_file, capsys,
            f"match: {{{match_a}}}\nscheduling: {{priorityClassName: one}}",
            f"match: {{{match_b}}}\nscheduling: {{priorityClassName: two}}",
        )
        assert (code, err) == (0, "")

    def test_equal_values_and_audit_policies_are_not_conflicts(
        self, policy_file: PolicyFile, capsys: pytest.CaptureFixture[str]
    ) -> None:
        policy_file("scheduling: {priorityClassName: same}", name="a", file="a.yaml")
        policy_file("scheduling: {priorityClassName: same}", name="b", file="b.yaml")
        path = policy_file("enforcement: audit\nscheduling: {priorityClassName: other}", name="c", file="c.yaml")
        assert _run(capsys, "lint", str(path.parent))[:2] == (0, "3 policies OK\n")


NEVER = [
    ("only-delete", "match: {operations: [DELETE, CONNECT]}\nscheduling: {schedulerName: s}", 6,
     "spec.match.operations", "admission never mutates these"),
    ("all-namespaces-excluded", ("match: {namespaces: [prod, 'team-*'], excludeNamespaces: ['*']}\n"
     "scheduling: {schedulerName: s}"), 6, "spec.match.namespaces", "every namespace"),
    ("listed-namespace-excluded", ("match: {namespaces: [prod]}\nexclude: {namespaces: ['pro*']}\n"
     "scheduling: {schedulerName: s}"), 6, "spec.match.namespaces", "every namespace"),
    ("all-kinds-excluded", ("match: {kinds: [Deployment]}\nexclude: {kinds: [apps/v1/Deployment]}\n"
     "scheduling: {schedulerName: s}"), 7, "spec.exclude.kinds", "every kind"),
    ("all-names-excluded", "match: {names: [api]}\nexclude: {names: ['*']}\nscheduling: {schedulerName: s}", 6,
     "spec.match.names", "every name"),
    ("contradictory-selector", ("match:\n  selector:\n    matchLabels: {tier: web}\n    matchExpressions:\n"
     "    - {key: tier, operator: In, values: [db]}\nscheduling: {schedulerName: s}"), 7, "spec.match.selector",
     "contradicts itself"),
    ("rollout-for-statefulsets", "match: {kinds: [StatefulSet]}\nrollout: {mode: safe}", 7, "spec.rollout",
     "Deployments only"),
    ("vm-for-deployments", "match: {kinds: [Deployment]}\nvm: {evictionStrategy: LiveMigrate}", 7, "spec.vm",
     "KubeVirt kinds only"),
    ("spread-for-daemonsets", "match: {kinds: [DaemonSet]}\nplacement:\n  podAntiAffinity: {spread: required}", 8,
     "spec.placement.podAntiAffinity.spread", "already run one pod per node"),
    ("empty-placement", "placement: {}", 6, "spec.placement", "placement is empty"),
    ("empty-scheduling", "scheduling: {}", 6, "spec.scheduling", "scheduling is empty"),
    ("does-nothing", "description: nothing", 5, "spec", "the policy does nothing"),
]


@pytest.mark.parametrize(("spec", "line", "field", "fragment"), [c[1:] for c in NEVER], ids=[c[0] for c in NEVER])
def test_policies_that_can_never_apply_are_findings(
    policy_file: PolicyFile, capsys: pytest.CaptureFixture[str], spec: str, line: int, field: str, fragment: str
) -> None:
    path = policy_file(spec)
    code, out, err = _run(capsys, "lint", str(path))
    assert (code, out) == (1, "")
    [finding, summary] = err.splitlines()
    assert finding.startswith(f"{path}:{line}: {field}: ") and fragment in finding
    assert summary == "1 finding"


def test_schema_prints_an_indented_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "schema")
    schema = json.loads(out)
    assert code == 0 and out.startswith('{\n  "')
    assert schema["title"] == "PlacementPolicy" and schema["additionalProperties"] is False


TWO_ZONES = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: zone-a}
spec:
  match: {kinds: [Deployment]}
  placement:
    nodeAffinity:
      required: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]
---
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: zone-b}
spec:
  match: {kinds: [Deployment, StatefulSet]}
  placement:
    nodeAntiAffinity:
      required: [{matchExpressions: [{key: zone, operator: NotIn, values: [b]}]}]
"""


def test_two_policies_whose_required_affinities_together_match_no_node_are_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "zones.yaml"
    path.write_text(TWO_ZONES)
    code, out, err = _run(capsys, "lint", str(path))
    assert (code, out) == (1, "")
    [finding, summary] = err.splitlines()
    assert finding.startswith(f"{path}:15: spec.placement: together with policy 'zone-a'")
    assert "can match no node: zone In [a] and zone In [b]" in finding
    assert summary == "1 finding"


def test_the_same_two_policies_for_disjoint_kinds_are_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "zones.yaml"
    path.write_text(TWO_ZONES.replace("kinds: [Deployment, StatefulSet]", "kinds: [StatefulSet]"))
    assert _run(capsys, "lint", str(path))[0] == 0


def test_a_policy_whose_own_required_affinity_contradicts_itself_can_never_apply(
    policy_file: PolicyFile, capsys: pytest.CaptureFixture[str]
) -> None:
    path = policy_file("""
        placement:
          nodeAffinity:
            required: [{matchExpressions: [{key: gpu, operator: Exists}]}]
          nodeAntiAffinity:
            required: [{matchExpressions: [{key: gpu, operator: Exists}]}]
    """)
    code, _, err = _run(capsys, "lint", str(path))
    assert code == 1 and "can never apply: required node affinity contradicts itself" in err


MERGED_POLICIES = """\
apiVersion: v1
kind: List
items:
- apiVersion: placement.novasphere.dev/v1alpha1
  kind: PlacementPolicy
  metadata: {name: web-on-ssd}
  spec: &ssd
    match: {kinds: [Deployment], namespaces: [web]}
    placement: {nodeSelector: {disktype: ssd}}
- apiVersion: placement.novasphere.dev/v1alpha1
  kind: PlacementPolicy
  metadata: {name: api-on-ssd}
  spec:
    <<: *ssd
    match: {kinds: [Deployment], namespaces: [api]}
"""


def test_a_policy_may_override_what_it_merges_with_a_yaml_merge_key(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write("merged.yaml", MERGED_POLICIES)
    assert _run(capsys, "lint", str(path)) == (0, "2 policies OK\n", "")


def test_an_error_in_a_key_that_overrides_a_merged_one_names_its_own_line(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write("merged.yaml", MERGED_POLICIES.replace("namespaces: [api]", "namespace: [api]"))
    code, out, err = _run(capsys, "lint", str(path))
    assert (code, out) == (1, "")
    assert err.splitlines()[0].startswith(f"{path}:15: items[1].spec.match.namespace: unknown field")


def test_a_key_written_twice_beside_a_merge_key_is_still_a_duplicate(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write("merged.yaml", MERGED_POLICIES + "    match: {kinds: [Deployment], namespaces: [jobs]}\n")
    code, out, err = _run(capsys, "lint", str(path))
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{path}:16: duplicate key 'match' (first at line 15)", "1 error"]
