"""placement-webhook mutate: every input form, every output, messages and exit codes."""
from __future__ import annotations

import base64
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.kit.kubeconfigs import token_kubeconfig
from tests.kit.policies import PROD_SSD_YAML
from tests.kit.yaml_bombs import billion_laughs
from webhook import ANNOTATION_APPLIED, cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

POLICY = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: ssd}
spec:
  match: {kinds: [Deployment, StatefulSet]}
  placement:
    nodeSelector: {disktype: ssd}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
"""

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: foo}
spec: {ports: [{port: 80}]}
"""


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "ssd.yaml").write_text(POLICY)
    return folder


def _mutate(capsys: pytest.CaptureFixture[str], policies: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main(["mutate", "--policies", str(policies), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _node_selector(obj: dict[str, Any]) -> Any:
    return obj["spec"]["template"]["spec"].get("nodeSelector")


def test_default_output_is_the_mutated_object_as_yaml(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _mutate(capsys, policies, "-f", str(_write(tmp_path, "d.yaml", DEPLOYMENT)))
    assert code == 0, err
    obj = yaml.safe_load(out)
    assert _node_selector(obj) == {"disktype": "ssd"}
    assert obj["metadata"]["annotations"] == {ANNOTATION_APPLIED: "ssd"}
    assert "&id" not in out and "*id" not in out


def test_multi_document_yaml_prints_a_multi_document_stream_with_non_workloads_unchanged(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "all.yaml", f"---\n{DEPLOYMENT}---\n{SERVICE}---\n")
    code, out, err = _mutate(capsys, policies, "-f", str(path))
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["Deployment", "Service"]
    assert docs[1] == yaml.safe_load(SERVICE)
    # admission's reason, word for word (it names the kind with or without its version)
    note = rf"{re.escape(f'{path}:doc 2: Service/default/foo: left unchanged: kind ')}(v1/)?Service is not a workload kind placement-webhook handles"
    assert re.search(f"^{note}$", err, re.MULTILINE), err


def test_a_workload_its_controller_stamped_is_printed_unchanged_with_the_reason(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    owned = {**yaml.safe_load(DEPLOYMENT), "kind": "ReplicaSet"}
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "front",
                                             "uid": "u-1", "controller": True}]
    path = _write(tmp_path, "owned.yaml", yaml.safe_dump(owned))
    code, out, err = _mutate(capsys, policies, "-f", str(path))
    assert code == 0
    assert yaml.safe_load(out) == owned
    assert f"{path}:doc 1: ReplicaSet/default/web: left unchanged: owned by Deployment/front: placed through its owner" in err


def test_json_output_of_one_object_is_the_object_and_of_several_a_v1_list(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = _write(tmp_path, "d.yaml", DEPLOYMENT)
    code, out, _ = _mutate(capsys, policies, "-f", str(one), "-o", "json")
    assert code == 0 and json.loads(out)["kind"] == "Deployment"
    code, out, _ = _mutate(capsys, policies, "-f", str(one), str(one), "-o", "json")
    data = json.loads(out)
    assert (data["apiVersion"], data["kind"], len(data["items"])) == ("v1", "List", 2)


def test_patch_output_reproduces_the_mutated_object(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _mutate(capsys, policies, "-f", str(_write(tmp_path, "d.yaml", DEPLOYMENT)), "-o", "patch")
    assert code == 0
    mutated = jsonpatch.apply_patch(yaml.safe_load(DEPLOYMENT), json.loads(out))
    assert _node_selector(mutated) == {"disktype": "ssd"}


def test_patch_output_labels_each_patch_when_there_are_several(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "two.yaml", f"{DEPLOYMENT}---\n{SERVICE}")
    code, out, _ = _mutate(capsys, policies, "-f", str(path), "-o", "patch", "--namespace", "prod")
    assert code == 0
    assert "# Deployment/prod/web\n[" in out
    assert "# Service/prod/foo\n[]" in out


def test_diff_output_is_a_unified_diff_per_changed_object(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _mutate(capsys, policies, "-f", str(_write(tmp_path, "d.yaml", DEPLOYMENT)), "-o", "diff")
    assert code == 0
    assert out.startswith("--- a/Deployment/default/web\n+++ b/Deployment/default/web\n")
    assert "+      nodeSelector:\n+        disktype: ssd\n" in out


def test_review_output_is_the_admission_review_answer(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _mutate(capsys, policies, "-f", str(_write(tmp_path, "d.yaml", DEPLOYMENT)), "-o", "review")
    assert code == 0
    answer = json.loads(out)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["response"]["allowed"] is True
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"disktype": "ssd"}} in patch


def test_an_admission_review_input_keeps_its_uid_version_and_namespace(
    policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _mutate(capsys, policies, "-f", str(EXAMPLES / "review-deployment-v1.json"), "-o", "review")
    assert code == 0
    answer = json.loads(out)
    assert answer["response"]["uid"] == "3c7b2a9e-5f0d-4a8e-9b61-2f4c8d1e7a05"
    assert answer["apiVersion"] == "admission.k8s.io/v1"


def test_a_subresource_review_is_left_unchanged_with_a_note(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = {
        "apiVersion": "admission.k8s.io/v1beta1",
        "kind": "AdmissionReview",
        "request": {"uid": "u1", "operation": "UPDATE", "subResource": "scale", "namespace": "ns",
                    "kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "object": yaml.safe_load(DEPLOYMENT)},
    }
    code, out, err = _mutate(capsys, policies, "-f", str(_write(tmp_path, "r.json", json.dumps(body))), "-o", "review")
    assert code == 0
    assert json.loads(out) == {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": {"uid": "u1", "allowed": True}}
    assert "left unchanged: subresource scale is not mutated" in err


def test_a_scale_subresource_review_says_the_subresource_is_not_mutated(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "ns"},
             "spec": {"replicas": 3}}
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u2", "operation": "UPDATE", "subResource": "scale", "namespace": "ns", "name": "web",
                    "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                    "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                    "object": scale, "oldObject": scale},
    }
    code, out, err = _mutate(capsys, policies, "-f", str(_write(tmp_path, "scale.json", json.dumps(body))), "-o", "json")
    assert code == 0 and json.loads(out) == scale
    assert [line for line in err.splitlines() if "subresource scale is not mutated" in line], err
    assert "not a workload kind" not in err


def test_an_object_without_api_version_is_an_input_error_at_its_line_and_the_others_are_mutated(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # kubectl's validation refuses it too: "error validating data: [apiVersion not set]".
    versionless = DEPLOYMENT.replace("apiVersion: apps/v1\n", "")
    path = _write(tmp_path, "d.yaml", f"{DEPLOYMENT}---\n{versionless}")
    code, out, err = _mutate(capsys, policies, "-f", str(path), "-o", "json")
    assert code == 1
    second_doc = DEPLOYMENT.count("\n") + 2
    assert err.splitlines() == [f"{path}:{second_doc}: doc 2: not a Kubernetes object: apiVersion not set"]
    assert _node_selector(json.loads(out)) == {"disktype": "ssd"}, "the first document is still mutated"


def test_list_objects_are_unpacked(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [yaml.safe_load(DEPLOYMENT), yaml.safe_load(SERVICE)]
    path = _write(tmp_path, "list.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, err = _mutate(capsys, policies, "-f", str(path), "-o", "json")
    assert code == 0
    assert [i["kind"] for i in json.loads(out)["items"]] == ["Deployment", "Service"]
    note = rf"{re.escape(f'{path}:doc 1 item 1: Service/default/foo: left unchanged: kind ')}(v1/)?Service is not a workload kind"
    assert re.search(note, err), err


def test_folders_are_read_recursively_in_order_skipping_hidden_and_other_files(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "manifests"
    _write(folder, "b/web.yaml", DEPLOYMENT.replace("name: web}", "name: b}"))
    _write(folder, "a.yml", DEPLOYMENT.replace("name: web}", "name: a}"))
    _write(folder, "c.json", json.dumps(yaml.safe_load(DEPLOYMENT.replace("name: web}", "name: c}"))))
    _write(folder, ".hidden/x.yaml", DEPLOYMENT.replace("name: web}", "name: hidden}"))
    _write(folder, "notes.txt", "not a manifest")
    code, out, _ = _mutate(capsys, policies, "-f", str(folder), "-o", "json")
    assert code == 0
    assert [i["metadata"]["name"] for i in json.loads(out)["items"]] == ["a", "b", "c"]


def test_stdin_is_read_with_a_dash(policies: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(DEPLOYMENT))
    code, out, _ = _mutate(capsys, policies, "-f", "-", "-o", "json")
    assert code == 0 and _node_selector(json.loads(out)) == {"disktype": "ssd"}


def test_f_is_repeatable_and_takes_several_values(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(_write(tmp_path, "d.yaml", DEPLOYMENT))
    code, out, _ = _mutate(capsys, policies, "-f", d, d, "-f", d, "-o", "json")
    assert code == 0 and len(json.loads(out)["items"]) == 3


def test_namespace_and_operation_flags_reach_matching(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "p"
    _write(folder, "p.yaml", POLICY.replace("kinds: [Deployment, StatefulSet]", "kinds: [Deployment], namespaces: [prod], operations: [UPDATE]"))
    d = str(_write(tmp_path, "d.yaml", DEPLOYMENT))
    for flags, changed in ([], False), (["--namespace", "prod"], False), (["--namespace", "prod", "--operation", "UPDATE"], True):
        code, out, _ = _mutate(capsys, folder, "-f", d, "-o", "patch", *flags)
        assert code == 0
        assert (json.loads(out) != []) is changed, flags


def test_warnings_go_to_stderr_with_kind_namespace_and_name(tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "d.yaml", DEPLOYMENT.replace("containers:", "nodeSelector: {disktype: hdd}\n      containers:"))
    code, _, err = _mutate(capsys, policies, "-f", str(path), "-n", "shop")
    assert code == 0
    assert "warning: Deployment/shop/web: ssd:" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a: [1, 2\n", ":2: invalid YAML"),
        ("kind: Deployment\n  bad: indent\n", ":2: "),
        ("- just\n- a list\n", "doc 1: expected a Kubernetes object"),
        ('{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}', "doc 1: request.uid is missing"),
    ],
)
def test_unreadable_input_is_reported_with_file_and_line_and_exits_1(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    bad = _write(tmp_path, "bad.yaml", content)
    good = _write(tmp_path, "good.yaml", DEPLOYMENT)
    code, out, err = _mutate(capsys, policies, "-f", str(bad), str(good), "-o", "json")
    assert code == 1
    assert f"{bad}" in err and message in err
    assert json.loads(out)["kind"] == "Deployment", "the good file is still processed"


def test_a_missing_input_path_is_a_usage_error_after_the_other_inputs_are_printed(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path, "good.yaml", DEPLOYMENT)
    code, out, err = _mutate(capsys, policies, "-f", str(tmp_path / "nope.yaml"), str(good), "-o", "json")
    assert code == 2 and f"{tmp_path / 'nope.yaml'}: no such file or directory" in err
    assert _node_selector(json.loads(out)) == {"disktype": "ssd"}, "the other input is still mutated and printed"


BILLION_LAUGHS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: yaml-bomb}
data:
""" + billion_laughs("  ")


def test_a_billion_laughs_manifest_is_an_input_error_and_the_other_files_are_still_mutated(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = _write(tmp_path, "bomb.yaml", BILLION_LAUGHS)
    good = _write(tmp_path, "good.yaml", DEPLOYMENT)
    started = time.monotonic()
    code, out, err = _mutate(capsys, policies, "-f", str(bomb), str(good), "-o", "json")
    assert time.monotonic() - started < 5, "mutate must refuse the expansion, not run it"
    assert code == 1
    assert f"{bomb}:8: document contains excessive aliasing" in err  # the line of d: [*c, ...]
    assert _node_selector(json.loads(out)) == {"disktype": "ssd"}


def test_mutate_refuses_a_namespace_that_differs_from_the_objects_own(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = DEPLOYMENT.replace("metadata: {name: web}", "metadata: {name: web, namespace: a}")
    path = _write(tmp_path, "two.yaml", f"{DEPLOYMENT}---\n{other}")
    code, out, err = _mutate(capsys, policies, "-f", str(path), "-n", "b", "-o", "json")
    assert code == 2
    assert (
        f"error: {path}:doc 2: the namespace from the provided object \"a\" does not match the namespace \"b\". "
        "You must pass '--namespace=a' to perform this operation."
    ) in err.splitlines()
    assert json.loads(out)["metadata"] == {"name": "web", "annotations": {ANNOTATION_APPLIED: "ssd"}}, "only the other object"


def test_a_list_item_whose_namespace_differs_is_named_by_its_item(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    item = yaml.safe_load(DEPLOYMENT.replace("metadata: {name: web}", "metadata: {name: web, namespace: a}"))
    path = _write(tmp_path, "list.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [item]}))
    code, _, err = _mutate(capsys, policies, "-f", str(path), "-n", "b")
    assert code == 2 and f"error: {path}:doc 1 item 0: the namespace from the provided object \"a\"" in err


def test_objects_without_a_namespace_take_the_flag_and_equal_namespaces_are_fine(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = DEPLOYMENT.replace("metadata: {name: web}", "metadata: {name: api, namespace: shop}")
    path = _write(tmp_path, "two.yaml", f"{DEPLOYMENT}---\n{same}")
    code, out, err = _mutate(capsys, policies, "-f", str(path), "-n", "shop", "-o", "patch")
    assert code == 0, err
    assert "# Deployment/shop/web\n" in out and "# Deployment/shop/api\n" in out
    assert "namespace" not in err


def test_an_admission_review_keeps_its_namespace_whatever_the_flag_says(
    policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _mutate(capsys, policies, "-f", str(EXAMPLES / "review-deployment-v1.json"), "-n", "elsewhere")
    assert code == 0 and "namespace" not in err


class _Terminal(io.StringIO):
    """Standard error as a terminal: progress lines are shown only there."""

    def isatty(self) -> bool:
        return True


def _screen(text: str) -> list[str]:
    """The lines a terminal shows: a carriage return goes back to the start of the line, and
    what follows overwrites what was there."""
    shown = []
    for raw in text.split("\n"):
        cells: list[str] = []
        column = 0
        for char in raw:
            if char == "\r":
                column = 0
                continue
            cells[column:column + 1] = [char]
            column += 1
        shown.append("".join(cells).rstrip())
    return shown


def test_the_progress_line_is_cleared_before_a_warning_and_redrawn_after(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conflicting = DEPLOYMENT.replace("containers:", "nodeSelector: {disktype: hdd}\n      containers:")
    files = [str(_write(tmp_path, f"d{i:02}.yaml", conflicting)) for i in range(25)]
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    code = cli.main(["mutate", "--policies", str(policies), "-f", *files, "-o", "json"])
    assert code == 0
    shown = _screen(terminal.getvalue())
    assert not [line for line in shown if re.match(r"mutating \d+/\d+ files.", line)], shown
    assert len([line for line in shown if line.startswith("warning: Deployment/default/web: ssd:")]) == 25, shown
    assert [line for line in shown if line][-1] == "mutating 25/25 files", "redrawn after the last warning"


def test_a_broken_policy_set_is_a_usage_error_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "broken"
    _write(folder, "bad.yaml", POLICY.replace("nodeSelector", "nodeSelectr"))
    code, _, err = _mutate(capsys, folder, "-f", str(_write(tmp_path, "d.yaml", DEPLOYMENT)))
    assert code == 2
    assert f"{folder / 'bad.yaml'}:7:" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "/nonexistent/policies"], "policy path /nonexistent/policies does not exist"),
        (["--kinds-config", "/nonexistent/kinds.yaml"], "/nonexistent/kinds.yaml"),
    ],
)
def test_missing_policies_or_kinds_config_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = cli.main(["mutate", "-f", str(_write(tmp_path, "d.yaml", DEPLOYMENT)), *args])
    _, err = capsys.readouterr()
    assert code == 2 and message in err


def test_extra_kinds_from_a_kinds_config_are_mutated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _write(tmp_path, "kinds.yaml", "kinds:\n- {group: example.com, version: v1, kind: Widget, podSpecPath: /spec/pod, podLabelsPath: /spec/labels}\n")
    folder = tmp_path / "p"
    _write(folder, "p.yaml", POLICY.replace("kinds: [Deployment, StatefulSet]", "kinds: [example.com/Widget]"))
    widget = _write(tmp_path, "w.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {pod: {}}\n")
    code, out, err = _mutate(capsys, folder, "--kinds-config", str(config), "-f", str(widget), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["spec"]["pod"]["nodeSelector"] == {"disktype": "ssd"}


def test_cluster_state_feeds_namespace_selectors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "p"
    _write(folder, "p.yaml", POLICY.replace("kinds: [Deployment, StatefulSet]", "namespaceSelector: {matchLabels: {env: prod}}"))
    state = _write(tmp_path, "cluster.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n")
    d = str(_write(tmp_path, "d.yaml", DEPLOYMENT))
    code, out, err = _mutate(capsys, folder, "-f", d, "-n", "shop", "-o", "patch")
    assert json.loads(out) == [] and "no cluster view is configured" in err
    code, out, err = _mutate(capsys, folder, "-f", d, "-n", "shop", "-o", "patch", "--cluster-state", str(state))
    assert code == 0 and json.loads(out) != []


def test_an_engine_failure_on_one_object_exits_1_and_still_prints_it(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from webhook.engine import admission

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("kaput")

    monkeypatch.setattr(admission, "_admit", crash)  # whatever breaks inside, admit fails open
    code, out, err = _mutate(capsys, policies, "-f", str(_write(tmp_path, "d.yaml", DEPLOYMENT)), "-o", "json")
    assert code == 1
    assert "error: Deployment/default/web: RuntimeError: kaput" in err
    assert json.loads(out) == yaml.safe_load(DEPLOYMENT)


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*") if p.suffix in (".yaml", ".json")))
def test_every_example_is_changed_by_the_shipped_policies(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _mutate(capsys, ROOT / "policies", "-f", str(EXAMPLES / example), "-o", "patch")
    assert code == 0, err
    paths = [op["path"] for op in json.loads(out)]
    assert "/metadata/annotations" in paths or any(ANNOTATION_APPLIED.replace("/", "~1") in p for p in paths)
    assert len(paths) > 1, "more than the applied annotation changed"


def test_an_object_too_deep_to_print_is_an_input_error_and_the_others_are_still_printed(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = '{"x": ' * 500 + "{}" + "}" * 500  # legal, and deeper than the printer writes
    (tmp_path / "deep.json").write_text(f'{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "deep"}}, '
                                        f'"data": {deep}}}')
    code, out, err = _mutate(capsys, policies, "-f", str(tmp_path / "deep.json"),
                             "-f", str(_write(tmp_path, "d.yaml", DEPLOYMENT)), "-o", "json")
    assert code == 1
    assert "nests deeper than 200 levels to print" in err and "Traceback" not in err
    assert json.loads(out)["kind"] == "Deployment"


NS_POLICY = PROD_SSD_YAML


def test_mutate_reads_the_live_cluster_view_once_with_a_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.kit.fakeapi import FakeApiServer

    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "ns.yaml").write_text(NS_POLICY)
    manifest = _write(tmp_path, "d.yaml", DEPLOYMENT)
    with FakeApiServer.in_thread("1.31.0") as api:
        api.apply_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"env": "prod"}}})
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = _mutate(capsys, folder, "-f", str(manifest), "-n", "shop", "--kubeconfig", str(kubeconfig),
                                 "-o", "json")
    assert code == 0, err
    assert json.loads(out)["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}


def test_mutate_with_an_unreadable_kubeconfig_is_a_usage_error(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _write(tmp_path, "d.yaml", DEPLOYMENT)
    code, _, err = _mutate(capsys, policies, "-f", str(manifest), "--kubeconfig", str(tmp_path / "nope"))
    assert code == 2 and "kubeconfig file not found" in err


def _kubeconfig_for(tmp_path: Path, server: str) -> Path:
    return token_kubeconfig(tmp_path / "kubeconfig", server, insecure=True)


def test_a_refused_connection_is_a_one_line_usage_error_at_once_naming_the_server(
    tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.kit.envtest import free_port

    server = f"https://127.0.0.1:{free_port()}"  # a closed port
    kubeconfig = _kubeconfig_for(tmp_path, server)
    manifest = _write(tmp_path, "d.yaml", DEPLOYMENT)
    began = time.monotonic()
    code, out, err = _mutate(capsys, policies, "-f", str(manifest), "--kubeconfig", str(kubeconfig))
    assert time.monotonic() - began < 0.5  # at once, not after the 30 s the read may take
    assert code == 2 and out == ""
    assert err == f"error: cannot reach the API server at {server}: connection refused\n"
