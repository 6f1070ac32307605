"""Nothing to act on is a mistake in the command: every command refuses an input that holds no
object (exit 2, naming it), as kubectl refuses "no objects passed to apply"; a document that is
not a Kubernetes object is an error at its file:line."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from webhook import cli
from webhook.commands import test as test_command

POLICY = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: ssd}
spec:
  match: {kinds: [Deployment]}
  placement:
    nodeSelector: {disktype: ssd}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: 100m}}}]
"""

COMPOSE = """\
version: "3"
services:
  web:
    image: nginx
"""

NODE = """\
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""

EMPTY_LIST = "apiVersion: v1\nkind: List\nitems: []\n"

# Inputs that hold nothing at all: empty, only comments, only document markers, an empty List.
NOTHING = {
    "empty": "",
    "comments": "# the manifests moved to another repository\n",
    "markers": "---\n---\n",
    "empty-list": EMPTY_LIST,
}


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    return _write(tmp_path, "policies/ssd.yaml", POLICY).parent


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    return _write(tmp_path, "cluster.yaml", NODE)


# ---- lint ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", NOTHING.values(), ids=NOTHING.keys())
def test_lint_refuses_a_policy_file_that_holds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = _write(tmp_path, "policy.yaml", text)
    assert _run(capsys, "lint", str(path)) == (2, "", f"placement-webhook lint: no PlacementPolicy in {path}\n")


def test_lint_names_only_the_path_that_holds_nothing(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = _write(tmp_path, "empty.yaml", "")
    assert _run(capsys, "lint", str(policies), str(empty)) == (
        2, "", f"placement-webhook lint: no PlacementPolicy in {empty}\n")


def test_lint_refuses_a_folder_whose_policy_files_are_all_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _write(tmp_path, "policies/a.yaml", "").parent
    _write(folder, "b.yml", "# later\n")
    assert _run(capsys, "lint", str(folder)) == (2, "", f"placement-webhook lint: no PlacementPolicy in {folder}\n")


def test_lint_takes_an_empty_file_beside_policies_in_one_folder(
    policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(policies, "placeholder.yaml", "")
    assert _run(capsys, "lint", str(policies)) == (0, "1 policy OK\n", "")


def test_lint_counts_a_file_for_every_path_that_reaches_it(policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "lint", str(policies), str(policies / "ssd.yaml")) == (0, "1 policy OK\n", "")


def test_lint_reports_a_file_that_is_not_yaml_as_its_error_not_as_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "broken.yaml", "a: [1, 2\n")
    code, out, err = _run(capsys, "lint", str(path))
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}:2: invalid YAML") and "no PlacementPolicy" not in err


# ---- mutate -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", NOTHING.values(), ids=NOTHING.keys())
def test_mutate_refuses_an_input_that_holds_nothing_and_still_prints_the_others(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    nothing = _write(tmp_path, "nothing.yaml", text)
    good = _write(tmp_path, "web.yaml", DEPLOYMENT)
    code, out, err = _run(capsys, "mutate", "--policies", str(policies), "-f", str(nothing), str(good))
    assert code == 2
    assert err.splitlines() == [f"error: {nothing}: holds no Kubernetes object"]
    assert yaml.safe_load(out)["spec"]["template"]["spec"]["nodeSelector"] == {"disktype": "ssd"}


def test_mutate_refuses_a_folder_without_manifests(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "manifests"
    _write(folder, "README.md", "nothing to apply here\n")
    code, out, err = _run(capsys, "mutate", "--policies", str(policies), "-f", str(folder))
    assert (code, out) == (2, "")
    assert err == f"error: no manifest files (*.yaml, *.yml, *.json) under {folder}\n"


def test_mutate_refuses_empty_standard_input(
    policies: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert _run(capsys, "mutate", "--policies", str(policies), "-f", "-") == (
        2, "", "error: <stdin>: holds no Kubernetes object\n")


def test_a_docker_compose_file_is_not_a_kubernetes_object_at_its_line(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # kubectl: error validating data: [apiVersion not set, kind not set]
    compose = _write(tmp_path, "docker-compose.yaml", COMPOSE)
    code, out, err = _run(capsys, "mutate", "--policies", str(policies), "-f", str(compose))
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{compose}:1: doc 1: not a Kubernetes object: apiVersion not set, kind not set"]


def test_a_list_item_that_is_not_a_kubernetes_object_is_named_by_its_item_and_line(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = "apiVersion: v1\nkind: List\nitems:\n- {name: not-an-object}\n- " + DEPLOYMENT.replace("\n", "\n  ")
    path = _write(tmp_path, "list.yaml", items)
    code, out, err = _run(capsys, "mutate", "--policies", str(policies), "-f", str(path), "-o", "json")
    assert code == 1
    assert err.splitlines() == [f"{path}:4: doc 1 item 0: not a Kubernetes object: apiVersion not set, kind not set"]
    assert yaml.safe_load(out)["kind"] == "Deployment", "the other item is still mutated"


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("kind", "''", "kind not set"),
    ("kind", "[Deployment]", "kind isn't string type"),
    ("apiVersion", "1", "apiVersion isn't string type"),
])
def test_an_empty_or_odd_kind_or_api_version_is_named(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str], field: str, value: str, problem: str
) -> None:
    text = "\n".join(f"{field}: {value}" if line.startswith(f"{field}:") else line for line in DEPLOYMENT.splitlines())
    path = _write(tmp_path, "web.yaml", text + "\n")
    code, _, err = _run(capsys, "mutate", "--policies", str(policies), "-f", str(path))
    assert code == 1 and err.splitlines() == [f"{path}:1: doc 1: not a Kubernetes object: {problem}"]


def test_mutate_refuses_a_policy_path_that_holds_no_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = _write(tmp_path, "policies.yaml", "")
    good = _write(tmp_path, "web.yaml", DEPLOYMENT)
    assert _run(capsys, "mutate", "--policies", str(empty), "-f", str(good)) == (
        2, "", f"error: no PlacementPolicy in {empty} (use --policies PATH)\n")


# ---- cluster state (mutate and explain read it alike) ---------------------------------------------


@pytest.mark.parametrize("text", [text for name, text in NOTHING.items() if name != "empty-list"])
def test_a_cluster_state_file_that_holds_nothing_is_a_usage_error(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    state = _write(tmp_path, "state.yaml", text)
    good = _write(tmp_path, "web.yaml", DEPLOYMENT)
    code, out, err = _run(capsys, "mutate", "--policies", str(policies), "-f", str(good), "--cluster-state", str(state))
    assert (code, out) == (2, "")
    assert err == f"error: {state}: holds no Kubernetes object\n"


def test_an_empty_list_is_a_dump_of_a_kind_the_cluster_has_none_of(
    tmp_path: Path, policies: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_classes = _write(tmp_path, "priorityclasses.yaml", EMPTY_LIST)
    good = _write(tmp_path, "web.yaml", DEPLOYMENT)
    code, _, err = _run(capsys, "mutate", "--policies", str(policies), "-f", str(good),
                        "--cluster-state", str(cluster), str(no_classes))
    assert code == 0, err


def test_a_cluster_state_of_empty_lists_only_is_no_cluster(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _write(tmp_path, "nodes.yaml", EMPTY_LIST)
    good = _write(tmp_path, "web.yaml", DEPLOYMENT)
    code, out, err = _run(capsys, "mutate", "--policies", str(policies), "-f", str(good), "--cluster-state", str(state))
    assert (code, out) == (2, "")
    assert err == f"error: the cluster state in {state} holds no object, and every cluster has at least its Namespaces\n"


def test_a_missing_cluster_state_file_names_no_line(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path, "web.yaml", DEPLOYMENT)
    missing = tmp_path / "state.yaml"
    assert _run(capsys, "mutate", "--policies", str(policies), "-f", str(good), "--cluster-state", str(missing)) == (
        2, "", f"error: {missing}: no such file or directory\n")


def test_every_document_of_a_cluster_state_that_is_not_an_object_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _write(tmp_path, "state.yaml", f"{NODE}---\n{COMPOSE}---\n- a list\n")
    workload = _write(tmp_path, "web.yaml", DEPLOYMENT)
    code, out, err = _run(capsys, "explain", "--no-policies", "-f", str(workload), "--cluster-state", str(state))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: {state}:6: doc 2: not a Kubernetes object: apiVersion not set, kind not set",
        f"error: {state}:11: doc 3: expected a Kubernetes object (a mapping), got list",
    ]


# ---- explain ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [COMPOSE, ""], ids=["docker-compose", "empty"])
def test_explain_refuses_a_cluster_state_with_no_kubernetes_object_instead_of_placing_on_no_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    state = _write(tmp_path, "state.yaml", text)
    workload = _write(tmp_path, "web.yaml", DEPLOYMENT)
    code, out, err = _run(capsys, "explain", "--no-policies", "-f", str(workload), "--cluster-state", str(state))
    assert (code, out) == (2, "")
    assert "0/0 nodes" not in err and str(state) in err


def test_explain_refuses_an_empty_input_and_still_explains_the_others(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = _write(tmp_path, "empty.yaml", "")
    workload = _write(tmp_path, "web.yaml", DEPLOYMENT)
    code, out, err = _run(capsys, "explain", "--no-policies", "-f", str(empty), str(workload),
                          "--cluster-state", str(cluster))
    assert code == 2
    assert f"error: {empty}: holds no Kubernetes object" in err.splitlines()
    assert out.startswith("Deployment prod/web: all 1 replica(s) place")


# ---- test ---------------------------------------------------------------------------------------


def test_the_test_command_refuses_a_path_without_suites_beside_one_with_suites(tmp_path: Path) -> None:
    suites = tmp_path / "suites"
    _write(suites, "ssd.yaml", POLICY)
    _write(suites, "ssd.suite.yaml", yaml.safe_dump({
        "apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementTest",
        "metadata": {"name": "ssd"}, "policies": ["ssd.yaml"],
        "cases": [{"name": "gets ssd", "object": yaml.safe_load(DEPLOYMENT), "expect": {"applied": ["ssd"]}}],
    }))
    empty = tmp_path / "empty"
    empty.mkdir()
    out, err = io.StringIO(), io.StringIO()
    code = test_command.run_suites(paths=[str(suites), str(empty)], junit=None, update=False, out=out, err=err)
    assert (code, out.getvalue(), err.getvalue()) == (2, "", f"error: no *.suite.yaml files under {empty}\n")
