"""A writer killed mid-work (issue 29, item 3): two replicas of a writer on one Lease, the
leader SIGKILLed in the middle of its work, and the other finishing it, on the fault tier's real
control plane (kube-apiserver, kube-scheduler, kube-controller-manager).

``spot-controller``: a spot node carries six replicas of a Deployment under a PodDisruptionBudget
of ``maxUnavailable: 1``; an on-demand node (cordoned until the six are placed) takes the
replacements. The node gets aws-node-termination-handler's reclaim taint; the leader cordons it,
writes when the drain began on it, and evicts one pod; it is killed as soon as the API server has
carried out that eviction. This test plays the kubelets and starts no replacement until the API
server has answered every Eviction the dead leader sent, so the budget has no room for one of
them meanwhile (an Eviction carries on in the API server without its sender: one that finds room
charges the budget and then fails to delete its pod, and the budget stays a disruption short for
the disruption controller's two minutes). The other replica takes the Lease once it has expired,
resumes the drain from the node's annotation, with the same deadline, and evicts the other five,
one at a time. Sampled every 0.2 s, the Deployment never has fewer than five Ready pods; the
audit log shows one Eviction carried out per pod, and no pod deleted by either replica (the only
pod deletes are this test's kubelets finishing evicted pods).

``label-nodes``: sixteen nodes carry the labeler's labels; a pod lands on each, so every node's
labels are to change; the leader, rate-limited, is killed when it has written four nodes. The
other replica takes over and writes the rest; the labels then equal what ``label-nodes
--dry-run`` computes (it would write nothing), no node was written twice, and, sampled every
0.1 s, no node ever carried some of its new labels beside some of its old ones. That is the API
server's doing: each node's labels are written in one JSON merge patch, and the API server
applies a patch whole to the object it read and stores the result in one compare-and-swap
(``patcher.applyPatch`` in staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go is
"called every time GuaranteedUpdate asks for the updated object, and is given the currently
persisted object as input"; ``GuaranteedUpdate`` writes the new object in one etcd transaction
conditional on the revision it read, and on a conflict applies the whole patch again to the
newer object), so a reader sees the node before the patch or after it, never part of it.

The takeover is timed on the Lease: from the dead leader's last ``renewTime`` to the survivor's
``acquireTime`` (both written by the replicas from the same machine's clock).
"""
from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.kit.envtest import ROOT, Cluster, ControlPlane, ControllerManager, Scheduler, quietly, raw_json, wait_until
from tests.kit.faults import figure
from tests.kit.kubelets import MERGE_PATCH, Kubelets, fewest_ready, is_ready, now_rfc3339, tear_down
from tests.kit.writers import (
    ADMIN,
    USERS,
    AuditTail,
    Replica,
    Timings,
    at,
    by,
    code,
    evicted,
    evictions,
    node_patches,
    pod_deletes,
    read_lease,
    ref,
    seconds,
    start_replicas,
    tails,
    unanswered,
    user,
    utc,
)
from webhook import ANNOTATION_SKIP
from webhook.labeler.values import LABELS, PREFIX
from webhook.spot.controller import CORDONED_BY, DRAIN_STARTED

# Short enough for a quick test, long enough for a replica starved of CPU on a loaded machine to
# renew in time (a leader that misses its renew deadline exits, and nothing here restarts it).
TIMINGS = Timings(lease_duration=5.0, renew_deadline=4.0, retry_period=0.5)
# What the takeover may take beyond Timings.takeover_bound: the round trips of the last renewal,
# of the candidate's GET and of its PUT, on a machine shared with the rest of the tier.
ROUND_TRIPS = 1.0
WAIT = 120.0
SCENARIO_LABEL = "faults.novasphere.dev/writers"


def wait_for(check: Callable[[], bool], *, what: str, timeout: float = WAIT, interval: float = 0.05,
             replicas: Sequence[Replica] = (), state: Callable[[], str] | None = None) -> None:
    """``wait_until``, failing with the replicas' logs (and ``state()``, what the cluster shows)."""
    try:
        wait_until(check, what=what, timeout=timeout, interval=interval)
    except TimeoutError as exc:
        pytest.fail(f"{exc}{f'; {state()}' if state else ''}{tails(replicas)}")


def audit_shows(audit: AuditTail, check: Callable[[list[dict[str, Any]]], bool], *, what: str) -> None:
    """Wait for the audit log to show ``what``: the API server writes a request's event once it has
    answered it, so a reader can see a write's effect a moment before its event."""

    def shown() -> bool:
        audit.read()
        return check(audit.events)

    wait_for(shown, what=f"the audit log to show {what}", timeout=10)


def leader_and_other(api_client: Any, lease: tuple[str, str], replicas: list[Replica]) -> tuple[Replica, Replica]:
    """The replica holding the Lease, and the other, once both have asked for it."""
    holder: dict[str, Replica] = {}

    def decided() -> bool:
        for replica in replicas:
            if not replica.process.running():
                raise RuntimeError(f"{replica.process.name} exited{tails(replicas)}")
        identities = {r.identity(): r for r in replicas}
        found = identities.get(str(read_lease(api_client, *lease).get("holderIdentity") or ""))
        if found is not None and None not in identities:
            holder["leader"] = found
        return bool(holder)

    wait_for(decided, what="one replica to hold the Lease and the other to wait for it", timeout=60, replicas=replicas)
    leader = holder["leader"]
    return leader, next(r for r in replicas if r is not leader)


def follow_takeover(api_client: Any, lease: tuple[str, str], dead: Replica, survivor: Replica,
                    replicas: list[Replica]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Lease as the dead leader last renewed it, and as the survivor took it: read every 0.1 s
    from the kill until the survivor holds it (the dead one can write nothing more)."""
    dead_id, survivor_id = dead.identity(), survivor.identity()
    seen: dict[str, dict[str, Any]] = {}

    def taken() -> bool:
        if not survivor.process.running():
            raise RuntimeError(f"the surviving replica exited{tails(replicas)}")
        spec = read_lease(api_client, *lease)
        if spec.get("holderIdentity") == dead_id:
            seen["dead"] = spec
        elif spec.get("holderIdentity") == survivor_id:
            seen["survivor"] = spec
        return "survivor" in seen

    wait_for(taken, what="the other replica to take the Lease", timeout=TIMINGS.takeover_bound + 30,
             interval=0.1, replicas=replicas)
    assert "dead" in seen, "the Lease was read too late to see the dead leader's last renewal"
    return seen["dead"], seen["survivor"]


def check_takeover(dead: Mapping[str, Any], taken: Mapping[str, Any]) -> float:
    """The takeover time, after checking it: never before the lease expired (the survivor waited
    out a whole lease duration from the last renewal), and within the bound client-go's timings
    give. The Lease changed hands once, with its transitions counted."""
    takeover = seconds(taken["acquireTime"]) - seconds(dead["renewTime"])
    assert TIMINGS.lease_duration <= takeover <= TIMINGS.takeover_bound + ROUND_TRIPS, (takeover, dead, taken)
    assert taken["leaseTransitions"] == dead["leaseTransitions"] + 1, (dead, taken)
    return takeover


def timing_figures(takeover: float) -> str:
    return (f"takeover {takeover:.2f}s from the dead leader's last renewTime to the survivor's acquireTime "
            f"(lease duration {TIMINGS.lease_duration:g}s, renew deadline {TIMINGS.renew_deadline:g}s, retry period "
            f"{TIMINGS.retry_period:g}s; bound {TIMINGS.takeover_bound:.2f}s + {ROUND_TRIPS:g}s of round trips)")


def make_node(core: Any, name: str, *, labels: Mapping[str, str], taints: list[dict[str, str]] | None = None,
              cordoned: bool = False) -> None:
    """A node as its kubelet would register it: Ready, with capacity. With ``taints``, they replace
    the not-ready taint the TaintNodesByCondition admission plugin gives a new node (no node
    lifecycle controller runs here to lift it)."""
    raw_json(core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}},
                              _preload_content=False))
    if taints is not None:
        raw_json(core.patch_node(name, {"spec": {"taints": taints, "unschedulable": cordoned}},
                                 _content_type=MERGE_PATCH, _preload_content=False))
    resources = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110"}
    now = now_rfc3339()
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "faults: no kubelet behind it",
             "lastHeartbeatTime": now, "lastTransitionTime": now}
    raw_json(core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": dict(resources),
                                                      "conditions": [ready]}},
                                    _content_type=MERGE_PATCH, _preload_content=False))


# --- spot-controller ----------------------------------------------------------------------------------

APP = "web"
REPLICAS = 6
SPOT_ITN = "aws-node-termination-handler/spot-itn"
CAPACITY_LABEL = "node.kubernetes.io/capacity"  # the generic provider's (the controller's default)
DRAIN_TIMEOUT = 120
SAMPLE_EVERY = 0.2


class SpotDrain:
    """A spot node with six replicas under a budget, an on-demand node, and their kubelets."""

    def __init__(self, cluster: Cluster, control_plane: ControlPlane, workdir: Path) -> None:
        self.cluster = cluster
        self.core: Any = cluster.core
        self.control_plane = control_plane
        self.workdir = workdir
        self.id = f"writers-{uuid.uuid4().hex[:6]}"
        self.namespace = cluster.create_namespace(labels={ANNOTATION_SKIP: "true", SCENARIO_LABEL: self.id})
        self.spot, self.on_demand = f"faults-{self.id}-spot", f"faults-{self.id}-od"
        self.lease = (self.namespace, "spot-controller")
        # policy/v1 came in 1.21; v1.20 serves policy/v1beta1 only.
        self.pdb_group, self.pdb_version = ("policy", "v1" if control_plane.server_version() >= (1, 21) else "v1beta1")
        self.kubelets = Kubelets(control_plane, self.namespace, (self.spot, self.on_demand), app=APP,
                                 interval=SAMPLE_EVERY)
        self.replicas: list[Replica] = []
        self.nodes: list[str] = []

    @property
    def taint(self) -> dict[str, str]:
        """The scenario's own taint, tolerated by its Deployment only: no other pod lands here."""
        return {"key": SCENARIO_LABEL, "value": self.id, "effect": "NoSchedule"}

    def set_up(self) -> list[str]:
        """The six replicas Ready on the spot node, the budget allowing one disruption, and the
        on-demand node open; the names of the six pods."""
        for name, capacity in ((self.spot, "spot"), (self.on_demand, "on-demand")):
            labels = {"kubernetes.io/hostname": name, CAPACITY_LABEL: capacity, SCENARIO_LABEL: self.id}
            make_node(self.core, name, labels=labels, taints=[self.taint], cordoned=name == self.on_demand)
            self.nodes.append(name)
        self.kubelets.start()
        self.cluster.objects.create_namespaced_custom_object(self.pdb_group, self.pdb_version, self.namespace,
                                                             "poddisruptionbudgets", self.budget())
        self.cluster.objects.create_namespaced_custom_object("apps", "v1", self.namespace, "deployments",
                                                             self.deployment())
        wait_for(lambda: len(self.ready_on(self.spot)) == REPLICAS, what=f"{REPLICAS} Ready pods on the spot node")
        wait_for(lambda: self.budget_status().get("disruptionsAllowed") == 1
                 and self.budget_status().get("currentHealthy") == REPLICAS,
                 what="the disruption controller to allow one disruption")
        raw_json(self.core.patch_node(self.on_demand, {"spec": {"unschedulable": False}}, _content_type=MERGE_PATCH,
                                      _preload_content=False))
        return sorted(p["metadata"]["name"] for p in self.ready_on(self.spot))

    def deployment(self) -> dict[str, Any]:
        labels = {"app": APP}
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": SCENARIO_LABEL, "operator": "In", "values": [self.id]}]}]}}}
        toleration = {"key": SCENARIO_LABEL, "operator": "Equal", "value": self.id, "effect": "NoSchedule"}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": APP, "namespace": self.namespace},
                "spec": {"replicas": REPLICAS, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"affinity": affinity, "tolerations": [toleration],
                                               "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                                                               "resources": {"requests": {"cpu": "100m"}}}]}}}}

    def budget(self) -> dict[str, Any]:
        return {"apiVersion": f"{self.pdb_group}/{self.pdb_version}", "kind": "PodDisruptionBudget",
                "metadata": {"name": APP, "namespace": self.namespace},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": APP}}}}

    def start_replicas(self) -> list[Replica]:
        self.replicas = start_replicas(self.control_plane, self.workdir, "spot-controller", lease=self.lease,
                                       timings=TIMINGS, args=[f"--drain-timeout={DRAIN_TIMEOUT}"])
        return self.replicas

    def reclaim(self) -> None:
        """aws-node-termination-handler's taint on a spot interruption notice, beside the scenario's."""
        spot_itn = {"key": SPOT_ITN, "value": "spot-interruption", "effect": "NoSchedule"}
        raw_json(self.core.patch_node(self.spot, {"spec": {"taints": [self.taint, spot_itn]}},
                                      _content_type=MERGE_PATCH, _preload_content=False))

    # -- reads --
    def pods(self) -> list[dict[str, Any]]:
        listed = raw_json(self.core.list_namespaced_pod(self.namespace, label_selector=f"app={APP}",
                                                        _preload_content=False))
        return list(listed.get("items") or ())

    def ready_on(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.pods() if is_ready(p) and p["spec"].get("nodeName") == node]

    def budget_status(self) -> dict[str, Any]:
        pdb = self.cluster.objects.get_namespaced_custom_object(self.pdb_group, self.pdb_version, self.namespace,
                                                                "poddisruptionbudgets", APP)
        return dict(pdb.get("status") or {})

    def state(self) -> str:
        """The pods (name, node, Ready, terminating) and the budget's status, for a failure's message."""
        pods = [(p["metadata"]["name"], p["spec"].get("nodeName"), is_ready(p), bool(p["metadata"].get("deletionTimestamp")))
                for p in self.pods()]
        return f"pods {pods}; budget {self.budget_status()}"

    def annotations(self) -> dict[str, str]:
        node = raw_json(self.core.read_node(self.spot, _preload_content=False))
        return dict(node["metadata"].get("annotations") or {})

    def replaced(self, original: list[str]) -> bool:
        """None of the original pods is left, and six Ready replacements run."""
        if self.kubelets.errors:
            raise RuntimeError(f"the kubelets failed: {self.kubelets.errors[-3:]}")
        pods = self.pods()
        return not {p["metadata"]["name"] for p in pods} & set(original) \
            and len([p for p in pods if is_ready(p)]) == REPLICAS == len(pods)

    def tear_down(self) -> None:
        for replica in self.replicas:
            replica.process.stop()
        tear_down(self.core, self.cluster.objects, namespace=self.namespace, app=APP,
                  budget=(self.pdb_group, self.pdb_version), kubelets=self.kubelets, nodes=self.nodes)


@pytest.fixture
def spot_drain(cluster: Cluster, control_plane: ControlPlane, scheduler: Scheduler,
               controller_manager: ControllerManager, tmp_path: Path) -> Iterator[SpotDrain]:
    world = SpotDrain(cluster, control_plane, tmp_path)
    try:
        yield world
    finally:
        world.tear_down()


def kill_after_first_eviction(world: SpotDrain, audit: AuditTail, leader: Replica) -> int:
    """SIGKILL the leader once the API server has carried out its first Eviction, then wait for
    the API server to answer every other Eviction it had sent: one carries on without its sender
    up to the pod's delete, so the budget must have no room until then. How many were still in
    the API server's hands at the kill."""

    def first_eviction() -> bool:
        audit.read()
        return sum(evicted(by(audit.events, leader.user), world.namespace).values()) > 0

    wait_for(first_eviction, what="the leader's first eviction", replicas=world.replicas)
    leader.kill()
    left_behind = len(unanswered(by(audit.events, leader.user)))

    def answered_all() -> bool:
        audit.read()
        return not unanswered(by(audit.events, leader.user))

    wait_for(answered_all, what="the API server to answer the dead leader's Evictions", timeout=30)
    return left_behind


def drain_deadline(replica: Replica, *, resumed: bool) -> float:
    """The deadline the replica said it drains the node to (its "draining node" log line)."""
    lines = [line for line in replica.logged("draining node") if line.get("resumed") is resumed]
    assert len(lines) == 1, (replica.process.name, lines, replica.process.tail())
    return float(lines[0]["deadline"])


@pytest.mark.slow
def test_a_spot_controller_killed_after_its_first_eviction_is_followed_by_the_other_on_the_same_deadline(
        spot_drain: SpotDrain, control_plane: ControlPlane, api_client: Any) -> None:
    world = spot_drain
    original = world.set_up()
    replicas = world.start_replicas()
    leader, survivor = leader_and_other(api_client, world.lease, replicas)
    audit = AuditTail(control_plane.audit_log)

    world.kubelets.hold.set()  # no replacement starts: the budget refuses the leader a second eviction
    world.kubelets.recording.set()
    world.reclaim()
    left_behind = kill_after_first_eviction(world, audit, leader)
    began = world.annotations()[DRAIN_STARTED]  # what the dead leader wrote when it cordoned the node
    world.kubelets.hold.clear()
    dead, taken = follow_takeover(api_client, world.lease, leader, survivor, replicas)
    wait_for(lambda: world.replaced(original), what="the other five pods to be evicted and replaced",
             interval=0.25, replicas=replicas, state=world.state)
    world.kubelets.recording.clear()
    audit_shows(audit, lambda events: set(evicted(events, world.namespace)) >= set(original), what="every eviction")
    events = audit.events

    takeover = check_takeover(dead, taken)
    # The same drain, to the same deadline: the survivor read the start the dead leader wrote.
    deadline = drain_deadline(leader, resumed=False)
    assert drain_deadline(survivor, resumed=True) == deadline == seconds(began) + DRAIN_TIMEOUT
    assert world.annotations()[DRAIN_STARTED] == began and world.annotations()[CORDONED_BY] == "spot-controller"
    assert node_patches(by(events, survivor.user), [world.spot]) == [], "the survivor rewrote the drain's state"
    # One at a time: never fewer than five of the six Ready, sampled every 0.2 s.
    samples = list(world.kubelets.samples)
    assert any(name in s.ready for s in samples for name in original), "sampling began after the drain"
    assert fewest_ready(samples) >= REPLICAS - 1, [s for s in samples if len(s.ready) < REPLICAS - 1][:5]
    # Each pod evicted once, the first by the dead leader, the others by the survivor.
    per_pod = evicted(events, world.namespace)
    assert per_pod == Counter({name: 1 for name in original}), per_pod
    by_leader = evicted(by(events, leader.user), world.namespace)
    assert sum(by_leader.values()) == 1 and sum(evicted(by(events, survivor.user), world.namespace).values()) == 5
    # Nothing deleted but through the Eviction API: the replicas touched pods only by Evictions,
    # and the only pod deletes are the kubelets' (the admin) finishing pods already evicted.
    touched = [e for e in by(events, *USERS) if ref(e).get("resource") == "pods"]
    assert all(e["verb"] == "create" and ref(e).get("subresource") == "eviction" for e in touched), touched
    deletes = pod_deletes(events, world.namespace)
    assert {user(e) for e in deletes} <= {ADMIN}, deletes
    assert {ref(e)["name"] for e in deletes} <= set(original), deletes
    assert survivor.process.running(), tails(replicas)

    first_ask = min(at(e) for e in evictions(by(events, survivor.user), world.namespace)) - seconds(dead["renewTime"])
    refused = sum(1 for e in evictions(events, world.namespace) if code(e) == 429)
    figure(f"[faults] spot-controller SIGKILLed after its first eviction: {timing_figures(takeover)}")
    figure(f"[faults]   the survivor's first eviction {first_ask:.2f}s after that renewal; deadline {utc(deadline)} "
           f"(drain-started {began} + {DRAIN_TIMEOUT}s) for both replicas")
    figure(f"[faults]   fewest Ready {fewest_ready(samples)} of {REPLICAS} over {len(samples)} samples every "
           f"{SAMPLE_EVERY}s; evictions per pod {sorted(per_pod.values())} (dead leader {sum(by_leader.values())}, "
           f"survivor {len(original) - sum(by_leader.values())}), refused {refused}; the dead leader's evictions "
           f"still in the API server at its death: {left_behind}")


# --- label-nodes ------------------------------------------------------------------------------------

NODES = 16
RATE = 4.0  # label writes a second: a pass over the sixteen nodes takes four seconds
KILL_AFTER = 4  # nodes the leader has written when it is killed
LOOK_EVERY = 0.1


def own(node: Mapping[str, Any]) -> dict[str, str]:
    """The labeler's labels on ``node``."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in labels.items() if k in LABELS}


def label_nodes(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", "label-nodes", f"--kubeconfig={kubeconfig}", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)


def computed(kubeconfig: Path, nodes: Iterable[str]) -> tuple[dict[str, dict[str, str]], set[str]]:
    """What a fresh pass computes for ``nodes`` (``label-nodes --dry-run``'s COMPUTED column),
    and the nodes it would write (CHANGE says ``write``)."""
    done = label_nodes(kubeconfig, "--dry-run")
    assert done.returncode == 0, done.stderr
    wanted = set(nodes)
    found: dict[str, dict[str, str]] = {}
    writing: set[str] = set()
    for row in (line.split() for line in done.stdout.splitlines()[1:]):
        if row and row[0] in wanted:
            assert len(row) >= 4 and row[1] != "-", row  # never "left out"
            found.setdefault(row[0], {})[f"{PREFIX}{row[1]}"] = row[3]
            if row[4:] == ["write"]:
                writing.add(row[0])
    return found, writing


class Looker(threading.Thread):
    """Reads the labeler's labels of the nodes labelled ``selector`` every ``LOOK_EVERY`` s."""

    def __init__(self, control_plane: ControlPlane, selector: str) -> None:
        super().__init__(name="label-looker", daemon=True)
        from kubernetes import client

        self.api_client = control_plane.api_client()
        self.core: Any = client.CoreV1Api(self.api_client)
        self.selector = selector
        self.looks: list[dict[str, dict[str, str]]] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def look(self) -> dict[str, dict[str, str]]:
        listed = raw_json(self.core.list_node(label_selector=self.selector, _preload_content=False))
        return {n["metadata"]["name"]: own(n) for n in listed.get("items") or ()}

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.looks.append(self.look())
            except Exception as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self.halt.wait(LOOK_EVERY)

    def stop(self) -> None:
        self.halt.set()
        if self.ident is not None:
            self.join(10)
        self.api_client.close()


class Labelled:
    """Sixteen nodes of this test's own, a namespace for their pods and the Lease."""

    def __init__(self, cluster: Cluster, control_plane: ControlPlane, workdir: Path) -> None:
        self.core: Any = cluster.core
        self.control_plane = control_plane
        self.workdir = workdir
        self.id = f"writers-{uuid.uuid4().hex[:6]}"
        self.namespace = cluster.create_namespace(labels={ANNOTATION_SKIP: "true"})
        self.lease = (self.namespace, "label-nodes")
        self.selector = f"{SCENARIO_LABEL}={self.id}"
        self.nodes = [f"faults-{self.id}-{i:02d}" for i in range(NODES)]
        self.looker = Looker(control_plane, self.selector)
        self.replicas: list[Replica] = []
        self.admin = control_plane.write_kubeconfig(workdir / "admin.kubeconfig")

    def set_up(self) -> None:
        for name in self.nodes:  # the not-ready taint stays: nothing is scheduled here
            make_node(self.core, name, labels={SCENARIO_LABEL: self.id})

    def bind(self) -> None:
        """A pod on each node, bound by name (no scheduler needed): every node's labels are to move."""
        for i, name in enumerate(self.nodes):
            requests = {"cpu": f"{500 + 100 * i}m", "memory": f"{512 + 64 * i}Mi"}
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"held-{i:02d}", "namespace": self.namespace},
                   "spec": {"nodeName": name, "tolerations": [{"operator": "Exists"}],
                            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                            "resources": {"requests": requests}}]}}
            raw_json(self.core.create_namespaced_pod(self.namespace, pod, _preload_content=False))

    def labels(self) -> dict[str, dict[str, str]]:
        return self.looker.look()

    def tear_down(self) -> None:
        for replica in self.replicas:
            replica.process.stop()
        self.looker.stop()
        quietly(lambda: raw_json(self.core.delete_collection_namespaced_pod(
            self.namespace, grace_period_seconds=0, _preload_content=False)))
        for name in self.nodes:
            quietly(lambda name=name: raw_json(self.core.delete_node(name, _preload_content=False)))  # type: ignore[misc]


@pytest.fixture
def labelled(cluster: Cluster, control_plane: ControlPlane, tmp_path: Path) -> Iterator[Labelled]:
    world = Labelled(cluster, control_plane, tmp_path)
    try:
        yield world
    finally:
        world.tear_down()


@pytest.mark.slow
def test_label_nodes_killed_mid_pass_leaves_no_node_half_labelled_and_the_other_finishes_the_pass(
        labelled: Labelled, control_plane: ControlPlane, api_client: Any) -> None:
    world = labelled
    world.set_up()
    first = label_nodes(world.admin, "--once")
    assert first.returncode == 0, first.stderr
    before = world.labels()
    assert set(before) == set(world.nodes) and all(len(labels) == len(LABELS) for labels in before.values()), before
    world.bind()
    after, writing = computed(world.admin, world.nodes)
    assert writing == set(world.nodes)
    moving = {name: {k for k in LABELS if before[name][k] != after[name][k]} for name in world.nodes}
    assert all(len(keys) >= 2 for keys in moving.values()), moving  # so that half of them would show

    world.replicas = start_replicas(control_plane, world.workdir, "label-nodes", lease=world.lease, timings=TIMINGS,
                                    args=[f"--rate={RATE:g}", "--interval=3600"])
    world.looker.start()
    leader, survivor = leader_and_other(api_client, world.lease, world.replicas)
    audit = AuditTail(control_plane.audit_log)

    def written_some() -> bool:
        audit.read()
        return len(node_patches(by(audit.events, leader.user), world.nodes)) >= KILL_AFTER

    wait_for(written_some, what=f"the leader to label {KILL_AFTER} nodes", replicas=world.replicas)
    leader.kill()
    at_death = world.labels()
    dead, taken = follow_takeover(api_client, world.lease, leader, survivor, world.replicas)
    wait_for(lambda: world.labels() == after, what="every node to carry its new labels", replicas=world.replicas)
    world.looker.stop()
    audit_shows(audit, lambda events: {ref(p)["name"] for p in node_patches(by(events, *USERS), world.nodes)}
                >= set(world.nodes), what="every node's write")

    takeover = check_takeover(dead, taken)
    # Converged: a fresh pass computes what the nodes carry, and would write nothing.
    assert computed(world.admin, world.nodes) == (after, set()) and world.labels() == after
    # Never half: every look at every node saw all its old labels or all its new ones.
    looks = [*world.looker.looks, at_death]
    assert not world.looker.errors, world.looker.errors
    half = [(name, labels) for look in looks for name, labels in look.items() if labels not in (before[name], after[name])]
    assert half == [], half[:5]
    # Each node written once, in one patch carrying exactly the labels that moved, by one replica or the other.
    patches = node_patches(by(audit.events, *USERS), world.nodes)
    per_node = Counter(str(ref(p)["name"]) for p in patches)
    assert per_node == Counter({name: 1 for name in world.nodes}), \
        [(ref(p)["name"], user(p), p["requestReceivedTimestamp"], p["requestObject"]) for p in patches
         if per_node[ref(p)["name"]] != 1]
    for patch in patches:
        name = str(ref(patch)["name"])
        assert patch["requestObject"] == {"metadata": {"labels": {k: after[name][k] for k in moving[name]}}}, patch
    by_dead = len(node_patches(by(audit.events, leader.user), world.nodes))
    assert KILL_AFTER <= by_dead < NODES, "killed mid-pass"
    assert survivor.process.running(), tails(world.replicas)

    first_write = min(at(p) for p in node_patches(by(audit.events, survivor.user), world.nodes))
    figure(f"[faults] label-nodes SIGKILLed mid-pass: {timing_figures(takeover)}")
    figure(f"[faults]   the survivor's first label write {first_write - seconds(dead['renewTime']):.2f}s after that "
           f"renewal; nodes written by the dead leader {by_dead}, by the survivor {NODES - by_dead}, of {NODES} at "
           f"{RATE:g} writes/s; {len(looks)} looks every {LOOK_EVERY}s at every node, none half-labelled")
