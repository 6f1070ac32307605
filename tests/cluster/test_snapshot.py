"""read_once against the fake API server: what a snapshot holds, what it leaves out, how it fails."""
from __future__ import annotations

import asyncio
import socket
import ssl
import time
from typing import Any

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import budget_status, node, pdb, pod
from tests.kit.workloads import workload as kit_workload
from webhook.cluster.config import ClusterConfig
from webhook.cluster.snapshot import (
    Refused,
    SharedValues,
    Snapshot,
    project_pdb,
    project_pod,
    project_workload,
    read_once,
    workload_projection,
)
from webhook.kube.kinds import BUILTIN, Target
from webhook.kube.pods import SCHEDULER_FIELD_SELECTOR
from webhook.scheduler.cluster import Cluster
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.resources import pod_requests, scorer_requests

JSON = dict[str, Any]
PAGE = 2


def _target(group: str, kind: str) -> Target:
    found = BUILTIN.lookup(group, kind)
    assert found is not None
    return found


JOB, CRON_JOB = _target("batch", "Job"), _target("batch", "CronJob")


def where(server: FakeApiServer) -> ClusterConfig:
    return ClusterConfig(server.url)


def names(snapshot: Snapshot, kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in snapshot.of_kind(kind))


def workload(kind: str, name: str, namespace: str = "default", **spec: Any) -> JSON:
    template = {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]}]}}
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}, "uid": f"uid-{name}",
                         "resourceVersion": "4711",
                         "annotations": {"note": "kept", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": template, **spec},
            "status": {"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "observedGeneration": 7,
                       "conditions": [{"type": "Available", "status": "True"}]}}


def full_pod() -> JSON:
    """A pod as the API server returns it, with everything a real one carries."""
    anti = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "prod", "uid": "u-1", "labels": {"app": "web", "tier": "front"},
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}" * 500},
                     "resourceVersion": "42", "creationTimestamp": "2024-05-01T10:00:00Z",
                     "deletionTimestamp": "2024-05-01T11:00:00Z",
                     "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}],
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
                                          "uid": "rs-uid", "controller": True, "blockOwnerDeletion": True}]},
        "spec": {
            "nodeName": "n1", "priority": 1000, "preemptionPolicy": "Never", "schedulerName": "default-scheduler",
            "serviceAccountName": "web", "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
            "volumes": [{"name": "data", "emptyDir": {}}],
            "overhead": {"cpu": "50m", "memory": "10Mi"},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti],
                                             "preferredDuringSchedulingIgnoredDuringExecution": [
                                                 {"weight": 10, "podAffinityTerm": {**anti, "topologyKey": "zone"}}]},
                         "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                             {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}],
            "initContainers": [
                {"name": "setup", "image": "setup:1", "command": ["sh"], "resources": {"requests": {"cpu": "2"}}},
                {"name": "proxy", "image": "proxy:1", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                 "ports": [{"containerPort": 15001, "hostPort": 15001, "protocol": "TCP"}]}],
            "containers": [
                {"name": "app", "image": "web:1", "env": [{"name": "X", "value": "y" * 200}],
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                 "livenessProbe": {"httpGet": {"path": "/", "port": 8080}},
                 "resources": {"requests": {"cpu": "500m", "memory": "256Mi", "example.com/gpu": "1"},
                               "limits": {"cpu": "1", "memory": "512Mi", "example.com/gpu": "1"}},
                 "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                           {"containerPort": 9090, "hostPort": 9090, "hostIP": "10.0.0.1", "protocol": "UDP"}]},
                {"name": "log", "image": "log:1"}],
        },
        "status": {"phase": "Running", "startTime": "2024-05-01T10:00:05Z", "podIP": "10.1.2.3", "qosClass": "Burstable",
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "image": "web:1"}]},
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---- reading ----

async def test_a_snapshot_holds_every_kind_stamped_with_its_api_version_and_kind(server: FakeApiServer) -> None:
    server.apply_object(pod("web-1", node_name="n1", labels={"app": "web"}))
    server.apply_object(pdb("web", match={"app": "web"}, min_available=1, status=budget_status(0, 1, 1, 1)))
    for kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"):
        server.apply_object(workload(kind, kind.lower()))

    snapshot = await read_once(where(server), timeout=10.0)

    assert isinstance(snapshot, Snapshot), snapshot
    stamps = {(o["apiVersion"], o["kind"]) for o in snapshot.objects}
    assert stamps == {("v1", "Node"), ("v1", "Namespace"), ("scheduling.k8s.io/v1", "PriorityClass"), ("v1", "Pod"),
                      ("policy/v1", "PodDisruptionBudget"), ("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"),
                      ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet")}
    assert names(snapshot, "Node") == ["n0", "n1", "n2", "n3", "n4"]  # every page (the server pages by 2)
    assert names(snapshot, "Namespace") == ["default", "kube-node-lease", "kube-public", "kube-system"]
    assert names(snapshot, "StatefulSet") == ["statefulset"] and names(snapshot, "DaemonSet") == ["daemonset"]
    assert snapshot.server_version == (1, 31) and snapshot.match_label_keys is True
    # Cluster.from_dump sorts a dump by kind: the snapshot reads as a kubectl dump does.
    cluster = Cluster.from_dump(snapshot.objects)
    assert sorted(cluster.nodes) == ["n0", "n1", "n2", "n3", "n4"]
    assert [p.key for p in cluster.nodes["n1"].pods] == ["default/web-1"]
    assert [b["metadata"]["name"] for b in cluster.pdbs] == ["web"]


async def test_a_snapshot_leaves_out_finished_pods_as_the_scheduler_does(server: FakeApiServer) -> None:
    phases = {"running": "Running", "pending": "Pending", "unknown": "Unknown", "done": "Succeeded",
              "crashed": "Failed", "done-2": "Succeeded", "running-2": "Running"}
    server.load(pod(name, node_name="n1", phase=phase) for name, phase in phases.items())
    server.clear_requests()

    snapshot = await read_once(where(server), timeout=10.0)

    assert isinstance(snapshot, Snapshot), snapshot
    assert names(snapshot, "Pod") == ["pending", "running", "running-2", "unknown"]
    first, second = (p for p in snapshot.of_kind("Pod") if p["metadata"]["name"] in ("running", "running-2"))
    assert first["spec"]["containers"] == [{"name": "app"}]
    assert first["spec"]["containers"] is second["spec"]["containers"]  # one copy for equal subtrees
    lists = [r.query for r in server.requests if r.path == "/api/v1/pods" and r.query.get("watch") != "true"]
    assert len(lists) >= 2  # paged: the selector rides on every page, continue included
    assert all(q.get("fieldSelector") == SCHEDULER_FIELD_SELECTOR for q in lists)
    assert any("continue" in q for q in lists)


async def test_a_snapshot_reads_pdbs_from_policy_v1beta1_on_a_1_20_server() -> None:
    async with FakeApiServer("1.20.0") as old:
        old.apply_object(node("n1"))
        old.apply_object(pdb("web", match={"app": "web"}, max_unavailable=1, api_version="policy/v1beta1",
                             status=budget_status(1, 2, 1, 2)))

        snapshot = await read_once(where(old), timeout=10.0)

        assert isinstance(snapshot, Snapshot), snapshot
        (budget,) = snapshot.of_kind("PodDisruptionBudget")
        assert budget["apiVersion"] == "policy/v1beta1"
        assert budget["spec"] == {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}
        assert budget["status"]["disruptionsAllowed"] == 1
        paths = {r.path for r in old.requests}
        assert "/apis/policy/v1beta1/poddisruptionbudgets" in paths
        assert "/apis/policy/v1/poddisruptionbudgets" not in paths
        assert snapshot.server_version == (1, 20) and snapshot.match_label_keys is False


async def test_a_server_serving_both_policy_versions_is_read_through_policy_v1() -> None:
    async with FakeApiServer("1.22.0") as both:
        both.apply_object(pdb("web", match={"app": "web"}, min_available="50%"))

        snapshot = await read_once(where(both), timeout=10.0)

        assert isinstance(snapshot, Snapshot), snapshot
        assert [b["apiVersion"] for b in snapshot.of_kind("PodDisruptionBudget")] == ["policy/v1"]
        paths = {r.path for r in both.requests}
        assert "/apis/policy/v1/poddisruptionbudgets" in paths
        assert "/apis/policy/v1beta1/poddisruptionbudgets" not in paths


# ---- failures ----

async def test_a_refused_connection_is_one_line_naming_the_server_at_once_not_at_the_timeout() -> None:
    host = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    began = time.monotonic()

    answer = await read_once(ClusterConfig(host), timeout=30.0)

    assert time.monotonic() - began < 0.5  # kubectl says so at once; waiting would not help
    assert isinstance(answer, Refused)
    assert answer == f"cannot reach the API server at {host}: connection refused"
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []  # nothing left running


async def test_an_unknown_host_is_one_line_at_once() -> None:
    began = time.monotonic()

    answer = await read_once(ClusterConfig("https://api.cluster.invalid:6443"), timeout=30.0)

    assert time.monotonic() - began < 5.0  # one resolver answer (.invalid never resolves)
    assert isinstance(answer, Refused)
    assert answer.startswith("cannot reach the API server at https://api.cluster.invalid:6443: no such host ")
    assert "\n" not in answer


async def test_a_server_certificate_that_does_not_verify_is_one_line_at_once() -> None:
    async with FakeApiServer("1.31.0", tls=True) as server:
        began = time.monotonic()

        answer = await read_once(ClusterConfig(server.url, ssl.create_default_context()), timeout=30.0)

        assert time.monotonic() - began < 0.5
    assert isinstance(answer, Refused)
    assert answer.startswith(f"cannot reach the API server at {server.url}: TLS certificate verification failed: ")
    assert "SSLContext object" not in answer and "\n" not in answer


async def test_a_connection_reset_is_retried_until_the_timeout_naming_the_server() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # reads the request, then closes without an answer
        writer.close()

    listener = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    host = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        answer = await read_once(ClusterConfig(host), timeout=0.5)
    finally:
        listener.close()
        await listener.wait_closed()
    assert not isinstance(answer, Refused)
    assert answer == (f"could not read the cluster at {host} within 0.5 s "
                      "(/version: the server closed the connection without an answer)")


async def test_a_server_that_accepts_and_never_answers_is_an_error_message_at_the_timeout() -> None:
    connections: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await reader.read()  # until the client hangs up
        writer.close()

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    host = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        began = time.monotonic()
        answer = await read_once(ClusterConfig(host), timeout=0.5)
        assert time.monotonic() - began < 1.5
    finally:
        listener.close()
        await listener.wait_closed()
    assert answer == f"could not read the cluster at {host} within 0.5 s (/version: no answer)"
    assert connections  # it did connect: the wait was for an answer


async def test_a_wrong_token_is_an_error_message_at_once() -> None:
    async with FakeApiServer("1.31.0", token="s3cret") as guarded:
        began = time.monotonic()
        answer = await read_once(ClusterConfig(guarded.url, token=lambda: "wrong"), timeout=20.0)
        assert time.monotonic() - began < 5.0
        assert isinstance(answer, Refused)
        assert answer == (f"the API server at {guarded.url} did not accept the credentials (401 Unauthorized): "
                          "you must be logged in to the server")
        assert [r.path for r in guarded.requests] == ["/version"]  # not retried, nothing else asked


async def test_a_server_that_forbids_one_resource_is_an_error_message_at_once(server: FakeApiServer) -> None:
    server.fail_next("GET", r"^/apis/apps/v1/statefulsets$", 403, times=100,
                     message='statefulsets.apps is forbidden: User "explain" cannot list resource "statefulsets"')
    began = time.monotonic()

    answer = await read_once(where(server), timeout=20.0)

    assert isinstance(answer, Refused)
    assert time.monotonic() - began < 5.0  # a 403 does not change by waiting: no 20 s wait
    assert answer.startswith(f"could not read the cluster at {server.url} (statefulsets: ApiError: 403")
    assert answer.endswith('statefulsets.apps is forbidden: User "explain" cannot list resource "statefulsets")')
    assert "pods:" not in answer and "nodes:" not in answer  # only the refused request is named


async def test_a_server_that_keeps_failing_names_each_informer_that_did_not_list(server: FakeApiServer) -> None:
    server.fail_next("GET", r"^/api/v1/pods$", 500, times=1000, message="etcd is sick")

    answer = await read_once(where(server), timeout=1.5)

    assert isinstance(answer, str)
    assert answer.startswith(f"could not read the cluster at {server.url} within 1.5 s (")
    assert "pods: ApiError: 500 InternalError: etcd is sick" in answer
    assert "nodes:" not in answer  # listed fine: not named


async def test_a_transient_error_is_retried_within_the_timeout(server: FakeApiServer) -> None:
    server.apply_object(pod("web-1", node_name="n1"))
    server.fail_next("GET", r"^/api/v1/pods$", 503, times=1)
    server.fail_next("GET", r"^/version$", 503, times=1)

    snapshot = await read_once(where(server), timeout=10.0)

    assert isinstance(snapshot, Snapshot), snapshot
    assert names(snapshot, "Pod") == ["web-1"]
    assert sum(r.path == "/version" for r in server.requests) == 2  # once failed, once answered, never again


# ---- projections ----

def test_a_projected_pod_keeps_what_the_scheduler_reads_and_drops_the_rest() -> None:
    whole = full_pod()
    projected = project_pod(whole)
    full, small = PodInfo(whole), PodInfo(projected)

    assert small.requests == full.requests and small.requests.scalars == {"example.com/gpu": 1}
    assert (small.non0_cpu, small.non0_mem) == (full.non0_cpu, full.non0_mem)
    assert pod_requests(projected["spec"]) == pod_requests(whole["spec"])
    assert (scorer_requests(projected["spec"], ("cpu", "memory"), non_zero=True)
            == scorer_requests(whole["spec"], ("cpu", "memory"), non_zero=True))
    assert small.ports == full.ports == (("0.0.0.0", "TCP", 15001), ("10.0.0.1", "UDP", 9090))
    assert (small.priority, small.start_time, small.terminating) == (full.priority, full.start_time, True)
    assert small.labels == full.labels and small.key == full.key == "prod/web-1"
    for mine, theirs in ((small.required_anti_affinity, full.required_anti_affinity),
                         (small.preferred_anti_affinity, full.preferred_anti_affinity)):
        assert [(t.namespaces, t.topology_key) for t in mine] == [(t.namespaces, t.topology_key) for t in theirs]
        assert all(t.selector.matches({"app": "web"}) and not t.selector.matches({"app": "db"}) for t in mine)
    assert [t.weight for t in small.preferred_anti_affinity] == [10]

    spec = projected["spec"]
    assert {k: spec[k] for k in ("nodeName", "preemptionPolicy", "schedulerName", "tolerations",
                                 "topologySpreadConstraints", "affinity")} == {
        k: whole["spec"][k] for k in ("nodeName", "preemptionPolicy", "schedulerName", "tolerations",
                                      "topologySpreadConstraints", "affinity")}
    assert projected["metadata"] == {
        "name": "web-1", "namespace": "prod", "labels": {"app": "web", "tier": "front"}, "uid": "u-1",
        "deletionTimestamp": "2024-05-01T11:00:00Z",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "controller": True}]}
    assert spec["containers"] == [
        {"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "256Mi", "example.com/gpu": "1"}},
         "ports": [{"containerPort": 9090, "hostPort": 9090, "hostIP": "10.0.0.1", "protocol": "UDP"}]},
        {"name": "log"}]
    assert spec["initContainers"] == [
        {"name": "setup", "resources": {"requests": {"cpu": "2"}}},
        {"name": "proxy", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
         "ports": [{"containerPort": 15001, "hostPort": 15001, "protocol": "TCP"}], "restartPolicy": "Always"}]
    assert set(spec) == {"nodeName", "priority", "preemptionPolicy", "schedulerName", "overhead", "affinity",
                         "tolerations", "topologySpreadConstraints", "containers", "initContainers"}
    assert projected["status"] == {"phase": "Running", "startTime": "2024-05-01T10:00:05Z"}
    assert set(projected) == {"metadata", "spec", "status"}


def test_the_replicas_of_a_workload_share_what_they_have_in_common() -> None:
    share = SharedValues()
    first, second, other = full_pod(), full_pod(), full_pod()
    second["metadata"].update(name="web-2", uid="u-2")
    second["spec"]["nodeName"] = "n2"
    other["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    a, b, c = (project_pod(p, share=share) for p in (first, second, other))

    assert a == project_pod(full_pod()) and b == project_pod(second)  # sharing changes no value
    for path in (("metadata", "labels"), ("metadata", "ownerReferences"), ("spec", "affinity"),
                 ("spec", "tolerations"), ("spec", "containers"), ("spec", "initContainers")):
        assert a[path[0]][path[1]] is b[path[0]][path[1]], path
    assert a["metadata"] is not b["metadata"] and (a["metadata"]["name"], b["metadata"]["name"]) == ("web-1", "web-2")
    assert (a["spec"]["nodeName"], b["spec"]["nodeName"]) == ("n1", "n2")
    assert c["spec"]["tolerations"] is not a["spec"]["tolerations"]
    assert c["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert c["spec"]["affinity"] is a["spec"]["affinity"]


def test_pod_level_requests_survive_the_projection_and_limits_do_not() -> None:
    whole = {"metadata": {"name": "p", "namespace": "default"},
             "spec": {"resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "4"}},
                      "containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]},
             "status": {"phase": "Pending"}}
    projected = project_pod(whole)
    assert projected["spec"]["resources"] == {"requests": {"cpu": "2", "memory": "1Gi"}}
    assert projected["spec"]["containers"] == [{"name": "a"}]
    assert PodInfo(projected).requests == PodInfo(whole).requests
    assert PodInfo(projected).requests.cpu == 2000


def test_a_projected_pdb_keeps_its_selector_budget_and_status() -> None:
    whole = pdb("web", "prod", match={"app": "web"}, min_available=2, unhealthy_pod_eviction_policy="AlwaysAllow",
                status={**budget_status(0, 2, 2, 3), "disruptedPods": {"web-1": "2024-05-01T10:00:00Z"},
                        "conditions": [{"type": "DisruptionAllowed", "status": "False"}]})
    assert project_pdb(whole) == {
        "metadata": {"name": "web", "namespace": "prod"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 3,
                   "disruptedPods": {"web-1": "2024-05-01T10:00:00Z"}}}


def test_a_projected_workload_keeps_its_template_whole_and_its_strategy() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}
    deployment = workload("Deployment", "web", replicas=3, strategy=strategy, revisionHistoryLimit=10)
    projected = project_workload(deployment)
    assert projected["metadata"] == {"name": "web", "namespace": "default", "labels": {"app": "web"}, "uid": "uid-web",
                                     "resourceVersion": "4711", "annotations": {"note": "kept"}}
    assert projected["spec"] == {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "strategy": strategy,
                                 "template": deployment["spec"]["template"]}
    assert projected["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert projected["status"] == {"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2}

    daemonset = workload("DaemonSet", "agent", updateStrategy={"type": "OnDelete"})
    daemonset["status"] = {"desiredNumberScheduled": 5, "numberReady": 4, "updatedNumberScheduled": 5}
    daemonset["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Thing", "name": "x", "uid": "t"}]
    projected = project_workload(daemonset)
    assert projected["spec"]["updateStrategy"] == {"type": "OnDelete"} and "strategy" not in projected["spec"]
    assert projected["status"] == {"desiredNumberScheduled": 5, "numberReady": 4, "updatedNumberScheduled": 5}
    assert projected["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Thing", "name": "x"}]


def test_a_projected_pod_keeps_placement_webhooks_own_annotations_only() -> None:
    whole = full_pod()
    whole["metadata"]["annotations"]["placement.novasphere.dev/skip"] = "true"
    assert project_pod(whole)["metadata"]["annotations"] == {"placement.novasphere.dev/skip": "true"}
    assert "annotations" not in project_pod(full_pod())["metadata"]


# ---- the audit's other workload kinds ----

def other_kind(target: Target, name: str, **spec: Any) -> JSON:
    """An object of ``target``'s kind with what a stored one carries besides its pod template."""
    obj = kit_workload(target, name, namespace="shop")
    obj["metadata"].update({"uid": f"uid-{name}", "resourceVersion": "77",
                            "annotations": {"team": "a", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                            "managedFields": [{"manager": "kubectl", "operation": "Update"}]})
    obj.setdefault("spec", {}).update(spec)
    obj["status"] = {"conditions": [{"type": "Complete", "status": "False"}], "startTime": "2024-05-01T10:00:00Z"}
    return obj


async def test_the_audit_s_kinds_are_listed_at_the_group_versions_the_server_serves() -> None:
    """On a 1.20 server: Jobs from batch/v1, CronJobs from batch/v1beta1 (batch/v1 serves Jobs
    alone there), a VirtualMachine from its installed CRD; the kinds whose CRDs are missing are
    unlisted as not served, and the read goes on."""
    async with FakeApiServer("1.20.2", crds=("VirtualMachine",), page_size=PAGE) as api:
        api.load([other_kind(JOB, f"job-{i}", parallelism=2) for i in range(3)])
        api.apply_object({**other_kind(CRON_JOB, "nightly", schedule="0 1 * * *"), "apiVersion": "batch/v1beta1"})
        api.apply_object(other_kind(_target("kubevirt.io", "VirtualMachine"), "vm", running=True))

        snapshot = await read_once(where(api), timeout=10.0, kinds=BUILTIN)

    assert isinstance(snapshot, Snapshot), snapshot
    assert names(snapshot, "Job") == ["job-0", "job-1", "job-2"]  # every page (the server pages by 2)
    stamps = {(o["apiVersion"], o["kind"]) for o in snapshot.objects if o["kind"] in ("Job", "CronJob",
                                                                                         "VirtualMachine")}
    assert stamps == {("batch/v1", "Job"), ("batch/v1beta1", "CronJob"), ("kubevirt.io/v1", "VirtualMachine")}
    assert [(u.shown(), u.refused) for u in snapshot.unlisted] == [
        ("kubevirt.io/VirtualMachineInstance", False), ("kubevirt.io/VirtualMachineInstanceReplicaSet", False),
        ("pool.kubevirt.io/VirtualMachinePool", False), ("vm.novasphere.dev/Wukong", False)]
    assert {u.reason for u in snapshot.unlisted} == {"not served by the API server"}
    # Listed once: no watch of these kinds.
    assert not [r for r in api.requests if "batch" in r.path and r.query.get("watch")]


async def test_a_kind_whose_list_is_refused_is_unlisted_naming_the_permission_and_the_rest_is_read(
        server: FakeApiServer) -> None:
    server.apply_object(other_kind(JOB, "backup"))
    forbidden = 'cronjobs.batch is forbidden: User "audit" cannot list resource "cronjobs" in API group "batch"'
    server.fail_next("GET", r"^/apis/batch/v1/cronjobs$", 403, times=100, message=forbidden)
    began = time.monotonic()

    snapshot = await read_once(where(server), timeout=20.0, kinds=BUILTIN)

    assert isinstance(snapshot, Snapshot), snapshot
    assert time.monotonic() - began < 5.0  # a 403 does not change by waiting
    assert names(snapshot, "Job") == ["backup"] and names(snapshot, "Node") == ["n0", "n1", "n2", "n3", "n4"]
    (refused,) = [u for u in snapshot.unlisted if u.refused]
    assert refused.shown() == "batch/CronJob"
    assert refused.reason == ('cannot list cronjobs.batch (batch/v1; it needs list on cronjobs in the API group '
                              f'"batch"): the API server at {server.url} answered 403 Forbidden: {forbidden}')


async def test_a_kind_listed_while_the_server_fails_is_retried_and_named_at_the_timeout(server: FakeApiServer) -> None:
    server.fail_next("GET", r"^/apis/batch/v1/jobs$", 500, times=1000, message="etcd is sick")

    answer = await read_once(where(server), timeout=1.5, kinds=BUILTIN)

    assert isinstance(answer, str)
    assert "jobs.batch: ApiError: 500 InternalError: etcd is sick" in answer
    assert "cronjobs" not in answer and "nodes:" not in answer  # listed fine: not named


async def test_without_kinds_a_read_lists_what_explain_needs_and_nothing_more(server: FakeApiServer) -> None:
    server.apply_object(other_kind(JOB, "backup"))

    snapshot = await read_once(where(server), timeout=10.0)

    assert isinstance(snapshot, Snapshot) and snapshot.unlisted == ()
    assert not snapshot.of_kind("Job")
    assert not [r.path for r in server.requests if r.path == "/apis" or "batch" in r.path or "kubevirt" in r.path]


def test_a_projected_job_keeps_its_template_what_its_pods_wanted_read_and_its_start() -> None:
    job = other_kind(JOB, "backup", parallelism=3, completions=6, suspend=False, backoffLimit=4,
                     ttlSecondsAfterFinished=60)

    kept = workload_projection(JOB)(job)

    assert kept["metadata"] == {"name": "backup", "namespace": "shop", "labels": {}, "uid": "uid-backup",
                                "annotations": {"team": "a"}, "resourceVersion": "77"}
    assert kept["spec"] == {"parallelism": 3, "completions": 6, "suspend": False,
                            "template": job["spec"]["template"]}
    assert kept["status"] == {"startTime": "2024-05-01T10:00:00Z"}  # admission reads whether it started


def test_a_projected_cron_job_keeps_its_job_template() -> None:
    cron = other_kind(CRON_JOB, "nightly", schedule="0 1 * * *", successfulJobsHistoryLimit=3)

    kept = workload_projection(CRON_JOB)(cron)

    assert kept["spec"] == {"jobTemplate": cron["spec"]["jobTemplate"]}


def test_a_kind_whose_pod_spec_or_scheduling_api_is_its_spec_keeps_its_spec_whole() -> None:
    for kind, group in (("VirtualMachineInstance", "kubevirt.io"), ("Wukong", "vm.novasphere.dev")):
        target = _target(group, kind)
        obj = other_kind(target, "vm", domain={"resources": {"requests": {"memory": "1Gi"}}},
                         scheduling={"nodeAffinity": {"required": []}})
        assert workload_projection(target)(obj)["spec"] == obj["spec"], kind


def test_a_declared_kind_keeps_the_fields_its_paths_lead_through() -> None:
    widget = Target("example.com", "v1", "Widget", ("template", "spec"), ("template", "metadata", "labels"),
                    ("spec", "selector"), rollout=("spec", "rollout"))
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "shop"},
           "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "app"}]}},
           "spec": {"selector": {"matchLabels": {"app": "w"}}, "rollout": {"maxSurge": 1}, "colour": "blue"}}

    kept = workload_projection(widget)(obj)

    assert kept["template"] == obj["template"]
    assert kept["spec"] == {"selector": {"matchLabels": {"app": "w"}}, "rollout": {"maxSurge": 1}}
