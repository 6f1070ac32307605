"""``explain`` held against the real kube-scheduler (issue 17, item 7).

With ``kube-scheduler`` in KUBEBUILDER_ASSETS next to etcd and kube-apiserver, each scenario below
gets a namespace, Nodes of its own (no kubelet behind them: their status is written through the
API) and maybe pods already bound to them. Then each workload's pods are created one by one, as
the bare Pods its controller would create (no controller-manager runs here), and each is left to
the scheduler until it is bound or marked ``PodScheduled=False`` (``Unschedulable``) before the
next is created. ``placement-webhook explain`` runs as a user runs it: on the workload and a dump
of the cluster taken before its pods were created (the scenario's Nodes, the namespace's Pods and
the Namespace, the PriorityClasses; ``kubectl get -o yaml``'s form). Both sides are held against
the outcome the scenario's reasoning gives, so a failure says which side disagrees; the Pending
replicas must be the same ones, and where the answer is unique the nodes (or zones) too.

Isolation: Nodes are cluster-scoped and the scheduler sees every test's, so each scenario's
Nodes carry ``SCENARIO_LABEL: <unique id>`` and its pods select that label. The real
scheduler's message counts every Node of the cluster, so the dump holds every Node (as
``kubectl get nodes`` does) and the scenario namespace's Pods.

Messages: explain runs with the API server's version, learnt from it (``--kubeconfig``, GET
/version) and given (``--kubernetes-version`` with the dump), and each Pending replica's
message must be the real scheduler's, word for word and count for count. The reasons each
scenario expects are written out per release below (``WORDS``: v1.20.2's from its plugins'
source), and both sides must name exactly those, besides the node affinity reason of Nodes
outside the scenario.

Determinism: a pod is created only once the one before it is settled, and each scenario is built
so that its outcome does not depend on the scores (which feasible node a replica gets) and a
Pending replica stays Pending whatever the later ones do. The scheduler's cache lags behind the
API server, so before the first workload a probe pod per node (tolerating every taint, requesting
nothing, matched by no selector) must be bound there: each node's status is written last, so a
bound probe means the scheduler has seen the node as set up, and the pods created before it.

The offline tests at the end run everywhere: the same scenarios through the same command and dump
form without an API server (the expected outcomes hold for ``explain``), and the helpers.
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit.envtest import (
    ROOT,
    SCHEDULER,
    ControlPlane,
    Scheduler,
    binary_version,
    find_scheduler,
    scheduler_skip_reason,
    wait_until,
)
from tests.kit.envtest import quietly as _quietly
from tests.kit.envtest import raw_json as _json
from tests.kit.envtest import unschedulable as _unschedulable
from webhook import ANNOTATION_SKIP

SCENARIO_LABEL = "e2e.novasphere.dev/scenario"
PROBE_LABEL = "e2e.novasphere.dev/probe"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
IMAGE = "registry.k8s.io/pause:3.9"
MERGE_PATCH = "application/merge-patch+json"
SETTLE = 60.0  # seconds for the scheduler to bind a pod or mark it Unschedulable
# A probe may first be found Unschedulable on a stale cache; it is tried again on the node's
# update event, at the latest when the scheduler flushes its unschedulable pods (60 s).
PROBE_SETTLE = 120.0
TAINT = {"key": "e2e.novasphere.dev/dedicated", "value": "special", "effect": "NoSchedule"}
TOLERATION = {"key": "e2e.novasphere.dev/dedicated", "operator": "Equal", "value": "special", "effect": "NoSchedule"}
CORDON_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
Version = tuple[int, int]
NEWEST: Version = (1, 1 << 30)  # no version known: the newest release's words

# Each reason a scenario expects, in the exact words of each release from the one given on:
# v1.20.2's plugins (taint_toleration.go, node_affinity.go, interpodaffinity/filtering.go, ...)
# and the releases that reworded them since (kubernetes#97521 in v1.21, #102518 in v1.22,
# #109119 in v1.25, #134740 in v1.35 and v1.34.2, a 1.34 without its patch read as its newest).
WORDS: dict[str, tuple[tuple[Version, tuple[str, ...]], ...]] = {
    "anti-affinity": (((1, 0), ("node(s) didn't match pod affinity/anti-affinity",
                                "node(s) didn't match pod anti-affinity rules")),
                      ((1, 22), ("node(s) didn't match pod anti-affinity rules",))),
    "existing anti-affinity": (((1, 0), ("node(s) didn't match pod affinity/anti-affinity",
                                         "node(s) didn't satisfy existing pods anti-affinity rules")),
                               ((1, 22), ("node(s) didn't satisfy existing pods anti-affinity rules",))),
    "taint": (((1, 0), ("node(s) had taint {e2e.novasphere.dev/dedicated: special}, that the pod didn't tolerate",)),
              ((1, 25), ("node(s) had untolerated taint {e2e.novasphere.dev/dedicated: special}",)),
              ((1, 34), ("node(s) had untolerated taint(s)",))),
    "node affinity": (((1, 0), ("node(s) didn't match Pod's node affinity",)),
                      ((1, 21), ("node(s) didn't match Pod's node affinity/selector",))),
    "cpu": (((1, 0), ("Insufficient cpu",)),),
    "spread": (((1, 0), ("node(s) didn't match pod topology spread constraints",)),),
    "cordon": (((1, 0), ("node(s) were unschedulable",)),),
}
PREEMPTION_PART_SINCE: Version = (1, 24)  # kubernetes#107775: "... preemption: ..." ends the message


def words(reason: str, version: Version) -> tuple[str, ...]:
    """The exact reason strings ``reason`` stands for in ``version``'s messages."""
    return next(said for since, said in reversed(WORDS[reason]) if version >= since)


def histogram(message: str) -> dict[str, int]:
    """A FitError message's "<count> <reason>" entries (before any "preemption: ..." part).
    Reasons may hold ", " themselves (v1.20's taint reason does), never ", <digit>"."""
    head = message.split(": ", 1)[1] if ": " in message else ""
    head = head.split(". preemption: ", 1)[0].removesuffix(".")
    found: dict[str, int] = {}
    for entry in re.split(r", (?=\d+ )", head) if head else ():
        count, _, reason = entry.partition(" ")
        found[reason] = int(count) if count.isdigit() else -1
    return found


# --- the scenarios --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Names:
    """A scenario's names in one run: the scenario label's value (unique) and its namespace."""

    scenario: str
    namespace: str

    def node(self, suffix: str) -> str:
        return f"e2e-{self.scenario}-{suffix}"

    def suffix(self, node: str | None) -> str | None:
        """The scenario's own name for a node (``n1``); any other node keeps its full name."""
        prefix = f"e2e-{self.scenario}-"
        return node[len(prefix):] if node and node.startswith(prefix) else node


@dataclass(frozen=True)
class NodeSpec:
    suffix: str
    zone: str = "zone-a"
    cpu: str = "4"
    taints: tuple[Mapping[str, str], ...] = ()
    cordoned: bool = False

    def labels(self, names: Names) -> dict[str, str]:
        return {HOSTNAME: names.node(self.suffix), ZONE: self.zone, SCENARIO_LABEL: names.scenario}

    def spec(self) -> dict[str, Any]:
        return {"taints": [dict(t) for t in self.taints], "unschedulable": self.cordoned}

    def status(self) -> dict[str, Any]:
        resources = {"cpu": self.cpu, "memory": "8Gi", "pods": "110"}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e: no kubelet behind it",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
        return {"capacity": resources, "allocatable": dict(resources), "conditions": [ready]}

    def obj(self, names: Names) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": names.node(self.suffix), "labels": self.labels(names)},
                "spec": self.spec(), "status": self.status()}


def container(cpu: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "main", "image": IMAGE}
    if cpu is not None:
        out["resources"] = {"requests": {"cpu": cpu}}
    return out


def repel(app: str) -> dict[str, Any]:
    """Required anti-affinity: no two pods labelled ``app: <app>`` on one node."""
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}]}}


def pod_spec(names: Names, *, cpu: str | None = None, host: str | None = None,
             tolerations: tuple[Mapping[str, str], ...] = (), anti: str | None = None,
             spread: str | None = None) -> dict[str, Any]:
    """A workload's pod spec: it selects the scenario's nodes (``host``: one of them)."""
    selector = {SCENARIO_LABEL: names.scenario}
    if host is not None:
        selector[HOSTNAME] = names.node(host)
    spec: dict[str, Any] = {"nodeSelector": selector, "containers": [container(cpu)]}
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if anti is not None:
        spec["affinity"] = repel(anti)
    if spread is not None:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": spread}}}]
    return spec


@dataclass(frozen=True)
class Bound:
    """A pod already running: created with ``spec.nodeName``, which the scheduler leaves alone."""

    name: str
    node: str
    cpu: str | None = None
    anti: str | None = None

    def obj(self, names: Names) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeName": names.node(self.node), "containers": [container(self.cpu)]}
        if self.anti is not None:
            spec["affinity"] = repel(self.anti)
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": self.name, "namespace": names.namespace, "labels": {"app": self.name}},
                "spec": spec}


@dataclass(frozen=True)
class Step:
    """One workload: its kind, name (also its pods' ``app`` label) and replicas; what the
    reasoning says: how many place (the first ones: every scenario only ever fills up), the
    scenario's nodes (or zones) they take when that is unique, and the reasons (``WORDS``) a
    Pending replica's message names on both sides, and no others."""

    kind: str
    name: str
    replicas: int
    placed: int
    spec: Callable[[Names], dict[str, Any]]
    nodes: tuple[str, ...] | None = None
    zones: Mapping[str, int] | None = None
    reasons: tuple[str, ...] = ()

    @property
    def labels(self) -> dict[str, str]:
        return {"app": self.name}

    def workload(self, names: Names) -> dict[str, Any]:
        """The object given to ``explain`` (a Pod's count goes with ``--replicas``)."""
        meta = {"name": self.name, "namespace": names.namespace}
        if self.kind == "Pod":
            return {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, "labels": self.labels},
                    "spec": self.spec(names)}
        return {"apiVersion": "apps/v1", "kind": self.kind, "metadata": meta,
                "spec": {"replicas": self.replicas, "selector": {"matchLabels": self.labels},
                         "template": {"metadata": {"labels": self.labels}, "spec": self.spec(names)}}}

    def pods(self, names: Names) -> list[dict[str, Any]]:
        """The bare Pods its controller would create, in order: ``<name>-<index>``."""
        return [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"{self.name}-{i}", "namespace": names.namespace, "labels": self.labels},
                 "spec": self.spec(names)} for i in range(self.replicas)]

    @property
    def cli_replicas(self) -> int | None:
        return self.replicas if self.kind == "Pod" else None


@dataclass(frozen=True)
class Scenario:
    id: str
    why: str
    nodes: tuple[NodeSpec, ...]
    steps: tuple[Step, ...]
    bound: tuple[Bound, ...] = ()

    def zones(self) -> dict[str, str]:
        return {n.suffix: n.zone for n in self.nodes}


SCENARIOS = (
    Scenario(
        "anti",
        "Required hostname anti-affinity against its own pods: one replica per node. Three nodes "
        "take replicas 0-2, whichever node each picks; replicas 3 and 4 find every node taken.",
        nodes=(NodeSpec("n1"), NodeSpec("n2"), NodeSpec("n3")),
        steps=(Step("Deployment", "web", 5, placed=3, spec=lambda n: pod_spec(n, anti="web"),
                    nodes=("n1", "n2", "n3"), reasons=("anti-affinity",)),),
    ),
    Scenario(
        "taint",
        "A nodeSelector for the only tainted node (NoSchedule): without the toleration no "
        "replica places (the other node fails the selector); with it the one replica goes there.",
        nodes=(NodeSpec("t1", taints=(TAINT,)), NodeSpec("t2")),
        steps=(
            Step("Pod", "plain", 2, placed=0, spec=lambda n: pod_spec(n, host="t1"), nodes=(),
                 reasons=("taint", "node affinity")),
            Step("Pod", "tolerant", 1, placed=1, spec=lambda n: pod_spec(n, host="t1", tolerations=(TOLERATION,)),
                 nodes=("t1",)),
        ),
    ),
    Scenario(
        "fit",
        "NodeResourcesFit: 2 CPUs, 400m taken by a running pod, 800m per replica. Two replicas "
        "fill the node exactly (400m + 2 x 800m = 2000m: fitting is <=); the third needs 800m more.",
        nodes=(NodeSpec("n1", cpu="2"),),
        bound=(Bound("existing", "n1", cpu="400m"),),
        steps=(Step("ReplicaSet", "batch", 3, placed=2, spec=lambda n: pod_spec(n, cpu="800m"),
                    nodes=("n1", "n1"), reasons=("cpu",)),),
    ),
    Scenario(
        "spread",
        "PodTopologySpread maxSkew 1 over zones, DoNotSchedule: zone-a has two roomy nodes, zone-b "
        "one node with room for one 800m replica. Whichever zone replica 0 takes, zone-b ends with "
        "one replica and zone-a with two (a third in zone-a would make the skew 3 - 1 = 2); "
        "replicas 3 and 4 stay Pending: zone-a by the skew, zone-b by CPU.",
        nodes=(NodeSpec("a1", zone="zone-a"), NodeSpec("a2", zone="zone-a"), NodeSpec("b1", zone="zone-b", cpu="1")),
        steps=(Step("Deployment", "spread", 5, placed=3, spec=lambda n: pod_spec(n, cpu="800m", spread="spread"),
                    zones={"zone-a": 2, "zone-b": 1}, reasons=("spread", "cpu")),),
    ),
    Scenario(
        "guard",
        "PodTopologySpread maxSkew 1 over zones, DoNotSchedule, where zone-b's only node runs a pod "
        "whose required anti-affinity repels the workload. Zone-b still counts as a domain (it "
        "matches the pod's nodeSelector), with 0 replicas forever: replica 0 goes to zone-a, a "
        "second there would make the skew 2, so replicas 1 and 2 stay Pending.",
        nodes=(NodeSpec("a1", zone="zone-a"), NodeSpec("a2", zone="zone-a"), NodeSpec("b1", zone="zone-b")),
        bound=(Bound("guard", "b1", anti="spread"),),
        steps=(Step("Deployment", "spread", 3, placed=1, spec=lambda n: pod_spec(n, spread="spread"),
                    zones={"zone-a": 1}, reasons=("spread", "existing anti-affinity")),),
    ),
    Scenario(
        "cordon",
        "A cordoned node (spec.unschedulable) and required hostname anti-affinity: replica 0 can "
        "only go to the other node, replica 1 nowhere. A pod tolerating the unschedulable taint "
        "and selecting the cordoned node is placed there (NodeUnschedulable reads the toleration).",
        nodes=(NodeSpec("c1", cordoned=True), NodeSpec("c2")),
        steps=(
            Step("Pod", "ha", 2, placed=1, spec=lambda n: pod_spec(n, anti="ha"), nodes=("c2",),
                 reasons=("cordon", "anti-affinity")),
            Step("Pod", "maint", 1, placed=1, spec=lambda n: pod_spec(n, host="c1", tolerations=(CORDON_TOLERATION,)),
                 nodes=("c1",)),
        ),
    ),
)


# --- outcomes and what they should be -------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """Per replica index the scenario's node it landed on (None: Pending), and the messages of
    the Pending ones."""

    nodes: tuple[str | None, ...]
    messages: Mapping[int, str] = field(default_factory=dict)

    @property
    def pending(self) -> frozenset[int]:
        return frozenset(i for i, node in enumerate(self.nodes) if node is None)

    def __str__(self) -> str:
        rows = [f"{i}: {node}" if node is not None else f"{i}: Pending ({self.messages.get(i, '')})"
                for i, node in enumerate(self.nodes)]
        return "; ".join(rows)


def problems(step: Step, got: Outcome, zones: Mapping[str, str], version: Version = NEWEST) -> list[str]:
    """How ``got`` differs from what the reasoning says of ``step`` in ``version``'s words
    (empty: it does not)."""
    out: list[str] = []
    if len(got.nodes) != step.replicas:
        out.append(f"{len(got.nodes)} replica(s), expected {step.replicas}")
    want = frozenset(range(step.placed, step.replicas))
    if got.pending != want:
        out.append(f"{len(got.nodes) - len(got.pending)} placed and Pending replicas {sorted(got.pending)}; expected "
                   f"{step.placed} placed and Pending replicas {sorted(want)}")
    taken = sorted(node for node in got.nodes if node is not None)
    if step.nodes is not None and taken != sorted(step.nodes):
        out.append(f"placed on {taken}, expected {sorted(step.nodes)}")
    if step.zones is not None:
        by_zone = dict(Counter(zones.get(node, f"(not a scenario node: {node})") for node in taken))
        if by_zone != dict(step.zones):
            out.append(f"replicas per zone {by_zone}, expected {dict(step.zones)}")
    expected = {said for reason in step.reasons for said in words(reason, version)}
    elsewhere = set(words("node affinity", version))  # Nodes outside the scenario
    for index in sorted(got.pending):
        message = got.messages.get(index, "")
        named = set(histogram(message))
        if expected - named:
            out.append(f"replica {index}'s message names no {sorted(expected - named)}: {message!r}")
        if named - expected - elsewhere:
            out.append(f"replica {index}'s message names {sorted(named - expected - elsewhere)} too: {message!r}")
        if ("preemption: " in message) != (version >= PREEMPTION_PART_SINCE):
            out.append(f"replica {index}'s message {'lacks' if version >= PREEMPTION_PART_SINCE else 'has'} "
                       f"a preemption part: {message!r}")
    return out


def verdict(step: Step, scenario: Scenario, real: Outcome, predicted: Mapping[str, Outcome],
            version: Version = NEWEST) -> list[str]:
    """Both sides against the reasoning and against each other, each line naming its side
    (``predicted``: explain's outcome per way it was run); a Pending replica's message must be
    the real one exactly."""
    lines = [f"kube-scheduler: {p}" for p in problems(step, real, scenario.zones(), version)]
    for how, outcome in predicted.items():
        lines += [f"explain {how}: {p}" for p in problems(step, outcome, scenario.zones(), version)]
        if real.pending != outcome.pending:
            lines.append(f"Pending replicas differ: kube-scheduler {sorted(real.pending)}, explain {how} "
                         f"{sorted(outcome.pending)}")
        for index in sorted(real.pending & outcome.pending):
            if real.messages.get(index) != outcome.messages.get(index):
                lines.append(f"replica {index}'s messages differ:\n  kube-scheduler:  {real.messages.get(index)!r}\n"
                             f"  explain {how}: {outcome.messages.get(index)!r}")
    return lines


def explain_cli(step: Step, names: Names, state: Path, workdir: Path, *, version: Version | None = None,
                kubeconfig: Path | None = None) -> Outcome:
    """``placement-webhook explain`` on the workload and the dump (``version``: given with
    --kubernetes-version), or on the live cluster (``kubeconfig``), as a user runs it."""
    workload = workdir / f"{names.scenario}-{step.name}.yaml"
    workload.write_text(yaml.safe_dump(step.workload(names), sort_keys=False))
    cluster = ["--kubeconfig", str(kubeconfig)] if kubeconfig is not None else ["--cluster-state", str(state)]
    argv = [sys.executable, "-m", "webhook", "explain", "-f", str(workload), "--no-policies", *cluster,
            "--no-suggestions", "-o", "json"]
    if version is not None:
        argv += ["--kubernetes-version", f"{version[0]}.{version[1]}"]
    if step.cli_replicas is not None:
        argv += ["--replicas", str(step.cli_replicas)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_WEBHOOK_")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env, cwd=ROOT)
    if done.returncode not in (0, 1):
        pytest.fail(f"explain exited {done.returncode}:\n{done.stderr}")
    (found,) = json.loads(done.stdout)["workloads"]
    rows = sorted(found["replicas"], key=lambda row: int(row["index"]))
    outcome = Outcome(tuple(names.suffix(row["node"]) for row in rows),
                      {int(row["index"]): str(row.get("message") or "") for row in rows if row["node"] is None})
    # The exit code says the same: 1 when a replica stays Pending.
    assert done.returncode == (1 if outcome.pending else 0), done.stderr
    assert (found["placed"], found["pending"]) == (len(rows) - len(outcome.pending), len(outcome.pending))
    return outcome


def explain_in_process(step: Step, names: Names, objects: list[dict[str, Any]],
                       version: Version | None = None) -> Outcome:
    from webhook.explain.report import explain
    from webhook.explain.state import ClusterState
    from webhook.kube.kinds import BUILTIN
    from webhook.scheduler import Options

    obj = step.workload(names)
    target = BUILTIN.for_object(obj)
    assert target is not None
    found = explain(obj, target, ClusterState.from_objects(objects), namespace=names.namespace,
                    replicas=step.cli_replicas, options=Options.for_version(version), suggestions=False)
    return Outcome(tuple(names.suffix(row.node) for row in found.rows),
                   {row.index: row.message for row in found.rows if row.node is None})


# --- the scenario in a real cluster ----------------------------------------------------------------




def _items(listed: Mapping[str, Any], api_version: str, kind: str) -> list[dict[str, Any]]:
    """A list's items with apiVersion and kind, which the API server leaves off (kubectl adds them)."""
    return [{"apiVersion": api_version, "kind": kind, **item} for item in listed.get("items") or ()]


def write_list(path: Path, items: list[dict[str, Any]]) -> Path:
    """A ``v1 List`` of the objects, in the form ``kubectl get -o yaml`` writes."""
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                    "items": items}, sort_keys=False))
    return path


def _node_of(pod: Mapping[str, Any]) -> str | None:
    return (pod.get("spec") or {}).get("nodeName") or None






class Live:
    """One scenario in the cluster: its namespace and nodes, the pods it makes, its dumps."""

    def __init__(self, cluster: Any, scheduler: Scheduler, scenario: Scenario) -> None:
        self.core = cluster.core
        self.scheduling = cluster.scheduling
        self.scheduler = scheduler
        self.scenario = scenario
        scenario_id = f"{scenario.id}-{uuid.uuid4().hex[:6]}"
        # The skip label keeps the session's webhooks (test_api_server) away from these objects.
        namespace = cluster.create_namespace(labels={ANNOTATION_SKIP: "true", SCENARIO_LABEL: scenario_id})
        self.names = Names(scenario_id, str(namespace))
        self.nodes: list[str] = []
        self.control_plane = scheduler.control_plane
        major, minor = self.control_plane.server_version()
        self.version: Version = (major, minor)  # GET /version, as explain learns it

    def set_up(self) -> None:
        for spec in self.scenario.nodes:
            self._node(spec)
        for pod in self.scenario.bound:
            _json(self.core.create_namespaced_pod(self.names.namespace, pod.obj(self.names), _preload_content=False))
        self._probe()

    def _node(self, spec: NodeSpec) -> None:
        """Create, then write the spec, then the status. The TaintNodesByCondition admission
        plugin gives a new Node the not-ready:NoSchedule taint (no controller lifts it here): the
        spec patch sets the scenario's taints instead. A node's status written last is what the
        probes wait for."""
        name = self.names.node(spec.suffix)
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": spec.labels(self.names)}}
        _json(self.core.create_node(body, _preload_content=False))
        self.nodes.append(name)
        _json(self.core.patch_node(name, {"spec": spec.spec()}, _content_type=MERGE_PATCH, _preload_content=False))
        _json(self.core.patch_node_status(name, {"status": spec.status()}, _content_type=MERGE_PATCH,
                                          _preload_content=False))

    def _probe(self) -> None:
        """Wait until the scheduler's cache holds the nodes as set up (see the module's doc)."""
        for spec in self.scenario.nodes:
            probe = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"probe-{spec.suffix}", "namespace": self.names.namespace,
                                  "labels": {PROBE_LABEL: "true"}},
                     "spec": {"nodeSelector": {HOSTNAME: self.names.node(spec.suffix)},
                              "tolerations": [{"operator": "Exists"}], "containers": [container(None)]}}
            _json(self.core.create_namespaced_pod(self.names.namespace, probe, _preload_content=False))
        for spec in self.scenario.nodes:
            self._settle(f"probe-{spec.suffix}", bound=True, timeout=PROBE_SETTLE)
        _json(self.core.delete_collection_namespaced_pod(self.names.namespace, label_selector=PROBE_LABEL,
                                                         grace_period_seconds=0, _preload_content=False))
        wait_until(lambda: not self._pods(PROBE_LABEL), what="the probe pods to be deleted", timeout=SETTLE)

    def _pods(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        extra = {"label_selector": label_selector} if label_selector else {}
        listed = _json(self.core.list_namespaced_pod(self.names.namespace, _preload_content=False, **extra))
        return _items(listed, "v1", "Pod")

    def _read(self, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = _json(self.core.read_namespaced_pod(name, self.names.namespace, _preload_content=False))
        return pod

    def _settle(self, name: str, *, bound: bool = False, timeout: float = SETTLE) -> dict[str, Any]:
        """The pod once bound, or (unless ``bound``) once marked Unschedulable."""
        seen: dict[str, Any] = {}

        def settled() -> bool:
            if not self.scheduler.running():
                raise RuntimeError(f"kube-scheduler exited; last output:\n{self.scheduler.tail()}")
            seen.clear()
            seen.update(self._read(name))
            return _node_of(seen) is not None or (not bound and _unschedulable(seen) is not None)

        try:
            wait_until(settled, what=f"pod {self.names.namespace}/{name} to be scheduled", timeout=timeout)
        except TimeoutError as exc:
            pytest.fail(f"{exc}; its PodScheduled=False message: {_unschedulable(seen)!r}\n"
                        f"kube-scheduler's last output:\n{self.scheduler.tail()}")
        return seen

    def dump(self, path: Path) -> Path:
        """The cluster state as ``kubectl get nodes,pods,namespaces,priorityclasses -o yaml`` gives it:
        every Node (the scheduler's message counts them all), the scenario namespace's Pods and
        the Namespace."""
        nodes = _json(self.core.list_node(_preload_content=False))
        classes = _json(self.scheduling.list_priority_class(_preload_content=False))
        namespace = _json(self.core.read_namespace(self.names.namespace, _preload_content=False))
        items = [*_items(nodes, "v1", "Node"), *self._pods(),
                 {"apiVersion": "v1", "kind": "Namespace", **namespace},
                 *_items(classes, "scheduling.k8s.io/v1", "PriorityClass")]
        return write_list(path, items)

    def schedule(self, step: Step) -> Outcome:
        """Create the step's pods one at a time, each settled before the next; read them all back."""
        pods = step.pods(self.names)
        for pod in pods:
            _json(self.core.create_namespaced_pod(self.names.namespace, pod, _preload_content=False))
            self._settle(pod["metadata"]["name"])
        final = [self._read(pod["metadata"]["name"]) for pod in pods]
        return Outcome(tuple(self.names.suffix(_node_of(pod)) for pod in final),
                       {i: _unschedulable(pod) or "" for i, pod in enumerate(final) if _node_of(pod) is None})

    def kubeconfig(self, path: Path) -> Path:
        """The admin kubeconfig, for explain to read the live cluster and its version."""
        return self.control_plane.write_kubeconfig(path)

    def tear_down(self) -> None:
        """Pods first (force: no kubelet confirms anything), then the cluster-scoped Nodes. The
        namespace stays, Terminating forever without the namespace controller otherwise."""
        _quietly(lambda: _json(self.core.delete_collection_namespaced_pod(
            self.names.namespace, grace_period_seconds=0, _preload_content=False)))
        for name in self.nodes:
            _quietly(functools.partial(self._delete_node, name))

    def _delete_node(self, name: str) -> None:
        _json(self.core.delete_node(name, _preload_content=False))


@pytest.fixture
def live(request: pytest.FixtureRequest, scheduler: Scheduler, cluster: Any) -> Iterator[Live]:
    """The scenario of the test's ``scenario`` parameter, set up and torn down. ``scheduler``
    comes first: without kube-scheduler the test skips before anything starts."""
    scenario: Scenario = request.param
    world = Live(cluster, scheduler, scenario)
    try:
        world.set_up()
        yield world
    finally:
        world.tear_down()


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("live", SCENARIOS, ids=[s.id for s in SCENARIOS], indirect=True)
def test_explain_predicts_what_the_real_scheduler_does_in_its_words(live: Live, tmp_path: Path) -> None:
    """Before each step's pods exist, explain runs twice in the server's version: on the live
    cluster, learning the version from it, and on a dump given the version; then the real
    scheduler places the pods. Placements and every Pending replica's message must agree."""
    scenario = live.scenario
    kubeconfig = live.kubeconfig(tmp_path / "kubeconfig")
    for number, step in enumerate(scenario.steps):
        state = live.dump(tmp_path / f"state-{number}.yaml")
        predicted = {"--kubeconfig": explain_cli(step, live.names, state, tmp_path, kubeconfig=kubeconfig),
                     "--cluster-state": explain_cli(step, live.names, state, tmp_path, version=live.version)}
        real = live.schedule(step)
        lines = verdict(step, scenario, real, predicted, live.version)
        assert not lines, "\n".join([f"scenario {scenario.id}, {step.kind} {step.name} (Kubernetes "
                                     f"{live.version[0]}.{live.version[1]}): {scenario.why}", *lines,
                                     f"kube-scheduler: {real}", *(f"explain {how}: {o}" for how, o in predicted.items())])


# --- offline: the same scenarios, explain alone; the helpers -----------------------------------------


VERSIONS = [(1, 20), (1, 22), (1, 25), (1, 34), None]


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: "newest" if v is None else f"v{v[0]}.{v[1]}")
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_offline_explain_gives_each_scenario_its_reasoned_outcome_in_each_releases_words(
        scenario: Scenario, version: Version | None, tmp_path: Path) -> None:
    """What the live test expects of explain, through the same command and dump form, with the
    cluster as the scenario builds it: each step's pods join it, bound where explain put them
    (as the scheduler binds them) or Pending; the messages in ``version``'s words."""
    names = Names(f"{scenario.id}-offline", "e2e-offline")
    objects: list[dict[str, Any]] = [spec.obj(names) for spec in scenario.nodes]
    objects += [pod.obj(names) for pod in scenario.bound]
    for number, step in enumerate(scenario.steps):
        state = write_list(tmp_path / f"state-{number}.yaml", objects)
        got = explain_cli(step, names, state, tmp_path, version=version)
        assert not problems(step, got, scenario.zones(), version or NEWEST), f"{scenario.why}\nexplain: {got}"
        assert got == explain_in_process(step, names, objects, version)
        for pod, node in zip(step.pods(names), got.nodes, strict=True):
            if node is not None:
                pod["spec"]["nodeName"] = names.node(node)
            objects.append(pod)


V1_20_ANTI = ("0/4 nodes are available: 1 node(s) didn't match Pod's node affinity, 3 node(s) didn't match pod "
              "affinity/anti-affinity, 3 node(s) didn't match pod anti-affinity rules.")


def test_offline_problems_name_what_differs() -> None:
    step = SCENARIOS[0].steps[0]  # web: 5 replicas, 3 placed on n1 n2 n3, anti-affinity
    right = Outcome(("n1", "n2", "n3", None, None), {3: V1_20_ANTI, 4: V1_20_ANTI})
    assert problems(step, right, SCENARIOS[0].zones(), (1, 20)) == []
    wrong = Outcome(("n1", "n1", None, None, None), {2: "x", 3: "x", 4: "x"})
    found = problems(step, wrong, SCENARIOS[0].zones(), (1, 20))
    assert any("Pending replicas [2, 3, 4]" in p for p in found)
    assert any("placed on ['n1', 'n1']" in p for p in found)
    assert any("replica 2's message" in p for p in found)
    lines = verdict(step, SCENARIOS[0], wrong, {"--cluster-state": right}, (1, 20))
    assert lines[0].startswith("kube-scheduler: ")
    assert [line.split(":")[0] for line in lines[-3:]] == ["Pending replicas differ", "replica 3's messages differ",
                                                            "replica 4's messages differ"]


@pytest.mark.parametrize(("message", "version", "complaint"), [
    pytest.param("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.", (1, 20),
                 "names no [\"node(s) didn't match pod affinity/anti-affinity\"]",
                 id="v1.20 words the anti-affinity failure twice"),
    pytest.param("0/3 nodes are available: 3 node(s) didn't match pod affinity/anti-affinity, 3 node(s) didn't "
                 "match pod anti-affinity rules.", (1, 22),
                 "names [\"node(s) didn't match pod affinity/anti-affinity\"] too",
                 id="v1.22 no longer has the generic reason"),
    pytest.param(V1_20_ANTI + " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.",
                 (1, 20), "has a preemption part", id="v1.20 has no preemption part"),
    pytest.param("0/4 nodes are available: 3 node(s) didn't match pod anti-affinity rules.", NEWEST,
                 "lacks a preemption part", id="the newest has one"),
])
def test_offline_problems_hold_each_release_to_its_exact_words(message: str, version: Version,
                                                               complaint: str) -> None:
    step = SCENARIOS[0].steps[0]
    got = Outcome(("n1", "n2", "n3", None, None), {3: message, 4: message})
    assert any(complaint in p for p in problems(step, got, SCENARIOS[0].zones(), version))


def test_offline_messages_that_differ_in_a_word_or_a_count_are_told_apart() -> None:
    step = SCENARIOS[0].steps[0]
    real = Outcome(("n1", "n2", "n3", None, None), {3: V1_20_ANTI, 4: V1_20_ANTI})
    counted = V1_20_ANTI.replace("1 node(s) didn't match Pod's", "2 node(s) didn't match Pod's")
    lines = verdict(step, SCENARIOS[0], real, {"--kubeconfig": Outcome(real.nodes, {3: V1_20_ANTI, 4: counted})},
                    (1, 20))
    assert [line.split(":")[0] for line in lines] == ["replica 4's messages differ"]


def test_offline_the_histogram_keeps_a_reason_that_holds_a_comma_whole() -> None:
    message = ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity, 1 node(s) had taint "
               "{e2e.novasphere.dev/dedicated: special}, that the pod didn't tolerate.")
    assert histogram(message) == {"node(s) didn't match Pod's node affinity": 1,
                                  words("taint", (1, 20))[0]: 1}
    assert histogram(message + " preemption: 0/2 nodes are available: 2 x.") == histogram(message)


def _fake_binary(path: Path, output: str) -> Path:
    path.write_text(f"#!/bin/sh\necho '{output}'\n")
    path.chmod(0o755)
    return path


def test_offline_the_scheduler_is_found_only_when_executable_and_the_skip_says_so(tmp_path: Path) -> None:
    assert find_scheduler(tmp_path) is None
    reason = scheduler_skip_reason(tmp_path)
    assert SCHEDULER in reason and "KUBEBUILDER_ASSETS" in reason and str(tmp_path) in reason
    (tmp_path / SCHEDULER).write_text("")
    assert find_scheduler(tmp_path) is None  # not executable
    _fake_binary(tmp_path / SCHEDULER, "Kubernetes v1.19.16")
    assert find_scheduler(tmp_path) == tmp_path / SCHEDULER
    assert binary_version(tmp_path / SCHEDULER) == (1, 19)
    assert binary_version(_fake_binary(tmp_path / "other", "no version here")) is None
    assert binary_version(tmp_path / "missing") is None


@pytest.mark.parametrize(("version", "insecure_off"), [((1, 19), True), ((1, 23), True), ((1, 24), False),
                                                       ((1, 33), False), (None, False)])
def test_offline_the_scheduler_flags(tmp_path: Path, version: tuple[int, int] | None, insecure_off: bool) -> None:
    server = Scheduler(control_plane=ControlPlane(assets=tmp_path, workdir=tmp_path), workdir=tmp_path, port=12345)
    argv = server.argv(tmp_path / "kubeconfig", version)
    assert argv[0] == str(tmp_path / SCHEDULER)
    for flag in ("--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=12345",
                 f"--kubeconfig={tmp_path / 'kubeconfig'}", f"--authentication-kubeconfig={tmp_path / 'kubeconfig'}",
                 f"--authorization-kubeconfig={tmp_path / 'kubeconfig'}"):
        assert flag in argv
    assert ("--port=0" in argv) is insecure_off
    assert server.healthz == "https://127.0.0.1:12345/healthz"
