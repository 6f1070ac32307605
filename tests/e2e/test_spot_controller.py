"""``placement-webhook spot-controller`` against a real cluster (issue 20, item 5): a real API
server, the real kube-scheduler and the real kube-controller-manager (so Deployments, ReplicaSets
and PodDisruptionBudget status are the real controllers' work).

The live scenario, on a namespace and three Nodes of its own (no kubelet behind them: their status
is written through the API, and a thread of this test plays their kubelets — it marks a bound pod
Running and Ready and finishes the termination of a deleted one):

1. a spot node and two on-demand nodes; the on-demand ones start cordoned, so the Deployment's 3
   replicas (required node affinity to the scenario's nodes) all land on the spot node; a
   PodDisruptionBudget ``maxUnavailable: 1`` covers them; once the 3 are Ready (and the budget
   says so: 1 disruption allowed), the on-demand nodes are uncordoned;
2. ``python -m webhook spot-controller --kubeconfig ... --drain-timeout 120 --metrics-port 0``
   runs as a subprocess; the test writes aws-node-termination-handler's spot-itn taint
   (NoSchedule) on the spot node;
3. the controller must cordon the node and annotate it, and evict the 3 pods through the Eviction
   API: the budget lets one go at a time (the others are answered 429 until the replacement is
   Ready), so at no sampled moment are fewer than 2 of the Deployment's pods Ready; the
   ReplicaSet controller's replacements land on the on-demand nodes (the spot node is cordoned
   and tainted); Events say Evicted (and EvictionBlocked) on the pods and Drained on the node.

Every object the scenario makes carries its own names and taint (``SCENARIO_TAINT``, tolerated
only by its Deployment), so the session's other pods never land on its nodes. kube-controller-
manager runs only during this module with the controllers the scenario needs; the node lifecycle
controller is left out on purpose: with no kubelet posting heartbeats it would mark every node
unreachable and taint it.

Without kube-controller-manager or kube-scheduler in KUBEBUILDER_ASSETS the live test skips before
anything starts, saying which is missing. The offline tests at the end run everywhere: the command's
``--dry-run`` plan against the in-process fake API server, and the helpers.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.kit.envtest import (
    ROOT,
    SCHEDULER,
    Component,
    ControlPlane,
    Process,
    find_binary,
    wait_until,
)
from tests.kit.envtest import raw_json as _json
from tests.kit.kubelets import (
    MERGE_PATCH,
    Kubelets,
    Sample,
    fewest_ready,
    is_ready,
    now_rfc3339,
    running_status,
    tear_down,
)
from webhook import ANNOTATION_SKIP
from webhook.spot.controller import CORDONED_BY, DRAIN_STARTED

CONTROLLER_MANAGER = "kube-controller-manager"
# The old names: every release since 1.19 accepts them (1.28 renamed the controllers and kept
# these as aliases of ``deployment-controller`` and the like).
CONTROLLERS = ("deployment", "replicaset", "disruption", "garbagecollector")
IMAGE = "registry.k8s.io/pause:3.9"
CAPACITY_LABEL = "node.kubernetes.io/capacity"  # the generic provider's (the controller's default)
SCENARIO_LABEL = "e2e.novasphere.dev/scenario"
SCENARIO_TAINT_KEY = "e2e.novasphere.dev/spot-scenario"
SPOT_ITN = "aws-node-termination-handler/spot-itn"
APP = "web"
REPLICAS = 3
WAIT = 120.0


# --- kube-controller-manager ------------------------------------------------------------------------


def missing_reason(assets: Path, missing: list[str]) -> str:
    return (
        f"{' and '.join(missing)} missing from KUBEBUILDER_ASSETS ({assets}): the spot controller's e2e test "
        "needs real Deployments, ReplicaSets and PodDisruptionBudget status, and pods placed by the real "
        f"scheduler: copy the {' and '.join(missing)} binar{'ies' if len(missing) > 1 else 'y'} of the same "
        "Kubernetes release next to etcd and kube-apiserver (setup-envtest does not ship them)"
    )


@dataclass
class ControllerManager(Component):
    """kube-controller-manager running only ``CONTROLLERS``, served as ``Component`` says (the
    insecure port 10252 is on by default up to 1.21)."""

    NAME: ClassVar[str] = CONTROLLER_MANAGER
    PKI: ClassVar[str] = "controller-manager-pki"

    def flags(self) -> list[str]:
        return [f"--controllers={','.join(CONTROLLERS)}", "--use-service-account-credentials=false"]


@pytest.fixture(scope="session")
def spot_binaries(assets: Path) -> Path:
    """Both kube-controller-manager and kube-scheduler, or a skip naming the missing ones before
    anything starts (the test asks for this fixture first)."""
    missing = [name for name in (CONTROLLER_MANAGER, SCHEDULER) if find_binary(assets, name) is None]
    if missing:
        pytest.skip(missing_reason(assets, missing))
    return assets


@pytest.fixture(scope="module")
def controller_manager(spot_binaries: Path, control_plane: ControlPlane,
                       tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerManager]:
    """Running while this module's tests do; stopped after them, so the session's other tests keep
    a cluster where nothing acts on their Deployments and ReplicaSets."""
    manager = ControllerManager(control_plane=control_plane, workdir=tmp_path_factory.mktemp("controller-manager"))
    try:
        manager.start()
        yield manager
    finally:
        manager.stop()


# --- the scenario -----------------------------------------------------------------------------------


class Scenario:
    """The namespace, nodes, budget and Deployment of one run, and what the test reads back."""

    def __init__(self, cluster: Any, control_plane: ControlPlane, workdir: Path) -> None:
        self.core = cluster.core
        self.objects = cluster.objects
        self.control_plane = control_plane
        self.workdir = workdir
        self.id = f"spot-{uuid.uuid4().hex[:6]}"
        # The skip label keeps the session's webhooks (test_api_server) away from these objects.
        self.namespace = str(cluster.create_namespace(labels={ANNOTATION_SKIP: "true", SCENARIO_LABEL: self.id}))
        self.spot = f"e2e-{self.id}-spot"
        self.on_demand = (f"e2e-{self.id}-od-1", f"e2e-{self.id}-od-2")
        self.nodes: list[str] = []
        self.pdb_version = "policy/v1" if control_plane.server_version() >= (1, 21) else "policy/v1beta1"
        self.kubelets = Kubelets(control_plane, self.namespace, (self.spot, *self.on_demand), app=APP)
        self.controller: Process | None = None

    @property
    def taint(self) -> dict[str, str]:
        return {"key": SCENARIO_TAINT_KEY, "value": self.id, "effect": "NoSchedule"}

    # -- set-up --
    def node(self, name: str, capacity: str, *, cordoned: bool) -> None:
        """Create, then replace the taints (the TaintNodesByCondition admission plugin gives a new
        Node node.kubernetes.io/not-ready:NoSchedule, which no controller lifts here) with the
        scenario's, then write the status a kubelet would."""
        labels = {"kubernetes.io/hostname": name, CAPACITY_LABEL: capacity, SCENARIO_LABEL: self.id}
        _json(self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}},
                                    _preload_content=False))
        self.nodes.append(name)
        _json(self.core.patch_node(name, {"spec": {"taints": [self.taint], "unschedulable": cordoned}},
                                   _content_type=MERGE_PATCH, _preload_content=False))
        resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        now = now_rfc3339()
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e: no kubelet behind it",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
        _json(self.core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": dict(resources),
                                                            "conditions": [ready]}},
                                          _content_type=MERGE_PATCH, _preload_content=False))

    def deployment(self) -> dict[str, Any]:
        labels = {"app": APP}
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": SCENARIO_LABEL, "operator": "In", "values": [self.id]}]}]}}}
        toleration = {"key": SCENARIO_TAINT_KEY, "operator": "Equal", "value": self.id, "effect": "NoSchedule"}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": APP, "namespace": self.namespace},
                "spec": {"replicas": REPLICAS, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"affinity": affinity, "tolerations": [toleration],
                                               "containers": [{"name": "main", "image": IMAGE,
                                                               "resources": {"requests": {"cpu": "100m"}}}]}}}}

    def budget(self) -> dict[str, Any]:
        return {"apiVersion": self.pdb_version, "kind": "PodDisruptionBudget",
                "metadata": {"name": APP, "namespace": self.namespace},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": APP}}}}

    def set_up(self) -> list[str]:
        """Everything up to a healthy Deployment on the spot node; the names of its 3 pods."""
        self.node(self.spot, "spot", cordoned=False)
        for name in self.on_demand:
            self.node(name, "on-demand", cordoned=True)  # until the replicas are placed
        self.kubelets.start()
        group, version = self.pdb_version.split("/")
        self.objects.create_namespaced_custom_object(group, version, self.namespace, "poddisruptionbudgets",
                                                     self.budget())
        self.objects.create_namespaced_custom_object("apps", "v1", self.namespace, "deployments", self.deployment())
        wait_until(lambda: len(self.ready_on(self.spot)) == REPLICAS,
                   what=f"{REPLICAS} Ready replicas on the spot node", timeout=WAIT)
        wait_until(lambda: self.pdb_status().get("disruptionsAllowed") == 1
                   and self.pdb_status().get("currentHealthy") == REPLICAS,
                   what="the disruption controller to allow one disruption", timeout=WAIT)
        for name in self.on_demand:
            _json(self.core.patch_node(name, {"spec": {"unschedulable": False}}, _content_type=MERGE_PATCH,
                                       _preload_content=False))
        return sorted(p["metadata"]["name"] for p in self.ready_on(self.spot))

    def start_controller(self) -> Process:
        kubeconfig = self.control_plane.write_kubeconfig(self.workdir / "spot-controller.kubeconfig")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_WEBHOOK_")}
        env["PYTHONPATH"] = str(ROOT)
        self.controller = Process("spot-controller", [
            sys.executable, "-m", "webhook", "spot-controller", f"--kubeconfig={kubeconfig}",
            "--drain-timeout=120", "--metrics-port=0"], self.workdir / "spot-controller.log", env=env)
        self.controller.start()
        return self.controller

    def reclaim(self) -> None:
        """aws-node-termination-handler's taint on a spot interruption notice, beside the scenario's."""
        spot_itn = {"key": SPOT_ITN, "value": "spot-interruption", "effect": "NoSchedule"}
        _json(self.core.patch_node(self.spot, {"spec": {"taints": [self.taint, spot_itn]}}, _content_type=MERGE_PATCH,
                                   _preload_content=False))

    # -- reads --
    def pods(self) -> list[dict[str, Any]]:
        listed = _json(self.core.list_namespaced_pod(self.namespace, label_selector=f"app={APP}",
                                                     _preload_content=False))
        return list(listed.get("items") or ())

    def ready_on(self, *nodes: str) -> list[dict[str, Any]]:
        return [p for p in self.pods() if is_ready(p) and p["spec"].get("nodeName") in nodes]

    def pdb_status(self) -> dict[str, Any]:
        group, version = self.pdb_version.split("/")
        pdb = self.objects.get_namespaced_custom_object(group, version, self.namespace, "poddisruptionbudgets", APP)
        return dict(pdb.get("status") or {})

    def read_node(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = _json(self.core.read_node(name, _preload_content=False))
        return node

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        listed = _json(self.core.list_namespaced_event(namespace, _preload_content=False))
        return [e for e in listed.get("items") or () if e.get("reason") == reason
                and (e.get("source") or {}).get("component") == "spot-controller"]

    def check_alive(self) -> None:
        if self.controller is not None and not self.controller.running():
            raise RuntimeError(f"the spot controller exited; last output:\n{self.controller.tail()}")
        if self.kubelets.errors:
            raise RuntimeError(f"the fake kubelets failed: {self.kubelets.errors[-3:]}")

    # -- tear-down --
    def tear_down(self) -> None:
        if self.controller is not None:
            self.controller.stop()
        group, version = self.pdb_version.split("/")
        tear_down(self.core, self.objects, namespace=self.namespace, app=APP, budget=(group, version),
                  kubelets=self.kubelets, nodes=self.nodes)


@pytest.fixture
def scenario(controller_manager: ControllerManager, scheduler: Any, cluster: Any, control_plane: ControlPlane,
             tmp_path: Path) -> Iterator[Scenario]:
    world = Scenario(cluster, control_plane, tmp_path)
    try:
        yield world
    finally:
        world.tear_down()


@pytest.mark.e2e
@pytest.mark.slow
def test_a_reclaimed_spot_node_is_cordoned_and_drained_one_pod_at_a_time_onto_on_demand_nodes(
        spot_binaries: Path, scenario: Scenario, controller_manager: ControllerManager) -> None:
    original = scenario.set_up()
    assert len(original) == REPLICAS
    controller = scenario.start_controller()

    def log() -> str:
        return (f"\nspot-controller's last output:\n{controller.tail()}\n"
                f"kube-controller-manager's last output:\n{controller_manager.tail(20)}")

    scenario.kubelets.recording.set()
    scenario.reclaim()

    def cordoned() -> bool:
        scenario.check_alive()
        node = scenario.read_node(scenario.spot)
        annotations = node["metadata"].get("annotations") or {}
        return node["spec"].get("unschedulable") is True and annotations.get(CORDONED_BY) == "spot-controller" \
            and DRAIN_STARTED in annotations

    try:
        wait_until(cordoned, what="the spot node to be cordoned by the spot controller", timeout=60)
    except TimeoutError as exc:
        pytest.fail(f"{exc}{log()}")

    def replaced() -> bool:
        scenario.check_alive()
        pods = scenario.pods()
        names = {p["metadata"]["name"] for p in pods}
        ready = [p for p in pods if is_ready(p)]
        return not names & set(original) and len(ready) == REPLICAS == len(pods)

    try:
        wait_until(replaced, what="the 3 pods to be evicted and replaced", timeout=WAIT)
    except TimeoutError as exc:
        pytest.fail(f"{exc}; pods now: {[(p['metadata']['name'], p['spec'].get('nodeName')) for p in scenario.pods()]}"
                    f"{log()}")
    scenario.kubelets.recording.clear()
    samples = list(scenario.kubelets.samples)

    # One at a time: the budget never let two of the 3 be unavailable at once.
    assert samples, "the kubelets sampled nothing"
    assert fewest_ready(samples) >= REPLICAS - 1, [s for s in samples if len(s.ready) < REPLICAS - 1][:5]
    assert any(name in s.ready for s in samples for name in original), "sampling began before the drain"
    # The replacements are on the on-demand nodes; the spot node stays cordoned and annotated.
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in scenario.pods()}
    assert set(placed.values()) <= set(scenario.on_demand), placed
    node = scenario.read_node(scenario.spot)
    assert node["spec"].get("unschedulable") is True
    assert node["metadata"]["annotations"][CORDONED_BY] == "spot-controller"
    # Events: each original pod Evicted; the budget blocked at least one eviction; the node Drained.
    evicted = scenario.events(scenario.namespace, "Evicted")
    assert {e["involvedObject"]["name"] for e in evicted} == set(original), evicted
    assert all(e["involvedObject"]["kind"] == "Pod" and e["type"] == "Normal" for e in evicted)
    blocked = scenario.events(scenario.namespace, "EvictionBlocked")
    assert blocked and {e["involvedObject"]["name"] for e in blocked} <= set(original), blocked
    try:
        wait_until(lambda: any(e["involvedObject"].get("name") == scenario.spot
                               for e in scenario.events("default", "Drained")),
                   what="the Drained event on the node", timeout=60)
    except TimeoutError as exc:
        pytest.fail(f"{exc}{log()}")
    reclaim = [e for e in scenario.events("default", "SpotReclaim") if e["involvedObject"].get("name") == scenario.spot]
    assert reclaim and SPOT_ITN in reclaim[0]["message"], reclaim
    assert controller.running(), log()


# --- offline: the command's dry run against the fake API server; the helpers ----------------------------


def test_offline_a_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    from tests.kit.fakeapi import FakeApiServer
    from tests.kit.fakeapi.objects import pod

    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs-1", "controller": True}
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-1", "controller": True}

    def node(name: str, capacity: str, *, taints: list[dict[str, str]] | None = None, cordoned: bool = False,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {CAPACITY_LABEL: capacity}, "annotations": annotations or {}},
                "spec": {"taints": taints or [], "unschedulable": cordoned},
                "status": {"allocatable": {"cpu": "4"}, "conditions": [{"type": "Ready", "status": "True"}]}}

    terminating = pod("old-1", "shop", node_name="spot-1", owner=rs)
    terminating["metadata"]["deletionTimestamp"] = "2024-05-01T10:00:00Z"
    with FakeApiServer.in_thread("1.31.0") as server:
        server.load([
            node("spot-1", "spot", taints=[{"key": SPOT_ITN, "value": "i-1", "effect": "NoSchedule"}]),
            node("spot-2", "spot", taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}], cordoned=True),
            node("spot-3", "spot", cordoned=True, annotations={DRAIN_STARTED: "2024-05-01T10:00:00Z",
                                                               CORDONED_BY: "spot-controller"}),
            node("od-1", "on-demand"),
            pod("web-1", "shop", node_name="spot-1", owner=rs), pod("web-2", "shop", node_name="spot-1", owner=rs),
            pod("web-3", "shop", node_name="od-1", owner=rs), terminating,
            pod("agent-x", "kube-system", node_name="spot-1", owner=ds),
            pod("done-1", "shop", node_name="spot-1", phase="Succeeded"),
            pod("job-1", "batch", node_name="spot-1"),
        ])
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_WEBHOOK_")}
        done = subprocess.run([sys.executable, "-m", "webhook", "spot-controller", "--kubeconfig", str(kubeconfig),
                               "--dry-run", "--exclude-namespace", "batch", "--metrics-port", "0"],
                              capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, check=False)
        writes = [f"{r.method} {r.path}" for r in server.requests if r.method not in ("GET", "HEAD")]
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        f"node spot-1: taint {SPOT_ITN}: cordon it, then evict:",
        "  batch/job-1 (skipped: in an excluded namespace)",
        "  kube-system/agent-x (skipped: a DaemonSet pod)",
        "  shop/old-1 (skipped: already terminating)",
        "  shop/web-1",
        "  shop/web-2",
        "node spot-2: taint karpenter.sh/disrupted: already cordoned, then evict:",
        "  (no pods)",
        "node spot-3: the reclaim signal is gone: stop its drain and uncordon it",
    ], done.stdout + done.stderr
    assert writes == [], "a dry run writes nothing"
    # shop/done-1 (Succeeded) is not even listed: the controller watches pods with the scheduler's
    # field selector, which leaves finished pods out.


def test_offline_the_live_test_skips_naming_each_missing_binary(tmp_path: Path) -> None:
    assert find_binary(tmp_path, CONTROLLER_MANAGER) is None
    (tmp_path / CONTROLLER_MANAGER).write_text("")
    assert find_binary(tmp_path, CONTROLLER_MANAGER) is None  # not executable
    (tmp_path / CONTROLLER_MANAGER).chmod(0o755)
    assert find_binary(tmp_path, CONTROLLER_MANAGER) == tmp_path / CONTROLLER_MANAGER
    both = missing_reason(tmp_path, [CONTROLLER_MANAGER, SCHEDULER])
    assert CONTROLLER_MANAGER in both and SCHEDULER in both and "KUBEBUILDER_ASSETS" in both and str(tmp_path) in both
    assert "binaries" in both and "binary " in missing_reason(tmp_path, [CONTROLLER_MANAGER])


@pytest.mark.parametrize(("version", "insecure_off"), [((1, 19), True), ((1, 23), True), ((1, 24), False),
                                                       ((1, 33), False), (None, False)])
def test_offline_the_controller_manager_flags(tmp_path: Path, version: tuple[int, int] | None,
                                              insecure_off: bool) -> None:
    manager = ControllerManager(control_plane=ControlPlane(assets=tmp_path, workdir=tmp_path), workdir=tmp_path,
                                port=12345)
    argv = manager.argv(tmp_path / "kubeconfig", version)
    assert argv[0] == str(tmp_path / CONTROLLER_MANAGER)
    for flag in ("--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=12345",
                 "--use-service-account-credentials=false", f"--kubeconfig={tmp_path / 'kubeconfig'}",
                 f"--authentication-kubeconfig={tmp_path / 'kubeconfig'}",
                 f"--authorization-kubeconfig={tmp_path / 'kubeconfig'}",
                 "--controllers=deployment,replicaset,disruption,garbagecollector"):
        assert flag in argv
    assert not any("nodelifecycle" in a or a == "--controllers=*" for a in argv), "no node lifecycle controller"
    assert ("--port=0" in argv) is insecure_off
    assert manager.healthz == "https://127.0.0.1:12345/healthz"


def test_offline_readiness_is_what_the_disruption_controller_counts() -> None:
    ready = {"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert is_ready(ready)
    assert not is_ready({"metadata": {"name": "a", "deletionTimestamp": "2024-05-01T10:00:00Z"},
                         "status": ready["status"]})
    assert not is_ready({"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert not is_ready({"metadata": {"name": "a"}, "status": {"phase": "Pending"}})
    status = running_status()
    assert status["phase"] == "Running" and is_ready({"metadata": {}, "status": status})
    assert {c["type"] for c in status["conditions"]} == {"Initialized", "Ready", "ContainersReady", "PodScheduled"}
    samples = [Sample(0.0, ("a", "b", "c"), ()), Sample(1.0, ("b", "c"), ()), Sample(2.0, ("b", "c", "d"), ())]
    assert fewest_ready(samples) == 2 and fewest_ready([]) == 0
