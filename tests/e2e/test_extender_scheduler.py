"""The spot extender behind a real kube-scheduler (issue 19, item 6).

With ``kube-scheduler`` in KUBEBUILDER_ASSETS next to etcd and kube-apiserver, the module starts
``placement-webhook extender`` as a subprocess over HTTP, watching the control plane through the
admin kubeconfig (node names are judged by its cluster view: ``nodeCacheCapable``), with a
SpotConfig whose ``critical.priorityThreshold`` is 1000. Then a second kube-scheduler: its own
``--config`` (a ``KubeSchedulerConfiguration`` in the apiVersion its release reads) with one
profile named ``spot-aware`` (so the session's default scheduler, when it runs, never takes
these pods, nor this one the others'), no leader election, and as ``extenders`` exactly what
``placement-webhook extender --print-scheduler-config URL --weight 10`` prints (names, not whole
Nodes; ``ignorable``). Weight 10: the extender's 0..10 score counts x 10 x 10 against the default
plugins' 0..100 scores, which differ by a few points between these identical empty nodes.

Each scenario has a namespace and three Nodes of its own: two spot and one on-demand by
``node.kubernetes.io/capacity`` (the generic provider's label), an instance type of their own (a
spot pool of their own: a reclaim seen in one scenario lowers no other's spot nodes), and
``SCENARIO_LABEL: <unique id>``, which its pods select, so no other test's Nodes interfere.
Pods are created one at a time, each bound or marked Unschedulable before the next:

- ``interruptible``: pods annotated ``placement.novasphere.dev/interruptible: "true"`` land on the
  spot nodes (10 there, 3 on demand);
- ``critical``: pods of a PriorityClass valued 5000 (at least the threshold) land on the on-demand
  node (10 there, 0 on spot), and an interruptible pod on the same nodes still goes to spot;
- ``reclaim``: spot-1 carries aws-node-termination-handler's ``spot-itn:NoSchedule`` taint, which
  the pods tolerate, so the scheduler's own TaintToleration passes it and only the extender's
  filter keeps them off: every interruptible pod lands on spot-2, and a pod whose nodeSelector
  names spot-1 stays Pending with the extender's reason in its message.

Readiness, before the first pod: a probe pod per node (tolerating everything, requesting nothing,
through the spot-aware scheduler) must be bound there, so the scheduler's cache holds the nodes;
then the extender's own answers (filter and prioritize of the scenario's nodes, over HTTP) must
show that its view holds them as set up: the reclaim taint (added only after the probes, which
the extender would keep off that node), the capacities, the PriorityClass.

The offline tests at the end run everywhere: the extender as a subprocess with ``--no-cluster``,
spoken to exactly as ``HTTPExtender.send`` (pkg/scheduler/extender.go) speaks to it, whole Node
objects in ``ExtenderArgs.Nodes``, its answers decoded the way Go decodes them into
``ExtenderFilterResult`` and ``HostPriorityList``; and the scheduler configuration per release.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit.envtest import (
    ROOT,
    ControlPlane,
    Process,
    Scheduler,
    binary_version,
    free_port,
    wait_until,
)
from tests.kit.envtest import quietly as _quietly
from tests.kit.envtest import raw_json as _json
from tests.kit.envtest import unschedulable as _unschedulable
from webhook import ANNOTATION_SKIP

SCHEDULER_NAME = "spot-aware"
SCENARIO_LABEL = "e2e.novasphere.dev/spot-scenario"
PROBE_LABEL = "e2e.novasphere.dev/probe"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY = "node.kubernetes.io/capacity"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
INTERRUPTIBLE = "placement.novasphere.dev/interruptible"
SPOT_ITN = "aws-node-termination-handler/spot-itn"
RECLAIM_TAINT = {"key": SPOT_ITN, "effect": "NoSchedule"}
RECLAIM_TOLERATION = {"key": SPOT_ITN, "operator": "Exists", "effect": "NoSchedule"}
THRESHOLD, CRITICAL_VALUE = 1000, 5000
WEIGHT = 10
IMAGE = "registry.k8s.io/pause:3.9"
MERGE_PATCH = "application/merge-patch+json"
SETTLE = 60.0  # seconds for the scheduler to bind a pod or mark it Unschedulable
PROBE_SETTLE = 120.0  # a probe first tried on a stale cache waits for a requeue (see test_explain_scheduler)
SPOT_CONFIG = f"""\
apiVersion: placement.novasphere.dev/v1alpha1
kind: SpotConfig
critical:
  priorityThreshold: {THRESHOLD}
"""


# --- the extender and the second scheduler -----------------------------------------------------------


@dataclass
class SpotExtender:
    """``placement-webhook extender`` over HTTP on loopback: watching the cluster through
    ``kubeconfig``, or with ``--no-cluster`` (whole Node objects only) when it is None."""

    workdir: Path
    kubeconfig: Path | None = None
    port: int = field(default_factory=free_port)
    process: Process | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        config = self.workdir / "spot-config.yaml"
        config.write_text(SPOT_CONFIG)
        argv = [sys.executable, "-m", "webhook", "extender", "--host=127.0.0.1", f"--port={self.port}",
                f"--config={config}"]
        return argv + ([f"--kubeconfig={self.kubeconfig}"] if self.kubeconfig is not None else ["--no-cluster"])

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_WEBHOOK_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        process = Process("placement-webhook extender", self.argv(), self.workdir / "extender.log", env=env)
        self.process = process
        process.start()
        # /readyz answers 200 once the cluster view has synced (at once with --no-cluster).
        wait_until(lambda: process.answers(f"{self.url}/readyz"), what="the extender's /readyz", timeout=60)

    def stop(self) -> int | None:
        code = self.process.stop() if self.process else None
        self.process = None
        return code

    def tail(self, lines: int = 40) -> str:
        return self.process.tail(lines) if self.process else ""

    def send(self, verb: str, args: Any) -> tuple[int, Any]:
        """``HTTPExtender.send``: POST the JSON to ``<urlPrefix>/<verb>``; the status and the
        decoded answer (the scheduler reads an answer only with 200)."""
        body = args if isinstance(args, bytes) else json.dumps(args).encode()
        request = urllib.request.Request(f"{self.url.rstrip('/')}/{verb}", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status), json.load(response)
        except urllib.error.HTTPError as exc:
            return int(exc.code), json.loads(exc.read() or b"null")


def printed_stanza(url: str, weight: int = WEIGHT) -> list[dict[str, Any]]:
    """The ``extenders`` list ``placement-webhook extender --print-scheduler-config`` prints."""
    done = subprocess.run([sys.executable, "-m", "webhook", "extender", "--print-scheduler-config", url,
                           f"--weight={weight}"], capture_output=True, text=True, timeout=60, check=True, cwd=ROOT)
    extenders: list[dict[str, Any]] = yaml.safe_load(done.stdout)["extenders"]
    return extenders


def config_api_version(version: tuple[int, int] | None) -> str:
    """The ``KubeSchedulerConfiguration`` version a kube-scheduler release reads (the newest
    it serves): v1 from 1.25, v1beta3 in 1.23-1.24, v1beta2 in 1.22, v1beta1 in 1.19-1.21.
    The fields used here (profiles, leaderElection, clientConnection, extenders) have the same
    names in all four."""
    if version is None or version >= (1, 25):
        return "kubescheduler.config.k8s.io/v1"
    if version >= (1, 23):
        return "kubescheduler.config.k8s.io/v1beta3"
    if version >= (1, 22):
        return "kubescheduler.config.k8s.io/v1beta2"
    return "kubescheduler.config.k8s.io/v1beta1"


def scheduler_configuration(version: tuple[int, int] | None, kubeconfig: Path,
                            extenders: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": config_api_version(version),
        "kind": "KubeSchedulerConfiguration",
        # With --config the file is the whole component configuration: the --kubeconfig and
        # --leader-elect flags are ignored (1.19-1.24) or only partly applied, so both are here.
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": SCHEDULER_NAME}],
        "extenders": extenders,
    }


@dataclass
class SpotScheduler(Scheduler):
    """A second kube-scheduler with the ``spot-aware`` profile and the extender, configured by
    file; the serving flags (secure port, delegated authn/authz, ``--port=0`` before 1.24)
    are the session scheduler's."""

    extenders: list[dict[str, Any]] = field(default_factory=list)

    @property
    def config_file(self) -> Path:
        return self.workdir / "spot-scheduler.yaml"

    def argv(self, kubeconfig: Path, version: tuple[int, int] | None) -> list[str]:
        self.config_file.write_text(yaml.safe_dump(scheduler_configuration(version, kubeconfig, self.extenders),
                                                   sort_keys=False))
        kept = [a for a in super().argv(kubeconfig, version) if not a.startswith(("--kubeconfig=", "--leader-elect="))]
        return [*kept, f"--config={self.config_file}"]


@dataclass
class Spot:
    extender: SpotExtender
    scheduler: SpotScheduler
    cluster: Any

    def logs(self) -> str:
        return (f"extender's last output:\n{self.extender.tail()}\n"
                f"spot-aware kube-scheduler's last output:\n{self.scheduler.tail()}")


@pytest.fixture(scope="module")
def spot(scheduler_binary: Path, control_plane: ControlPlane, cluster: Any,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spot]:
    """The extender and the spot-aware scheduler. ``scheduler_binary`` comes first, and the
    tests reach the cluster only through this fixture: without kube-scheduler they skip
    (naming it) before anything starts."""
    workdir = tmp_path_factory.mktemp("spot-extender")
    extender = SpotExtender(workdir, control_plane.write_kubeconfig(workdir / "extender.kubeconfig"))
    scheduler = SpotScheduler(control_plane=control_plane, workdir=tmp_path_factory.mktemp("spot-scheduler"),
                              extenders=printed_stanza(extender.url))
    try:
        extender.start()
        scheduler.start()
        yield Spot(extender, scheduler, cluster)
    finally:
        scheduler.stop()
        extender.stop()


# --- a scenario in the cluster -------------------------------------------------------------------------








def ready_status() -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e: no kubelet behind it",
             "lastHeartbeatTime": now, "lastTransitionTime": now}
    return {"capacity": resources, "allocatable": dict(resources), "conditions": [ready]}


class World:
    """One scenario: its namespace, Nodes, PriorityClass and pods; torn down by ``tear_down``."""

    def __init__(self, spot: Spot, scenario: str) -> None:
        cluster = spot.cluster
        self.core = cluster.core
        self.scheduling = cluster.scheduling
        self.spot = spot
        self.id = f"{scenario}-{uuid.uuid4().hex[:6]}"
        # The skip label keeps the session's webhooks (test_api_server) away from these pods.
        self.namespace = str(cluster.create_namespace(labels={ANNOTATION_SKIP: "true", SCENARIO_LABEL: self.id}))
        self.capacities: dict[str, str] = {}
        self.classes: list[str] = []

    def node(self, suffix: str) -> str:
        return f"e2e-{self.id}-{suffix}"

    @property
    def names(self) -> list[str]:
        return list(self.capacities)

    def suffix(self, node: str | None) -> str | None:
        prefix = f"e2e-{self.id}-"
        return node[len(prefix):] if node and node.startswith(prefix) else node

    # set-up

    def add_node(self, suffix: str, capacity: str) -> None:
        """Create, then write the spec (replacing the not-ready taint the TaintNodesByCondition
        admission plugin puts on a new Node), then the status."""
        name = self.node(suffix)
        labels = {HOSTNAME: name, SCENARIO_LABEL: self.id, CAPACITY: capacity, INSTANCE_TYPE: f"e2e-{self.id}"}
        _json(self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}},
                                    _preload_content=False))
        self.capacities[name] = capacity
        self.taint(suffix, ())
        _json(self.core.patch_node_status(name, {"status": ready_status()}, _content_type=MERGE_PATCH,
                                          _preload_content=False))

    def taint(self, suffix: str, taints: tuple[Mapping[str, str], ...]) -> None:
        _json(self.core.patch_node(self.node(suffix), {"spec": {"taints": [dict(t) for t in taints],
                                                                "unschedulable": False}},
                                   _content_type=MERGE_PATCH, _preload_content=False))

    def add_priority_class(self, value: int) -> str:
        name = f"e2e-{self.id}-critical"
        _json(self.scheduling.create_priority_class({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": False, "description": "e2e: critical by the extender's threshold"},
            _preload_content=False))
        self.classes.append(name)
        return name

    def probe(self) -> None:
        """A probe pod per node, through the spot-aware scheduler, bound there: its cache holds
        the nodes (their status is written last). Then the probes go."""
        for name in self.names:
            probe = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"probe-{self.suffix(name)}", "namespace": self.namespace,
                                  "labels": {PROBE_LABEL: "true"}},
                     "spec": {"schedulerName": SCHEDULER_NAME, "nodeSelector": {HOSTNAME: name},
                              "tolerations": [{"operator": "Exists"}],
                              "containers": [{"name": "main", "image": IMAGE}]}}
            _json(self.core.create_namespaced_pod(self.namespace, probe, _preload_content=False))
        for name in self.names:
            self.settle(f"probe-{self.suffix(name)}", bound=True, timeout=PROBE_SETTLE)
        _json(self.core.delete_collection_namespaced_pod(self.namespace, label_selector=PROBE_LABEL,
                                                         grace_period_seconds=0, _preload_content=False))
        wait_until(lambda: not self.pods(PROBE_LABEL), what="the probe pods to be deleted", timeout=SETTLE)

    def extender_sees(self, *, reclaimed: frozenset[str] = frozenset(), priority_class: str | None = None) -> None:
        """Wait until the extender's answers show its view holds the nodes as set up: the filter
        fails exactly ``reclaimed`` (suffixes); an interruptible pod scores every passed spot node
        above the on-demand one; a pod naming ``priority_class`` (and no ``spec.priority``, so
        only the view's PriorityClass can make it critical) the other way round."""
        marked = {self.node(s) for s in reclaimed}
        seen: dict[str, Any] = {}

        def scores(pod: dict[str, Any], names: list[str]) -> dict[str, int]:
            status, answer = self.spot.extender.send("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": names})
            assert status == 200, answer
            return {entry["Host"]: entry["Score"] for entry in answer}

        def holds() -> bool:
            interruptible = {"metadata": {"name": "readiness", "namespace": self.namespace,
                                          "annotations": {INTERRUPTIBLE: "true"}}, "spec": {}}
            status, answer = self.spot.extender.send("filter", {"Pod": interruptible, "Nodes": None,
                                                                "NodeNames": self.names})
            seen["filter"] = answer
            if status != 200 or answer.get("Error") or set(answer.get("FailedAndUnresolvableNodes") or {}) != marked:
                return False
            passed = list(answer["NodeNames"])
            spot = [n for n in passed if self.capacities[n] == "spot"]
            on_demand = [n for n in passed if self.capacities[n] == "on-demand"]
            got = seen["interruptible"] = scores(interruptible, passed)
            if not all(got[s] > got[o] for s in spot for o in on_demand):
                return False
            if priority_class is not None:
                critical = {"metadata": {"name": "readiness", "namespace": self.namespace},
                            "spec": {"priorityClassName": priority_class}}
                got = seen["critical"] = scores(critical, passed)
                return all(got[o] > got[s] for s in spot for o in on_demand)
            return True

        try:
            wait_until(holds, what="the extender's view to hold the scenario's nodes", timeout=SETTLE)
        except TimeoutError as exc:
            pytest.fail(f"{exc}; its last answers: {seen}\n{self.spot.logs()}")

    # pods

    def pod(self, name: str, *, interruptible: bool = False, priority_class: str | None = None,
            tolerations: tuple[Mapping[str, str], ...] = (), host: str | None = None) -> dict[str, Any]:
        selector = {SCENARIO_LABEL: self.id}
        if host is not None:
            selector[HOSTNAME] = self.node(host)
        spec: dict[str, Any] = {"schedulerName": SCHEDULER_NAME, "nodeSelector": selector,
                                "containers": [{"name": "main", "image": IMAGE}]}
        if priority_class is not None:
            spec["priorityClassName"] = priority_class
        if tolerations:
            spec["tolerations"] = [dict(t) for t in tolerations]
        meta: dict[str, Any] = {"name": name, "namespace": self.namespace, "labels": {"app": name}}
        if interruptible:
            meta["annotations"] = {INTERRUPTIBLE: "true"}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def schedule(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Create the pod (the Priority admission plugin reads PriorityClasses from an informer:
        a class just created may be unknown to it for a moment) and wait until it is settled."""
        from kubernetes.client.exceptions import ApiException

        def created() -> bool:
            try:
                _json(self.core.create_namespaced_pod(self.namespace, pod, _preload_content=False))
            except ApiException as exc:
                if exc.status == 403 and "PriorityClass" in str(exc.body):
                    return False
                raise
            return True

        wait_until(created, what=f"pod {pod['metadata']['name']} to be admitted", timeout=SETTLE)
        return self.settle(pod["metadata"]["name"])

    def settle(self, name: str, *, bound: bool = False, timeout: float = SETTLE) -> dict[str, Any]:
        """The pod once bound, or (unless ``bound``) once marked Unschedulable."""
        seen: dict[str, Any] = {}

        def settled() -> bool:
            for process in (self.spot.scheduler, self.spot.extender):
                if process.process is None or not process.process.running():
                    raise RuntimeError(f"a process exited\n{self.spot.logs()}")
            seen.clear()
            seen.update(_json(self.core.read_namespaced_pod(name, self.namespace, _preload_content=False)))
            return bool(seen["spec"].get("nodeName")) or (not bound and _unschedulable(seen) is not None)

        try:
            wait_until(settled, what=f"pod {self.namespace}/{name} to be scheduled", timeout=timeout)
        except TimeoutError as exc:
            pytest.fail(f"{exc}; its PodScheduled=False message: {_unschedulable(seen)!r}\n{self.spot.logs()}")
        return dict(seen)

    def pods(self, label_selector: str | None = None, node: str | None = None) -> list[dict[str, Any]]:
        extra: dict[str, Any] = {}
        if label_selector:
            extra["label_selector"] = label_selector
        if node:
            extra["field_selector"] = f"spec.nodeName={node}"
        listed = _json(self.core.list_namespaced_pod(self.namespace, _preload_content=False, **extra))
        return list(listed.get("items") or [])

    def tear_down(self) -> None:
        """Pods first (force: no kubelet confirms anything), then the Nodes and PriorityClass.
        The namespace stays (Terminating forever without the namespace controller otherwise)."""
        _quietly(lambda: _json(self.core.delete_collection_namespaced_pod(
            self.namespace, grace_period_seconds=0, _preload_content=False)))
        for name in self.names:
            _quietly(functools.partial(self._delete_node, name))
        for name in self.classes:
            _quietly(functools.partial(self._delete_class, name))

    def _delete_node(self, name: str) -> None:
        _json(self.core.delete_node(name, _preload_content=False))

    def _delete_class(self, name: str) -> None:
        _json(self.scheduling.delete_priority_class(name, _preload_content=False))


@pytest.fixture
def world(request: pytest.FixtureRequest, spot: Spot) -> Iterator[World]:
    """The test's scenario (named after it): two spot nodes and one on-demand, probed; torn
    down after. The cluster comes through ``spot``, so a missing kube-scheduler skips first."""
    scenario = request.node.name.removeprefix("test_").split("_")[0]
    made = World(spot, scenario)
    try:
        made.add_node("spot-1", "spot")
        made.add_node("spot-2", "spot")
        made.add_node("od-1", "on-demand")
        made.probe()
        yield made
    finally:
        made.tear_down()


def where(world: World, pod: Mapping[str, Any]) -> str | None:
    return world.suffix(pod["spec"].get("nodeName"))


@pytest.mark.e2e
@pytest.mark.slow
def test_interruptible_pods_land_on_spot_nodes(world: World) -> None:
    world.extender_sees()
    for i in range(3):
        got = world.schedule(world.pod(f"batch-{i}", interruptible=True))
        assert where(world, got) in ("spot-1", "spot-2"), (
            f"interruptible pod batch-{i} went to {where(world, got)} (message {_unschedulable(got)!r}), "
            f"expected a spot node\n{world.spot.logs()}")


@pytest.mark.e2e
@pytest.mark.slow
def test_critical_pods_land_on_the_on_demand_node(world: World) -> None:
    critical = world.add_priority_class(CRITICAL_VALUE)
    world.extender_sees(priority_class=critical)
    for i in range(2):
        got = world.schedule(world.pod(f"platform-{i}", priority_class=critical))
        assert got["spec"].get("priority") == CRITICAL_VALUE, got["spec"]
        assert where(world, got) == "od-1", (
            f"critical pod platform-{i} went to {where(world, got)} (message {_unschedulable(got)!r}), "
            f"expected od-1\n{world.spot.logs()}")
    got = world.schedule(world.pod("batch-0", interruptible=True))
    assert where(world, got) in ("spot-1", "spot-2"), f"{where(world, got)}\n{world.spot.logs()}"


@pytest.mark.e2e
@pytest.mark.slow
def test_reclaim_marked_spot_node_receives_no_pod(world: World) -> None:
    world.taint("spot-1", (RECLAIM_TAINT,))  # after the probes: the extender would keep one off
    world.extender_sees(reclaimed=frozenset({"spot-1"}))
    for i in range(3):
        got = world.schedule(world.pod(f"batch-{i}", interruptible=True, tolerations=(RECLAIM_TOLERATION,)))
        assert where(world, got) == "spot-2", (
            f"interruptible pod batch-{i} went to {where(world, got)} (message {_unschedulable(got)!r}), "
            f"expected spot-2: spot-1 is about to be reclaimed\n{world.spot.logs()}")
    # Only spot-1 passes the scheduler's own filters (it tolerates the taint): the extender's
    # filter alone keeps the pod Pending, and its reason is in the scheduler's message.
    pinned = world.schedule(world.pod("pinned", interruptible=True, tolerations=(RECLAIM_TOLERATION,), host="spot-1"))
    assert where(world, pinned) is None, f"the pinned pod was bound to spot-1\n{world.spot.logs()}"
    message = _unschedulable(pinned) or ""
    assert "about to be reclaimed" in message, message
    assert world.pods(node=world.node("spot-1")) == []


# --- offline: the protocol as the scheduler speaks it; the configuration -----------------------------


def go_fields(answer: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The answer as encoding/json decodes it into a struct with these (untagged) fields: an
    exact key first, else a case-insensitive one; other keys are dropped, so none may be
    meant for a field and missed."""
    out: dict[str, Any] = {}
    for key, value in answer.items():
        name = key if key in fields else next((f for f in fields if f.lower() == key.lower()), None)
        assert name is not None, f"{key!r} is no field of {fields}: the scheduler would drop it"
        out.setdefault(name, value)
    return out


FILTER_RESULT = ("Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error")
HOST_PRIORITY = ("Host", "Score")


def whole_node(name: str, capacity: str, taints: tuple[Mapping[str, str], ...] = (),
               instance_type: str = "m6i.large") -> dict[str, Any]:
    """A Node as the scheduler marshals it into ``NodeList.Items``: from its informer cache,
    without apiVersion and kind, every field the API server gave it."""
    return {"metadata": {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), "resourceVersion": "812",
                         "creationTimestamp": "2024-05-01T10:00:00Z",
                         "labels": {HOSTNAME: name, CAPACITY: capacity, INSTANCE_TYPE: instance_type,
                                    "kubernetes.io/os": "linux"},
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"providerID": f"aws:///eu-west-1a/i-{name}", **({"taints": [dict(t) for t in taints]} if taints else {})},
            "status": {**ready_status(), "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
                       "nodeInfo": {"kubeletVersion": "v1.31.0", "operatingSystem": "linux", "architecture": "amd64"}}}


def go_pod(name: str, *, annotations: Mapping[str, str] | None = None, priority: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": SCHEDULER_NAME, "containers": [{"name": "main", "image": IMAGE,
                                                                             "resources": {}}]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": name, "namespace": "shop", "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                         "annotations": dict(annotations or {})},
            "spec": spec, "status": {"phase": "Pending", "qosClass": "BestEffort"}}


def go_args(pod: Mapping[str, Any], *, nodes: list[dict[str, Any]] | None = None,
            names: list[str] | None = None) -> bytes:
    """``json.Marshal(&ExtenderArgs{Pod, Nodes, NodeNames})``: untagged fields by their Go names,
    the nil pointer of the other mode as ``null``, the NodeList's empty ListMeta as ``{}``."""
    node_list = None if nodes is None else {"metadata": {}, "items": nodes}
    return json.dumps({"Pod": pod, "Nodes": node_list, "NodeNames": names}, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def offline_extender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpotExtender]:
    extender = SpotExtender(tmp_path_factory.mktemp("offline-extender"))
    try:
        extender.start()
        yield extender
    finally:
        extender.stop()


def test_offline_filter_of_whole_nodes_answers_a_filter_result_the_scheduler_decodes(
        offline_extender: SpotExtender) -> None:
    nodes = [whole_node("spot-1", "spot", (RECLAIM_TAINT,)), whole_node("spot-2", "spot"),
             whole_node("od-1", "on-demand")]
    pod = go_pod("batch-0", annotations={INTERRUPTIBLE: "true"})
    status, answer = offline_extender.send("filter", go_args(pod, nodes=nodes))
    assert status == 200, answer
    result = go_fields(answer, FILTER_RESULT)
    assert result["Error"] == ""
    # Objects mode: the scheduler keeps result.Nodes.Items as the nodes that passed, so they
    # come back whole and unchanged; NodeNames is not read (nodeCacheCapable is false).
    assert result["Nodes"]["items"] == nodes[1:]
    assert not result.get("NodeNames")
    reason = "node is about to be reclaimed (taint aws-node-termination-handler/spot-itn)"
    assert result["FailedAndUnresolvableNodes"] == {"spot-1": reason}
    assert result["FailedNodes"] == {"spot-1": reason}  # what schedulers before 1.21 read
    for entry in (result["FailedNodes"], result["FailedAndUnresolvableNodes"]):
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in entry.items())  # FailedNodesMap


def test_offline_prioritize_of_whole_nodes_answers_a_bare_host_priority_list(offline_extender: SpotExtender) -> None:
    # A pool of their own: the reclaim the filter test shows lowers the m6i.large spot pool.
    nodes = [whole_node("spot-2", "spot", instance_type="c6i.large"),
             whole_node("od-1", "on-demand", instance_type="c6i.large")]
    for pod, want in ((go_pod("batch-0", annotations={INTERRUPTIBLE: "true"}), {"spot-2": 10, "od-1": 3}),
                      (go_pod("platform-0", priority=CRITICAL_VALUE), {"spot-2": 0, "od-1": 10}),
                      (go_pod("web-0", priority=0), {"spot-2": 5, "od-1": 5})):
        status, answer = offline_extender.send("prioritize", go_args(pod, nodes=nodes))
        assert status == 200, answer
        assert isinstance(answer, list), answer  # HostPriorityList: a bare JSON array
        entries = [go_fields(entry, HOST_PRIORITY) for entry in answer]
        assert all(isinstance(e["Host"], str) and type(e["Score"]) is int and 0 <= e["Score"] <= 10 for e in entries)
        assert {e["Host"]: e["Score"] for e in entries} == want, pod["metadata"]["name"]


def test_offline_node_names_without_a_view_pass_and_score_neutral(offline_extender: SpotExtender) -> None:
    pod = go_pod("batch-0", annotations={INTERRUPTIBLE: "true"})
    status, answer = offline_extender.send("filter", go_args(pod, names=["n1", "n2"]))
    assert status == 200
    result = go_fields(answer, FILTER_RESULT)
    assert (result["NodeNames"], result["Error"], result["FailedNodes"]) == (["n1", "n2"], "", {})
    status, answer = offline_extender.send("prioritize", go_args(pod, names=["n1", "n2"]))
    assert (status, answer) == (200, [{"Host": "n1", "Score": 5}, {"Host": "n2", "Score": 5}])


def test_offline_a_broken_request_gets_an_error_the_scheduler_reads(offline_extender: SpotExtender) -> None:
    status, answer = offline_extender.send("filter", b"{not json")
    assert status == 200  # send() reads the body only with 200: the Error must be in one
    result = go_fields(answer, FILTER_RESULT)
    assert result["Error"], result  # a non-empty Error: the extender failed (ignorable: skipped)


@pytest.mark.parametrize(("version", "api_version"), [
    ((1, 19), "v1beta1"), ((1, 21), "v1beta1"), ((1, 22), "v1beta2"), ((1, 23), "v1beta3"), ((1, 24), "v1beta3"),
    ((1, 25), "v1"), ((1, 33), "v1"), (None, "v1")])
def test_offline_the_scheduler_configuration_per_release(tmp_path: Path, version: tuple[int, int] | None,
                                                         api_version: str) -> None:
    extenders = printed_stanza("http://127.0.0.1:8888")
    assert extenders == [{"urlPrefix": "http://127.0.0.1:8888", "filterVerb": "filter",
                          "prioritizeVerb": "prioritize", "weight": WEIGHT, "nodeCacheCapable": True,
                          "ignorable": True, "httpTimeout": "5s"}]
    config = scheduler_configuration(version, tmp_path / "kubeconfig", extenders)
    assert config["apiVersion"] == f"kubescheduler.config.k8s.io/{api_version}"
    assert config["profiles"] == [{"schedulerName": SCHEDULER_NAME}]
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["clientConnection"] == {"kubeconfig": str(tmp_path / "kubeconfig")}
    server = SpotScheduler(control_plane=ControlPlane(assets=tmp_path, workdir=tmp_path), workdir=tmp_path,
                           port=12345, extenders=extenders)
    argv = server.argv(tmp_path / "kubeconfig", version)
    assert f"--config={server.config_file}" in argv and "--secure-port=12345" in argv
    assert not any(a.startswith(("--kubeconfig=", "--leader-elect=")) for a in argv)
    assert ("--port=0" in argv) is (version is not None and version < (1, 24))
    assert yaml.safe_load(server.config_file.read_text()) == config


def test_offline_the_binary_version_picks_the_configuration(tmp_path: Path) -> None:
    binary = tmp_path / "kube-scheduler"
    binary.write_text("#!/bin/sh\necho 'Kubernetes v1.22.17'\n")
    binary.chmod(0o755)
    assert config_api_version(binary_version(binary)) == "kubescheduler.config.k8s.io/v1beta2"
