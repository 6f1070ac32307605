"""``placement-webhook audit`` as a user runs it: the table, the machine forms, the exit codes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook import cli

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "examples" / "audit" / "cluster.yaml")
POLICIES = [str(ROOT / "policies" / "avoid-maintenance.yaml"), str(ROOT / "policies" / "critical-on-demand.yaml")]


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = cli.main(["audit", *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_table_groups_by_namespace_with_problems_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--cluster-state", CLUSTER, "--policies", *POLICIES)
    assert code == 1
    blocks = [line for line in out.splitlines() if line.startswith("NAMESPACE ")]
    assert blocks == ["NAMESPACE tools", "NAMESPACE shop"]  # tools holds the one error
    shop = out.split("NAMESPACE shop\n")[1].splitlines()
    statuses = [line.split()[0] for line in shop[1:] if line.strip() and not line.startswith("20 results")]
    assert statuses == sorted(statuses, key=["error", "fail", "warn", "skip", "pass"].index)
    assert any("Deployment/web" in line and "rollout would stop at 0 of 2" in line
               and "didn't match pod anti-affinity rules" in line for line in shop)
    assert out.splitlines()[-1] == "20 results for 7 workloads: 6 fail, 3 warn, 1 error, 1 skip, 9 pass"


def test_json_prints_every_result_with_stable_field_names_and_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--cluster-state", CLUSTER, "--policies", *POLICIES, "-o", "json")
    data = json.loads(out)
    assert code == 1 and data["summary"] == {"pass": 9, "fail": 6, "warn": 3, "skip": 1, "error": 1}
    assert all(set(r) == {"resource", "policy", "rule", "result", "message", "patch"} for r in data["results"])
    assert all(set(r["resource"]) == {"apiVersion", "kind", "name", "namespace", "uid"} for r in data["results"])
    cart = next(r for r in data["results"] if r["resource"]["name"] == "cart" and r["policy"] == "avoid-maintenance")
    assert cart["result"] == "fail" and cart["rule"] == "affinity"
    assert cart["resource"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "cart", "namespace": "shop",
                                "uid": "6f1c1e52-0002"}
    assert cart["patch"][0]["op"] == "add" and cart["patch"][0]["path"] == "/spec/template/spec/affinity"


def test_yaml_is_the_same_data(capsys: pytest.CaptureFixture[str]) -> None:
    _, as_json, _ = audit(capsys, "--cluster-state", CLUSTER, "--policies", *POLICIES, "-o", "json")
    _, as_yaml, _ = audit(capsys, "--cluster-state", CLUSTER, "--policies", *POLICIES, "-o", "yaml")
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


def test_a_cluster_that_passes_every_check_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Only the workloads the policies already placed, and the policies alone (no simulation).
    items = yaml.safe_load(Path(CLUSTER).read_text())["items"]
    kept = [o for o in items if o["kind"] != "Deployment" or o["metadata"]["name"] == "web"]
    state = tmp_path / "cluster.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": kept}))
    code, out, _ = audit(capsys, "--cluster-state", str(state), "--policies", *POLICIES, "--no-scheduling")
    assert code == 0, out
    assert out.splitlines()[-1] == "1 results for 1 workloads: 0 fail, 0 warn, 0 error, 0 skip, 1 pass"


def test_without_a_cluster_or_with_both_kinds_of_cluster_it_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = audit(capsys, "--policies", *POLICIES)
    assert code == 2 and "give the cluster as --cluster-state FILE... or --kubeconfig FILE" in err
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    code, _, err = audit(capsys, "--policies", *POLICIES, "--cluster-state", CLUSTER, "--kubeconfig", str(kubeconfig))
    assert code == 2


def test_a_broken_policy_path_or_cluster_state_is_a_usage_error(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = audit(capsys, "--cluster-state", CLUSTER, "--policies", str(tmp_path / "missing"))
    assert code == 2 and "does not exist" in err
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    code, _, err = audit(capsys, "--cluster-state", str(empty), "--policies", *POLICIES)
    assert code == 2 and "holds no Kubernetes object" in err


def test_an_unknown_output_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = audit(capsys, "--cluster-state", CLUSTER, "--policies", *POLICIES, "-o", "table")
    assert code == 2 and "invalid choice: 'table'" in err


def test_a_live_cluster_is_read_once_and_audited_as_its_dump_is(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.fakeapi import FakeApiServer

    _, from_files, _ = audit(capsys, "--cluster-state", CLUSTER, "--policies", *POLICIES, "-o", "json")
    with FakeApiServer.in_thread("1.31.0") as api:
        for obj in yaml.safe_load(Path(CLUSTER).read_text())["items"]:
            api.apply_object(obj)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = audit(capsys, "--kubeconfig", str(kubeconfig), "--policies", *POLICIES, "-o", "json")
    assert code == 1, err
    live, files = json.loads(out), json.loads(from_files)
    # The same verdicts: ReplicaSets and their pods left to their Deployments, the opt-out read.
    # (The API server's scheduler messages are worded as 1.31 words them; these are the same.)
    assert live == files


BATCH_POLICY = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: batch-pool
spec:
  match:
    kinds: [Job, CronJob, kubevirt.io/VirtualMachine]
  placement:
    nodeSelector:
      pool: batch
"""


def _batch_cluster(api: Any) -> None:
    """A Job, a CronJob (batch/v1beta1, as a 1.20 server serves it) and a VirtualMachine, none
    with the pool the policy wants."""
    template = {"metadata": {"labels": {"app": "report"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "report:1"}]}}
    api.apply_object({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "backup", "namespace": "ops"},
                      "spec": {"template": template}})
    api.apply_object({"apiVersion": "batch/v1beta1", "kind": "CronJob",
                      "metadata": {"name": "nightly", "namespace": "ops"},
                      "spec": {"schedule": "0 1 * * *", "jobTemplate": {"spec": {"template": template}}}})
    api.apply_object({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                      "metadata": {"name": "db", "namespace": "ops"},
                      "spec": {"template": {"metadata": {"labels": {"app": "db"}}, "spec": {"domain": {}}}}})


def test_a_live_audit_lists_jobs_cron_jobs_and_served_custom_kinds(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.fakeapi import FakeApiServer

    (tmp_path / "batch.yaml").write_text(BATCH_POLICY)
    with FakeApiServer.in_thread("1.20.2", crds=("VirtualMachine",)) as api:
        _batch_cluster(api)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = audit(capsys, "--kubeconfig", str(kubeconfig), "--policies", str(tmp_path / "batch.yaml"),
                               "--no-scheduling", "-o", "json")
    assert code == 1, err
    failing = {(r["resource"]["apiVersion"], r["resource"]["kind"], r["resource"]["name"], r["rule"])
               for r in json.loads(out)["results"] if r["result"] == "fail"}
    assert failing == {("batch/v1", "Job", "backup", "nodeSelector"),
                       ("batch/v1beta1", "CronJob", "nightly", "nodeSelector"),
                       ("kubevirt.io/v1", "VirtualMachine", "db", "nodeSelector")}
    assert ("note: not served by the API server, so none to audit: kubevirt.io/VirtualMachineInstance, "
            "kubevirt.io/VirtualMachineInstanceReplicaSet, pool.kubevirt.io/VirtualMachinePool, "
            "vm.novasphere.dev/Wukong") in err.splitlines()


def test_a_kind_the_api_server_refuses_to_list_is_an_error_line_and_the_rest_is_audited(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.fakeapi import FakeApiServer

    (tmp_path / "batch.yaml").write_text(BATCH_POLICY)
    forbidden = 'cronjobs.batch is forbidden: User "me" cannot list resource "cronjobs" in API group "batch"'
    with FakeApiServer.in_thread("1.20.2", crds=("VirtualMachine",)) as api:
        _batch_cluster(api)
        api.fail_next("GET", r"/cronjobs$", 403, times=100, message=forbidden)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = audit(capsys, "--kubeconfig", str(kubeconfig), "--policies", str(tmp_path / "batch.yaml"),
                               "--no-scheduling")
        url = api.url
    assert code == 1
    assert "Job/backup" in out and "VirtualMachine/db" in out and "CronJob/nightly" not in out
    said = (f"error: batch/CronJob not audited: cannot list cronjobs.batch (batch/v1beta1; it needs list on cronjobs "
            f'in the API group "batch"): the API server at {url} answered 403 Forbidden: {forbidden}')
    assert said in err.splitlines()
