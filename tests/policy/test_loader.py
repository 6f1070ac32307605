"""Loading policy folders: every error at once, names unique, never half-loaded, defaults."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from webhook.files import documents as yamlsrc
from webhook.kube.kinds import BUILTIN
from webhook.policy import loader

Write = Callable[[str, str], Path]
PolicyFile = Callable[..., Path]
GOOD = "placement:\n  nodeSelector: {disktype: ssd}"


def _errors(*paths: Path) -> list[loader.LoadError]:
    with pytest.raises(loader.PolicyLoadError) as info:
        loader.load(paths)
    return info.value.errors


def test_errors_from_every_file_are_reported_together_in_file_order(policy_file: PolicyFile) -> None:
    a = policy_file("placment: {}", name="a", file="a.yaml")
    b = policy_file("enforcment: audit", name="b", file="b.yaml")
    errors = _errors(a.parent)
    assert [(e.file, e.field) for e in errors] == [(str(a), "spec.placment"), (str(b), "spec.enforcment")]


def test_several_errors_in_one_policy_are_all_reported(policy_file: PolicyFile) -> None:
    path = policy_file("order: x\nonConflict: never\nscheduling: {schedulerName: A}")
    assert [e.line for e in _errors(path)] == [6, 7, 8]


def test_the_error_message_joins_every_error_on_its_own_line(policy_file: PolicyFile) -> None:
    path = policy_file("order: x\nonConflict: never")
    with pytest.raises(loader.PolicyLoadError) as info:
        loader.load([path])
    assert str(info.value).splitlines() == [str(e) for e in info.value.errors]


def test_a_broken_file_rejects_the_whole_set(policy_file: PolicyFile) -> None:
    good = policy_file(GOOD, name="good", file="good.yaml")
    policy_file("placement: {nodeSelector: {a: true}}", name="bad", file="bad.yaml")
    with pytest.raises(loader.PolicyLoadError):
        loader.load([good.parent])
    assert len(loader.load([good])) == 1


def test_duplicate_names_across_files_name_both_locations(policy_file: PolicyFile) -> None:
    first = policy_file(GOOD, name="same", file="a.yaml")
    second = policy_file(GOOD, name="same", file="sub/b.yaml")
    [error] = _errors(first.parent)
    assert (error.file, error.line, error.field) == (str(second), 4, "metadata.name")
    assert f"also defined at {first}:4" in error.message


def test_duplicate_names_are_reported_even_when_the_policy_has_other_errors(policy_file: PolicyFile) -> None:
    policy_file(GOOD, name="same", file="a.yaml")
    second = policy_file("order: x", name="same", file="b.yaml")
    assert {e.field for e in _errors(second.parent)} == {"metadata.name", "spec.order"}


@pytest.mark.parametrize(
    ("spec", "field", "hint"),
    [
        ("placement:\n  nodeAfinity: {}", "spec.placement.nodeAfinity", 'did you mean "nodeAffinity"?'),
        ("placement:\n  NodeSelector: {}", "spec.placement.NodeSelector", 'did you mean "nodeSelector"?'),
        ("match:\n  selector:\n    matchLabel: {a: b}", "spec.match.selector.matchLabel", '"matchLabels"'),
        ("placement:\n  tolerations:\n  - {key: a, operator: Exists, efect: NoSchedule}",
         "spec.placement.tolerations[0].efect", 'did you mean "effect"?'),
        ("placement:\n  capacity:\n    prefer: spot\n    provider: {label: a, spot: [x], ondemand: []}",
         "spec.placement.capacity.provider.ondemand", 'did you mean "onDemand"?'),
        ("placement:\n  resources:\n    preferredCpu: {weight: 1, threshold: 5%}",
         "spec.placement.resources.preferredCpu", 'did you mean "preferredCPU"?'),
    ],
)
def test_misspelt_fields_get_a_did_you_mean_for_their_own_level(
    policy_file: PolicyFile, spec: str, field: str, hint: str
) -> None:
    errors = _errors(policy_file(spec))
    assert any(e.field == field and hint in e.message for e in errors), errors


def test_an_unknown_field_with_no_close_match_lists_the_allowed_ones(policy_file: PolicyFile) -> None:
    [error] = _errors(policy_file("vm:\n  evictionStrategy: None\n  zzz: 1"))
    assert error.message == 'unknown field "zzz" (allowed: evictionStrategy)'


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"),
    [
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", 2, "kind",
         "not a PlacementPolicy: this document is Deployment (apps/v1)"),
        ("apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementTest\n", 2, "kind",
         "*.suite.yaml"),
        ("apiVersion: placement.novasphere.dev/v2\nkind: PlacementPolicy\n", 1, "apiVersion",
         "unsupported apiVersion 'placement.novasphere.dev/v2'"),
        ("- a\n- b\n", 1, "", "expected a PlacementPolicy mapping, got a list"),
    ],
)
def test_documents_that_are_not_policies_say_what_they_are(
    write: Write, text: str, line: int, field: str, fragment: str
) -> None:
    [error] = _errors(write("x.yaml", text))
    assert (error.line, error.field) == (line, field)
    assert fragment in error.message


def test_multi_document_files_load_every_policy_with_its_own_line(write: Write) -> None:
    doc = "apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {{name: {n}}}\n"
    doc += "spec: {{scheduling: {{schedulerName: s}}}}\n"
    path = write("multi.yaml", "---\n" + doc.format(n="one") + "---\n" + doc.format(n="two") + "---\n")
    policies = loader.load([path])
    assert {p.name: p.source for p in policies} == {"one": f"{path}:2", "two": f"{path}:7"}


def test_a_list_of_policies_is_read_item_by_item_with_item_paths(write: Write) -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: placement.novasphere.dev/v1alpha1\n  kind: PlacementPolicy\n  metadata: {name: a}\n"
        "  spec: {order: 1}\n"
        "- apiVersion: placement.novasphere.dev/v1alpha1\n  kind: PlacementPolicy\n  metadata: {name: b}\n"
        "  spec: {order: x}\n"
    )
    [error] = _errors(write("list.yaml", text))
    assert (error.line, error.field) == (11, "items[1].spec.order")


def test_yaml_syntax_errors_carry_the_file_and_line(write: Write) -> None:
    path = write("broken.yaml", "apiVersion: x\nspec:\n  a: [1, 2\n  b: 3\n")
    [error] = _errors(path)
    assert error.file == str(path) and error.line == 4 and "invalid YAML" in error.message


def test_duplicate_keys_in_a_policy_are_an_error(policy_file: PolicyFile) -> None:
    [error] = _errors(policy_file("order: 1\norder: 2"))
    assert error.line == 7 and "duplicate key 'order' (first at line 6)" in error.message


def test_a_missing_file_is_reported_not_raised_as_oserror(tmp_path: Path) -> None:
    [error] = _errors(tmp_path / "nope.yaml")
    assert str(error).startswith(f"{tmp_path / 'nope.yaml'}: ")


def test_crlf_files_report_the_same_lines(write: Write) -> None:
    text = "apiVersion: placement.novasphere.dev/v1alpha1\r\nkind: PlacementPolicy\r\n"
    text += "metadata:\r\n  name: crlf\r\nspec:\r\n  order: x\r\n"
    [error] = _errors(write("crlf.yaml", text))
    assert (error.line, error.field) == (6, "spec.order")


class TestPolicyObjects:
    """What the engine receives: plain data in the contract's shape, with defaults filled in."""

    def _load(self, policy_file: PolicyFile, spec: str) -> dict:
        [policy] = loader.load([policy_file(spec)])
        return dict(policy.spec)

    def test_top_level_defaults_are_filled_in(self, policy_file: PolicyFile) -> None:
        spec = self._load(policy_file, GOOD)
        assert (spec["order"], spec["onConflict"], spec["enforcement"]) == (0, "merge", "patch")

    def test_spread_gets_the_hostname_topology_and_full_weight(self, policy_file: PolicyFile) -> None:
        spec = self._load(policy_file, "placement:\n  podAntiAffinity: {spread: preferred}")
        assert spec["placement"]["podAntiAffinity"] == {
            "spread": "preferred", "topologyKey": "kubernetes.io/hostname", "weight": 100,
        }

    def test_capacity_and_rollout_defaults(self, policy_file: PolicyFile) -> None:
        spec = self._load(policy_file, "placement:\n  capacity: {prefer: spot}\nrollout: {}")
        assert spec["placement"]["capacity"] == {"prefer": "spot", "weight": 50, "provider": "generic"}
        assert spec["rollout"] == {"mode": "safe"}

    def test_unset_fields_are_absent_and_keys_are_camel_case(self, policy_file: PolicyFile) -> None:
        spec = self._load(policy_file, "placement:\n  resources:\n    preferredCPU: {weight: 5, threshold: 70%}")
        assert spec["placement"] == {"resources": {"preferredCPU": {"weight": 5, "threshold": "70%"}}}

    def test_yaml_numbers_in_values_become_strings(self, policy_file: PolicyFile) -> None:
        spec = self._load(
            policy_file,
            "placement:\n  nodeAffinity:\n    required:\n"
            "    - matchExpressions: [{key: cores, operator: Gt, values: [8]}]\n  nodeSelector: {gen: 3}",
        )
        assert spec["placement"]["nodeAffinity"]["required"][0]["matchExpressions"][0]["values"] == ["8"]
        assert spec["placement"]["nodeSelector"] == {"gen": "3"}

    def test_match_kinds_resolve_to_targets(self, policy_file: PolicyFile) -> None:
        [policy] = loader.load([policy_file("match:\n  kinds: [Deployment, kubevirt.io/v1/VirtualMachine]\n" + GOOD)])
        assert policy.targets == frozenset(
            {BUILTIN.lookup("apps", "Deployment"), BUILTIN.lookup("kubevirt.io", "VirtualMachine")}
        )

    def test_no_kinds_means_any_kind(self, policy_file: PolicyFile) -> None:
        [policy] = loader.load([policy_file(GOOD)])
        assert policy.targets is None

    def test_order_comes_from_the_spec_and_sorts_the_set(self, policy_file: PolicyFile) -> None:
        policy_file("order: 5\n" + GOOD, name="late", file="a.yaml")
        path = policy_file("order: -1\n" + GOOD, name="early", file="b.yaml")
        assert loader.load([path.parent]).names == ("early", "late")


def test_load_documents_validates_in_memory_documents() -> None:
    text = (
        "apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: m}\n"
        "spec: {vm: {evictionStrategy: %s}}\n"
    )
    assert loader.load_documents(yamlsrc.load_text(text % "LiveMigrate", file="inline")).names == ("m",)
    with pytest.raises(loader.PolicyLoadError, match="inline:4: spec.vm.evictionStrategy"):
        loader.load_documents(yamlsrc.load_text(text % "Sometimes", file="inline"))


class TestPolicyFiles:
    """Which files a folder contributes."""

    def test_folders_are_walked_recursively_and_sorted(self, write: Write, tmp_path: Path) -> None:
        for name in ("b.yaml", "a.yml", "sub/c.json", "notes.md", "sub/d.txt"):
            write(name, "{}")
        found = [p.relative_to(tmp_path).as_posix() for p in loader.policy_files([tmp_path])]
        assert found == ["a.yml", "b.yaml", "sub/c.json"]

    def test_hidden_entries_and_suites_are_skipped(self, write: Write, tmp_path: Path) -> None:
        for name in (".hidden.yaml", ".git/x.yaml", "spread.suite.yaml", "p.yaml"):
            write(name, "{}")
        assert [p.name for p in loader.policy_files([tmp_path])] == ["p.yaml"]

    def test_configmap_volume_layout_yields_each_file_once(self, write: Write, tmp_path: Path) -> None:
        # kubelet mounts ConfigMap keys as symlinks into ..data -> ..<timestamp>/
        write("..2024_01_01/policy.yaml", "{}")
        os.symlink("..2024_01_01", tmp_path / "..data")
        os.symlink("..data/policy.yaml", tmp_path / "policy.yaml")
        assert loader.policy_files([tmp_path]) == [tmp_path / "policy.yaml"]

    def test_symlinked_files_and_folders_are_followed(self, write: Write, tmp_path: Path) -> None:
        target = write("elsewhere/real.yaml", "{}")
        (tmp_path / "policies").mkdir()
        os.symlink(target, tmp_path / "policies" / "link.yaml")
        os.symlink(tmp_path / "elsewhere", tmp_path / "policies" / "linked-dir")
        found = loader.policy_files([tmp_path / "policies"])
        assert [p.name for p in found] == ["link.yaml"]  # the same file through the folder link is not repeated

    def test_symlink_loops_do_not_hang(self, write: Write, tmp_path: Path) -> None:
        write("p.yaml", "{}")
        os.symlink(tmp_path, tmp_path / "loop")
        assert [p.name for p in loader.policy_files([tmp_path])] == ["p.yaml"]

    def test_explicit_files_are_taken_whatever_their_name(self, write: Write) -> None:
        path = write("custom.suite.yaml", "{}")
        assert loader.policy_files([path]) == [path]


def test_the_rollout_section_of_the_spec_example_loads() -> None:
    text = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: spread-web}
spec:
  match: {kinds: [Deployment]}
  rollout:
    mode: safe
    maxUnavailable: 0
    maxSurge: 1
    minReadySeconds: 5
"""
    from webhook.files import documents as yamlsrc
    from webhook.policy import loader

    (policy,) = loader.load_documents(yamlsrc.load_text(text, file="spec.yaml")).policies
    assert policy.spec["rollout"] == {"mode": "safe", "maxUnavailable": 0, "maxSurge": 1, "minReadySeconds": 5}
