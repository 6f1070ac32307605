"""placement-webhook explain: the report, the machine form, exit codes and bad input."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit.kubeconfigs import token_kubeconfig
from webhook import cli

HOSTNAME = "kubernetes.io/hostname"
ONE_PER_NODE = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}]}}


def node(name: str, *, zone: str = "z1", taints: list[dict[str, Any]] | None = None, cpu: str = "4",
         unschedulable: bool = False, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, "topology.kubernetes.io/zone": zone, **labels}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


def running(name: str, on: str, *, ns: str = "prod", labels: dict[str, str] | None = None, cpu: str = "500m",
            affinity: dict[str, Any] | None = None, priority: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": on, "priority": priority,
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": "web", "pod-template-hash": "old"}},
            "spec": spec, "status": {"phase": "Running"}}


def deployment(*, replicas: int = 2, surge: Any = 1, unavailable: Any = 0, affinity: dict[str, Any] | None = None,
               **pod_spec: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx",
                                            "resources": {"requests": {"cpu": "500m"}}}], **pod_spec}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}}


def write(path: Path, *docs: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["explain", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def two_nodes_two_replicas(tmp_path: Path) -> str:
    """Issue 17's scenario: a 2-replica Deployment, one pod per node on 2 nodes, about to get
    required one-per-node spread (its running pods have none)."""
    return write(tmp_path / "cluster.yaml", node("node-a"), node("node-b"),
                 running("web-old-1", "node-a"), running("web-old-2", "node-b"),
                 {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod"},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}})


def test_one_per_node_spread_on_two_full_nodes_is_a_stuck_update_with_surge(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_nodes_two_replicas: str) -> None:
    manifest = write(tmp_path / "web.yaml", deployment(affinity=ONE_PER_NODE))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", two_nodes_two_replicas)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "Deployment prod/web: the update is STUCK: 0 of 2 replica(s) updated, 1 Pending"
    assert "Pending: 0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules." in out
    assert "rollout: stuck after 1 step(s)" in out
    assert "- set maxSurge: 0, maxUnavailable: 1" in out


def test_the_same_update_with_max_unavailable_completes_and_exits_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_nodes_two_replicas: str) -> None:
    manifest = write(tmp_path / "web.yaml", deployment(surge=0, unavailable=1, affinity=ONE_PER_NODE))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", two_nodes_two_replicas,
                           "-o", "json")
    assert code == 0
    work = json.loads(out)["workloads"][0]
    assert work["rollout"] == {"completes": True, "replicas": 2, "steps": 4, "minAvailable": 1, "maxSurge": 0,
                               "maxUnavailable": 1, "strategy": "RollingUpdate", "stuck": None}
    assert work["placed"] == 2 and work["pending"] == 0 and work["suggestions"] == []
    assert sorted(r["node"] for r in work["replicas"]) == ["node-a", "node-b"]


def test_the_machine_form_has_the_fields_the_spec_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_nodes_two_replicas: str) -> None:
    manifest = write(tmp_path / "web.yaml", deployment(affinity=ONE_PER_NODE))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", two_nodes_two_replicas,
                           "-o", "yaml")
    assert code == 1
    work = yaml.safe_load(out)["workloads"][0]
    assert (work["kind"], work["namespace"], work["name"], work["placed"], work["pending"]) == \
        ("Deployment", "prod", "web", 0, 1)
    assert work["replicas"][0]["node"] is None
    assert work["replicas"][0]["message"].startswith("0/2 nodes are available:")
    assert work["rollout"]["completes"] is False and work["rollout"]["stuck"] == work["replicas"][0]["message"]
    first = work["suggestions"][0]
    assert first["change"].startswith("set maxSurge: 0, maxUnavailable: 1")
    assert first["path"] == "/spec/strategy" and first["verified"] is True
    assert work["diagnosis"]["reasons"] == [{"reason": "node(s) didn't match pod anti-affinity rules", "nodes": 2,
                                             "nodeNames": ["node-a", "node-b"]}]


def test_every_failing_filter_of_a_node_is_listed_not_only_the_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    state = write(tmp_path / "c.yaml", node("node-a", taints=[taint], disk="hdd"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1, nodeSelector={"disk": "ssd"}))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    assert code == 1
    filters = [f["filter"] for f in json.loads(out)["workloads"][0]["diagnosis"]["nodes"]["node-a"]]
    assert filters == ["TaintToleration", "NodeAffinity"]


def test_ties_are_reported_as_ties(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a"), node("node-b"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    assert code == 0
    replica = json.loads(out)["workloads"][0]["replicas"][0]
    assert replica["node"] == "node-a" and replica["tiedWith"] == ["node-b"]
    assert isinstance(replica["score"], int)


def test_policies_mutate_the_workload_before_it_is_placed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "ssd.yaml").write_text(
        "apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: ssd}\n"
        "spec:\n  match: {kinds: [Deployment]}\n  placement:\n    nodeSelector: {disk: ssd}\n")
    state = write(tmp_path / "c.yaml", node("node-a", disk="hdd"), node("node-b", disk="ssd"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    code, out, _ = explain(capsys, "-f", manifest, "--policies", str(policies), "--cluster-state", state, "-o", "json")
    assert code == 0 and json.loads(out)["workloads"][0]["replicas"][0]["node"] == "node-b"
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    assert json.loads(out)["workloads"][0]["replicas"][0]["tiedWith"] == ["node-b"]


def test_a_missing_policy_folder_is_a_usage_error_that_names_no_policies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    state = write(tmp_path / "c.yaml", node("node-a"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    code, _, err = explain(capsys, "-f", manifest, "--cluster-state", state)
    assert code == 2 and "--no-policies" in err


def test_a_daemonset_gets_one_pod_per_node_that_should_run_one(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    state = write(tmp_path / "c.yaml", node("node-a"), node("node-b", unschedulable=True),
                  node("node-c", taints=[taint]), node("node-d", cpu="100m"))
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
          "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
              "metadata": {"labels": {"app": "agent"}},
              "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "200m"}}}]}}}}
    manifest = write(tmp_path / "ds.yaml", ds)
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    work = json.loads(out)["workloads"][0]
    # node-c's taint keeps the controller from making a pod (NodeShouldRunDaemonPod); the cordon
    # does not (the unschedulable toleration); node-d's pod is made and stays Pending.
    placed = {r["pod"]: r["node"] for r in work["replicas"]}
    assert placed == {"agent-node-a": "node-a", "agent-node-b": "node-b", "agent-node-d": None}
    pending = next(r for r in work["replicas"] if r["node"] is None)
    # 200m is more than node-d's whole allocatable: Unresolvable, so preemption cannot help there.
    assert pending["message"] == ("0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy "
                                  "plugin(s) [NodeAffinity]. preemption: 0/4 nodes are available: "
                                  "4 Preemption is not helpful for scheduling.")
    assert code == 1 and all(s.get("addNodes") is None for s in work["suggestions"])


def test_a_job_runs_parallelism_pods_at_most_completions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a"))
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch", "namespace": "jobs"},
           "spec": {"parallelism": 5, "completions": 3, "template": {"spec": {
               "restartPolicy": "Never", "containers": [{"name": "j", "resources": {"requests": {"cpu": "1"}}}]}}}}
    code, out, _ = explain(capsys, "-f", write(tmp_path / "j.yaml", job), "--no-policies", "--cluster-state", state,
                           "-o", "json")
    work = json.loads(out)["workloads"][0]
    assert code == 0 and work["placed"] == 3


def test_a_priority_class_lets_a_replica_place_by_preemption(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a", cpu="1"),
                  running("filler", "node-a", ns="batch", labels={"app": "filler"}, cpu="1"),
                  {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "critical"},
                   "value": 1000})
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1, priorityClassName="critical"))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    replica = json.loads(out)["workloads"][0]["replicas"][0]
    assert code == 0 and replica["node"] == "node-a" and replica["preempts"] == ["batch/filler"]


def test_an_unknown_priority_class_is_a_stated_assumption(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1, priorityClassName="gold"))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    assert code == 0
    assert "note: PriorityClass gold is not in the cluster state: the API server would refuse the pod" in out


def test_a_wukong_vm_is_placed_through_the_pod_spec_its_scheduling_api_stands_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a", **{"maintenance": "true"}), node("node-b", disk="hdd"),
                  node("node-c", disk="ssd"))
    vm = {"apiVersion": "vm.novasphere.dev/v1alpha1", "kind": "Wukong",
          "metadata": {"name": "render", "namespace": "research"},
          "spec": {"cpu": 2, "memory": "4Gi", "scheduling": {"nodeAntiAffinity": {"required": [
              {"matchExpressions": [{"key": "maintenance", "operator": "In", "values": ["true"]}]}]}},
              "highAvailability": {"nodeSelector": {"disk": "ssd"}}}}
    code, out, _ = explain(capsys, "-f", write(tmp_path / "vm.yaml", vm), "--no-policies", "--cluster-state", state,
                           "-o", "json")
    work = json.loads(out)["workloads"][0]
    # node-a is avoided (nodeAntiAffinity), node-b lacks the legacy nodeSelector's disk=ssd.
    assert code == 0 and [(r["pod"], r["node"]) for r in work["replicas"]] == [("render", "node-c")]


def test_a_virtual_machine_requests_what_its_domain_asks_for(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a", cpu="2"))
    vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "db", "namespace": "vms"},
          "spec": {"template": {"spec": {"domain": {"resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}}}}}
    code, out, _ = explain(capsys, "-f", write(tmp_path / "vm.yaml", vm), "--no-policies", "--cluster-state", state)
    assert code == 1 and "0/1 nodes are available: 1 Insufficient cpu." in out
    assert "without KubeVirt's memory overhead" in out


def test_a_statefulset_update_replaces_the_highest_ordinal_first_and_stops_at_a_pending_pod(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = {"app": "db"}
    state = write(tmp_path / "c.yaml", node("node-a"), node("node-b"),
                  running("db-0", "node-a", labels=labels), running("db-1", "node-b", labels=labels))
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "prod"},
           "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
               "metadata": {"labels": labels},
               "spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "db"}]}}}}
    code, out, _ = explain(capsys, "-f", write(tmp_path / "s.yaml", sts), "--no-policies", "--cluster-state", state,
                           "-o", "json")
    work = json.loads(out)["workloads"][0]
    assert code == 1
    assert work["rollout"]["completes"] is False and work["rollout"]["minAvailable"] == 1
    assert [r["pod"] for r in work["replicas"]] == ["db-1"]
    assert "didn't match Pod's node affinity/selector" in work["rollout"]["stuck"]


def test_cluster_state_problems_are_stated_not_tracebacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}}
    pending = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waiting", "namespace": "x"}, "spec": {}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}}
    state = write(tmp_path / "c.yaml", node("node-a"), bare, pending, service)
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    code, _, err = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    assert code == 0
    assert "1 Node without status.allocatable (bare)" in err
    assert "1 Pod without spec.nodeName (x/waiting) are Pending" in err
    assert "objects of other kinds are not read: 1 Service" in err


def test_a_broken_cluster_state_file_is_a_usage_error_naming_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "c.yaml"
    broken.write_text("kind: Node\nmetadata: {name: a\n")
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    code, _, err = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", str(broken))
    assert code == 2 and f"{broken}:" in err and "Traceback" not in err


def test_a_broken_workload_file_is_reported_and_the_others_are_still_explained(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a"))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.yaml").write_text("kind: [\n")
    write(tmp_path / "in" / "b.yaml", deployment(replicas=1))
    code, out, err = explain(capsys, "-f", str(tmp_path / "in"), "--no-policies", "--cluster-state", state)
    assert code == 1 and "a.yaml:" in err and out.startswith("Deployment prod/web: all 1 replica(s) place")


def test_a_spec_the_api_server_would_refuse_is_an_error_for_that_object(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a"))
    bad = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}, "topologyKey": HOSTNAME}]}}
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1, affinity=bad))
    code, _, err = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    assert code == 1 and "error:" in err and "Deployment/prod/web" in err and "Traceback" not in err


@pytest.mark.parametrize("flags", [[], ["--kubeconfig", "k", "--cluster-state", "c"]])
def test_the_cluster_is_given_exactly_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           flags: list[str]) -> None:
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    code, _, err = explain(capsys, "-f", manifest, "--no-policies", *flags)
    assert code == 2 and "--cluster-state FILE... or --kubeconfig FILE" in err


def test_input_without_a_workload_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a"))
    manifest = write(tmp_path / "svc.yaml", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
    code, _, err = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    assert code == 2 and "skipped: not a workload kind" in err and "no workload to explain" in err


def test_a_terminal_gets_a_progress_line_once_the_work_takes_a_while(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook.commands import explain as command
    from webhook.commands import inputs

    monkeypatch.setattr(inputs.Console, "wants_progress", lambda self: True)
    monkeypatch.setattr(command, "PROGRESS_AFTER", -1.0)  # "a while" has passed at once
    state = write(tmp_path / "c.yaml", node("node-a"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=2, affinity=ONE_PER_NODE))
    code, out, err = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    assert code == 1 and "\r[1] Deployment/prod/web: placing the 2 replica(s) of web" in err
    assert "counting the nodes that would be missing" in err and "\r" not in out


def test_without_a_terminal_there_is_no_progress_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook.commands import explain as command

    monkeypatch.setattr(command, "PROGRESS_AFTER", -1.0)
    state = write(tmp_path / "c.yaml", node("node-a"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    _, _, err = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    assert "\r" not in err


def test_a_json_cluster_dump_reads_like_a_yaml_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "state.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("node-a"), node("node-b")]}))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=2, affinity=ONE_PER_NODE))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", str(dump), "-o", "json")
    assert code == 0 and json.loads(out)["workloads"][0]["placed"] == 2


@pytest.mark.parametrize(("version", "offered"), [("1.31", True), ("v1.30", False), (None, False)])
def test_match_label_keys_is_suggested_only_for_a_cluster_known_to_honour_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_nodes_two_replicas: str, version: str | None,
        offered: bool) -> None:
    manifest = write(tmp_path / "web.yaml", deployment(affinity=ONE_PER_NODE))
    extra = ["--kubernetes-version", version] if version else []
    _, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", two_nodes_two_replicas,
                        "-o", "json", *extra)
    changes = [s["change"] for s in json.loads(out)["workloads"][0]["suggestions"]]
    assert any("matchLabelKeys: [pod-template-hash]" in c for c in changes) is offered


def test_a_version_that_is_not_major_minor_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["explain", "-f", "x", "--kubernetes-version", "latest"])
    assert exit_.value.code == 2 and "not a MAJOR.MINOR version" in capsys.readouterr().err


def test_a_live_cluster_is_read_once_and_explained_like_a_dump(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.fakeapi import FakeApiServer

    manifest = write(tmp_path / "web.yaml", deployment(affinity=ONE_PER_NODE))
    with FakeApiServer.in_thread("1.31.0") as api:
        for obj in (node("node-a"), node("node-b"), running("web-old-1", "node-a"), running("web-old-2", "node-b"),
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}):
            api.apply_object(obj)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = explain(capsys, "-f", manifest, "--no-policies", "--kubeconfig", str(kubeconfig), "-o", "json")
    work = json.loads(out)["workloads"][0]
    assert code == 1, err
    # Its pods run: the update is simulated, and a 1.31 server honours matchLabelKeys.
    assert work["rollout"]["completes"] is False
    assert any("matchLabelKeys" in s["change"] for s in work["suggestions"])


def _kubeconfig_for(tmp_path: Path, server: str, token: str = "t") -> Path:
    return token_kubeconfig(tmp_path / "kubeconfig", server, token=token, insecure=True)


def test_an_unreachable_cluster_is_one_error_line_at_once_and_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.envtest import free_port

    server = f"https://127.0.0.1:{free_port()}"  # a closed port
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    began = time.monotonic()
    code, out, err = explain(capsys, "-f", manifest, "--no-policies", "--kubeconfig", str(_kubeconfig_for(tmp_path, server)))
    assert time.monotonic() - began < 0.5  # at once, not after the 30 s the read may take
    assert code == 2 and out == ""
    assert err == f"error: cannot reach the API server at {server}: connection refused\n"


def test_credentials_the_server_refuses_are_one_error_line_at_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.fakeapi import FakeApiServer

    manifest = write(tmp_path / "w.yaml", deployment(replicas=1))
    with FakeApiServer.in_thread("1.31.0", tls=True, token="s3cret") as api:
        kubeconfig = _kubeconfig_for(tmp_path, api.url, token="expired")
        code, _, err = explain(capsys, "-f", manifest, "--no-policies", "--kubeconfig", str(kubeconfig))
    assert code == 2
    assert err == (f"error: the API server at {api.url} did not accept the credentials (401 Unauthorized): "
                   "you must be logged in to the server\n")


def test_replicas_given_on_the_command_line_are_the_ones_an_update_rolls_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_nodes_two_replicas: str) -> None:
    manifest = write(tmp_path / "web.yaml", deployment(surge=0, unavailable=1, affinity=ONE_PER_NODE))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", two_nodes_two_replicas,
                           "--replicas", "3", "-o", "json")
    rollout = json.loads(out)["workloads"][0]["rollout"]
    # With 3 replicas and no surge, one new pod is made while both old pods stay (3 - 1 = 2
    # must stay available), and it repels them: the update deadlocks at once.
    assert code == 1 and rollout["replicas"] == 3 and rollout["completes"] is False and rollout["steps"] == 1


def _names(*groups: list[str]) -> dict[str, Any]:
    """Required node affinity whose terms name nodes (``matchFields metadata.name In``), one
    requirement per list, all in one term."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": names} for names in groups]}]}}}


def _histogram(message: str) -> dict[str, int]:
    """The "<count> <reason>" entries of a FitError message's first sentence."""
    first = message.split(": ", 1)[1].split(". preemption: ", 1)[0].removesuffix(".")
    return {reason: int(count) for count, reason in
            (entry.split(" ", 1) for entry in re.split(r", (?=\d+ )", first))}


@pytest.mark.parametrize(("affinity", "nodes", "reasons"), [
    pytest.param(_names(["gone"]), ["node-a", "node-b"],
                 {"node(s) didn't satisfy plugin(s) [NodeAffinity]": ["node-a", "node-b"]},
                 id="matchFields names no node: the PreFilterResult leaves every node out"),
    pytest.param(_names(["node-a"]), ["node-a", "node-b"],
                 {"node(s) didn't satisfy plugin(s) [NodeAffinity]": ["node-b"],
                  "node(s) had untolerated taint(s)": ["node-a"]},
                 id="matchFields names one node: the others are left out, the named one is filtered"),
])
def test_the_nodes_a_prefilter_leaves_out_are_in_the_machine_form_as_in_the_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], affinity: dict[str, Any], nodes: list[str],
        reasons: dict[str, list[str]]) -> None:
    taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    state = write(tmp_path / "c.yaml", node("node-a", taints=[taint]), node("node-b"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1, affinity=affinity))
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    diagnosis = json.loads(out)["workloads"][0]["diagnosis"]
    assert code == 1
    assert {r["reason"]: r["nodeNames"] for r in diagnosis["reasons"]} == reasons
    assert {r["reason"]: r["nodes"] for r in diagnosis["reasons"]} == _histogram(diagnosis["message"])
    assert sorted(diagnosis["nodes"]) == nodes
    assert all(f["filter"] for found in diagnosis["nodes"].values() for f in found)


def test_conflicting_node_names_are_a_prefilter_rejection_of_every_node_in_both_forms(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a"), node("node-b"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1, affinity=_names(["node-a"], ["node-b"])))
    _, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    diagnosis = json.loads(out)["workloads"][0]["diagnosis"]
    assert diagnosis["message"].startswith("0/2 nodes are available: pod affinity terms conflict. preemption:")
    assert diagnosis["reasons"] == [{"reason": "pod affinity terms conflict", "nodes": 2,
                                     "nodeNames": ["node-a", "node-b"]}]
    assert [f["filter"] for f in diagnosis["nodes"]["node-a"]] == ["NodeAffinity"]
    _, text, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    assert "    2 pod affinity terms conflict:\n      node-a: NodeAffinity: pod affinity terms conflict" in text


def test_the_text_lists_the_nodes_a_prefilter_left_out_under_their_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path / "c.yaml", node("node-a"), node("node-b"))
    manifest = write(tmp_path / "w.yaml", deployment(replicas=1, affinity=_names(["gone"])))
    _, text, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    assert ("    2 node(s) didn't satisfy plugin(s) [NodeAffinity]:\n"
            "      node-a: NodeAffinity: node(s) didn't satisfy plugin(s) [NodeAffinity] (the pod's required node "
            "affinity names other nodes (matchFields metadata.name))\n") in text
