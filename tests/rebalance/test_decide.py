"""``decide.plan`` as tables: a small cluster, the candidates it finds, where the simulation lands
each (the target), the gain in preference points, the verdict and the reason an operator reads.

Nodes are 4-cpu machines of the generic provider (``node.kubernetes.io/capacity``), one per row
of the table's cluster; pods ask for 100m and belong to ReplicaSets (``web-rs`` for owner
``web``) whose replica count is the number of their pods, unless a case says otherwise."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook import ANNOTATION_REBALANCE, PREFIX
from webhook.kube.affinity import PREFERRED
from webhook.rebalance import decide
from webhook.rebalance.decide import MIRROR_ANNOTATION, Settings, World, plan
from webhook.rebalance.model import Decision, Verdict, Why
from webhook.scheduler import Cluster, schedule

CAPACITY, ZONE, HOSTNAME = "node.kubernetes.io/capacity", "topology.kubernetes.io/zone", "kubernetes.io/hostname"
INTERRUPTIBLE = f"{PREFIX}interruptible"
SPOT_ITN = {"key": "aws-node-termination-handler/spot-itn", "value": "e-1", "effect": "NoSchedule"}
MOVE, STAY, SKIP = Verdict.MOVE, Verdict.STAY, Verdict.SKIP
Obj = dict[str, Any]


def node(name: str, capacity: str | None = "on-demand", *, zone: str = "a", cpu: str = "4",
         taints: Sequence[Obj] = (), unschedulable: bool = False) -> Obj:
    labels = {HOSTNAME: name, ZONE: zone}
    if capacity is not None:
        labels[CAPACITY] = capacity
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"taints": list(taints), "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def prefer(*terms: tuple[int, str, str]) -> Obj:
    """Preferred node affinity: (weight, label, value) terms, each ``label In [value]``."""
    return {"nodeAffinity": {PREFERRED: [
        {"weight": w, "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}}
        for w, k, v in terms]}}


def pod(name: str, on: str, *, owner: str | None = "web", kind: str = "ReplicaSet", ns: str = "shop",
        cpu: str = "100m", interruptible: bool = True, ready: bool = True, terminating: bool = False,
        annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None, **spec: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "uid": f"uid-{name}",
                 "labels": {"app": owner or name, **(labels or {})},
                 "annotations": {**({INTERRUPTIBLE: "true"} if interruptible else {}), **(annotations or {})}}
    if owner is not None:
        ref_name = f"{owner}-rs" if kind == "ReplicaSet" else owner
        meta["ownerReferences"] = [{"kind": kind, "name": ref_name, "uid": f"uid-{ref_name}", "controller": True}]
    if terminating:
        meta["deletionTimestamp"] = "2026-11-27T06:00:00Z"
    body: Obj = {"nodeName": on, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}
    return {"metadata": meta, "spec": body,
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(name: str, match: Mapping[str, str], allowed: int) -> Obj:
    return {"metadata": {"name": name, "namespace": "shop"}, "spec": {"selector": {"matchLabels": dict(match)}},
            "status": {"disruptionsAllowed": allowed}}


def world(nodes: Sequence[Obj], pods: Sequence[Obj], *, replicas: Mapping[str, int] | None = None,
          deployments: Mapping[str, Obj] | None = None, pdbs: Sequence[Obj] = (), **more: Any) -> World:
    """A ReplicaSet ``<owner>-rs`` for every ReplicaSet owner of ``pods`` (replicas: its pods, or
    ``replicas[owner]``), owned by the Deployment ``<owner>`` when ``deployments`` has its spec."""
    owners: dict[tuple[str, str], int] = {}
    for p in pods:
        for ref in p["metadata"].get("ownerReferences", ()):
            if ref["kind"] == "ReplicaSet":
                key = (p["metadata"]["namespace"], ref["name"][:-3])
                owners[key] = owners.get(key, 0) + 1
    replicasets, found = [], []
    for (ns, owner), count in owners.items():
        wanted = (replicas or {}).get(owner, count)
        rs: Obj = {"metadata": {"name": f"{owner}-rs", "namespace": ns, "uid": f"uid-{owner}-rs"},
                   "spec": {"replicas": wanted, "selector": {"matchLabels": {"app": owner}}}}
        if owner in (deployments or {}):
            rs["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": owner, "controller": True}]
            found.append({"metadata": {"name": owner, "namespace": ns, "uid": f"uid-{owner}"},
                          "spec": {"replicas": wanted, **(deployments or {})[owner]}})
        replicasets.append(rs)
    return World(nodes=list(nodes), pods=[decide.project_pod(p) for p in pods], pdbs=list(pdbs),
                 replicasets=replicasets, deployments=found, **more)


@dataclass(frozen=True)
class Row:
    """One decision as the tables say it: the pod, the node it lands on, the gain, the verdict
    and a fragment of the reason."""

    pod: str
    target: str | None
    gain: int
    verdict: Verdict
    reason: str


def rows(decisions: Iterable[Decision]) -> list[tuple[str, str | None, int, Verdict]]:
    return [(d.candidate.name, d.target, d.gain, d.verdict) for d in decisions]


@dataclass(frozen=True)
class Case:
    nodes: Sequence[Obj]
    pods: Sequence[Obj]
    want: Sequence[Row]
    settings: Settings = field(default_factory=Settings)
    backoff: frozenset[str] = frozenset()
    more: Mapping[str, Any] = field(default_factory=dict)


OD, SP = node("od"), node("sp", "spot")
# A pod that keeps ``od`` busier than the empty nodes, so that they outscore it (an empty ``od``
# would tie with them once the candidate is off it, and a tie counts its worst node).
FILL = pod("fill", "od", owner=None, cpu="1", interruptible=False)
FILLED = [pod(f"fill-{i}", "sp", owner=None, cpu="1", interruptible=False) for i in range(3)]

CANDIDATES = {
    "an interruptible pod on on-demand moves to an empty spot node": Case(
        [OD, SP], [pod("web-0", "od"), FILL],
        [Row("web-0", "sp", 100, MOVE, "lands at once on sp, worth 100 points against 0 on od")]),
    "without a spot node an interruptible pod on on-demand is no candidate": Case(
        [OD, node("od2")], [pod("web-0", "od")], []),
    "a spot node about to be reclaimed does not count as spot": Case(
        [OD, node("sp", "spot", taints=[SPOT_ITN])], [pod("web-0", "od")], []),
    "a node of unknown capacity never counts as spot, nor is a pod on it on on-demand": Case(
        [OD, node("x", None)], [pod("web-0", "od"), pod("db-0", "x", owner="db")], []),
    "a critical pod is not interruptible even when it tolerates spot": Case(
        [OD, SP], [pod("web-0", "od", interruptible=False, priority=2_000_000_000,
                       tolerations=[{"operator": "Exists"}])], []),
    "a pod on the node it prefers most is no candidate": Case(
        [OD, node("od-b", zone="b")], [pod("web-0", "od", interruptible=False, affinity=prefer((50, ZONE, "a")))], []),
    "a pod whose preferred zone has room moves there by the term's weight": Case(
        [OD, node("od-b", zone="b")], [pod("web-0", "od", interruptible=False, affinity=prefer((50, ZONE, "b"))), FILL],
        [Row("web-0", "od-b", 50, MOVE, "worth 50 points against 0 on od (+50)")]),
}

SIMULATION = {
    "a cordoned node and a full spot node: the pod would not schedule at once": Case(
        [node("od", unschedulable=True), node("sp", "spot", cpu="50m")], [pod("web-0", "od")],
        [Row("web-0", None, 0, STAY, "would not schedule at once: 0/2 nodes are available")]),
    "a busy spot node scores below the pod's own empty node: it would land back": Case(
        [OD, SP], [pod("web-0", "od"), *FILLED], [Row("web-0", "od", 0, STAY, "would land back on od")]),
    "an on-demand node tied with the spot node at the top score: it counts as the landing": Case(
        [OD, node("od2"), SP], [pod("web-0", "od"), pod("fill", "od", owner=None, cpu="1", interruptible=False)],
        [Row("web-0", "od2", 0, STAY, "would land on od2, the worst of 2 nodes tied at the top score, worth 0 points "
                                      "against 0 on od: +0 is less than --min-gain 10")]),
    "two spot nodes tied: each gains, the move counts the worst by name": Case(
        [OD, SP, node("sp2", "spot")], [pod("web-0", "od"), FILL],
        [Row("web-0", "sp", 100, MOVE, "lands at once on sp, the worst of 2 nodes tied at the top score")]),
    "the best zone is full: it would land on a node worth less than --min-gain more": Case(
        [OD, node("od-b", zone="b", cpu="50m"), node("od-c", zone="c")],
        [pod("web-0", "od", interruptible=False, affinity=prefer((50, ZONE, "b"), (5, ZONE, "c"))),
         pod("fill", "od", owner=None, cpu="1", interruptible=False)],
        [Row("web-0", "od-c", 5, STAY, "worth 5 points against 0 on od: +5 is less than --min-gain 10")]),
    "a moved pod is counted at its target: the next one no longer fits there": Case(
        [node("od", cpu="1200m"), node("sp", "spot", cpu="150m")],
        [pod("a-0", "od", owner="a"), pod("b-0", "od", owner="b"), FILL],
        [Row("a-0", "sp", 100, MOVE, "lands at once on sp"), Row("b-0", "od", 0, STAY, "would land back on od")]),
    "a node holding a pod the model cannot read is not landed on": Case(
        [OD, SP], [pod("web-0", "od"), FILL, pod("bad", "sp", owner=None, cpu="1x", interruptible=False)],
        [Row("web-0", "sp", 100, STAY, "would land on sp, whose pod shop/bad the model cannot read")]),
}

MIN_GAIN = {
    "a gain of exactly --min-gain moves": Case(
        [OD, node("od-b", zone="b")], [pod("web-0", "od", interruptible=False, affinity=prefer((10, ZONE, "b")))],
        [Row("web-0", "od-b", 10, MOVE, "(+10)")]),
    "a gain one short of --min-gain stays without a simulation": Case(
        [OD, node("od-b", zone="b")], [pod("web-0", "od", interruptible=False, affinity=prefer((9, ZONE, "b")))],
        [Row("web-0", None, 0, STAY, "no node is worth --min-gain 10 points more: od is worth 0, the best node 9")]),
    "a higher --min-gain keeps the same pod": Case(
        [OD, node("od-b", zone="b")], [pod("web-0", "od", interruptible=False, affinity=prefer((10, ZONE, "b")))],
        [Row("web-0", None, 0, STAY, "no node is worth --min-gain 11 points more")], Settings(min_gain=11)),
}

SAFETY = {
    "a budget that allows no disruption now": Case(
        [OD, SP], [pod("web-0", "od")],
        [Row("web-0", None, 0, SKIP, "PodDisruptionBudget web allows no disruption now (disruptionsAllowed 0)")],
        more={"pdbs": [pdb("web", {"app": "web"}, 0)]}),
    "two budgets select the pod: the Eviction API refuses it": Case(
        [OD, SP], [pod("web-0", "od")],
        [Row("web-0", None, 0, SKIP, "more than one PodDisruptionBudget selects it (all, web)")],
        more={"pdbs": [pdb("web", {"app": "web"}, 1), pdb("all", {}, 1)]}),
    "a move uses up the budget it shares with another owner": Case(
        [OD, SP], [pod("a-0", "od", owner="a", labels={"tier": "web"}),
                   pod("b-0", "od", owner="b", labels={"tier": "web"}), FILL],
        [Row("a-0", "sp", 100, MOVE, "lands at once"),
         Row("b-0", None, 0, SKIP, "PodDisruptionBudget tier allows no disruption now (disruptionsAllowed 0)")],
        more={"pdbs": [pdb("tier", {"tier": "web"}, 1)]}),
    "one pod per owner in a pass": Case(
        [OD, SP], [pod("web-0", "od"), pod("web-1", "od"), FILL],
        [Row("web-0", "sp", 100, MOVE, "lands at once"),
         Row("web-1", None, 0, SKIP, "one pod per owner: shop/web-0 of ReplicaSet shop/web-rs moves in this pass")]),
    "an owner with a pod not Ready is busy": Case(
        [OD, SP], [pod("web-0", "od"), pod("web-1", "od", ready=False)],
        [Row("web-0", None, 0, SKIP, "waiting for ReplicaSet shop/web-rs to be Ready: pod shop/web-1 is not Ready"),
         Row("web-1", None, 0, SKIP, "pod shop/web-1 is not Ready")]),
    "an owner with a pod terminating is busy": Case(
        [OD, SP], [pod("web-0", "od"), pod("web-1", "sp", terminating=True)],
        [Row("web-0", None, 0, SKIP, "waiting for ReplicaSet shop/web-rs to be Ready: pod shop/web-1 is terminating")]),
    "an owner with fewer Ready pods than replicas is busy (its replacement is Pending)": Case(
        [OD, SP], [pod("web-0", "od")],
        [Row("web-0", None, 0, SKIP, "waiting for ReplicaSet shop/web-rs to be Ready: 1 of 2 replicas Ready")],
        more={"replicas": {"web": 2}}),
    "a Deployment whose maxUnavailable resolves to 0 (25% of 2)": Case(
        [OD, SP], [pod("web-0", "od"), pod("web-1", "sp")],
        [Row("web-0", None, 0, SKIP, "Deployment shop/web allows no unavailable replica (maxUnavailable 25% of 2 "
                                     "replicas resolves to 0)")],
        more={"deployments": {"web": {}}}),
    "a Deployment of maxUnavailable 0 and maxSurge 1": Case(
        [OD, SP], [pod("web-0", "od"), *(pod(f"web-{i}", "sp") for i in range(1, 4))],
        [Row("web-0", None, 0, SKIP, "maxUnavailable 0 of 4 replicas resolves to 0")],
        more={"deployments": {"web": {"strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}}),
    "a Deployment whose 25% of 4 allows one down moves, its owner the Deployment": Case(
        [OD, SP, node("sp2", "spot")], [pod("web-0", "od"), FILL, *(pod(f"web-{i}", "sp2") for i in range(1, 4))],
        [Row("web-0", "sp", 100, MOVE, "lands at once on sp")], more={"deployments": {"web": {}}}),
    "a StatefulSet's pod moves, its owner the StatefulSet": Case(
        [OD, SP], [pod("db-0", "od", owner="db", kind="StatefulSet"), FILL],
        [Row("db-0", "sp", 100, MOVE, "lands at once on sp")],
        more={"statefulsets": [{"metadata": {"name": "db", "namespace": "shop", "uid": "uid-db"},
                                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db"}}}}]}),
    "an owner the controller backed off": Case(
        [OD, SP], [pod("web-0", "od")], [Row("web-0", None, 0, SKIP, "ReplicaSet shop/web-rs is backed off")],
        backoff=frozenset({"uid-web-rs"})),
    "one pod of an owner simulated a pass, even when it stays": Case(
        [node("od", cpu="1200m"), node("sp", "spot", cpu="150m")],
        [pod("a-0", "od", owner="a"), pod("b-0", "od", owner="b"), pod("b-1", "od", owner="b"), FILL],
        [Row("a-0", "sp", 100, MOVE, "lands at once"), Row("b-0", "od", 0, STAY, "would land back on od"),
         Row("b-1", None, 0, SKIP,
             "one pod per owner a pass: shop/b-0 of ReplicaSet shop/b-rs was simulated and stays")]),
    "the simulations a pass may run: the rest wait for a later pass": Case(
        [OD, SP], [pod("a-0", "od", owner="a"), pod("b-0", "od", owner="b"), FILL],
        [Row("a-0", "sp", 100, MOVE, "lands at once"),
         Row("b-0", None, 0, SKIP, "not simulated: the pass's 1 simulation(s) went to candidates that could "
                                   "gain as much or more; a later pass weighs it")], Settings(max_simulations=1)),
    "a later second of the snapshot starts the simulations at another candidate": Case(
        [OD, SP], [pod("a-0", "od", owner="a"), pod("b-0", "od", owner="b"), FILL],
        [Row("b-0", "sp", 100, MOVE, "lands at once"), Row("a-0", None, 0, SKIP, "not simulated: ")],
        Settings(max_simulations=1), more={"now": 1.0}),
    "the rate limit: the second owner waits for the next interval": Case(
        [OD, SP], [pod("a-0", "od", owner="a"), pod("b-0", "od", owner="b"), FILL],
        [Row("a-0", "sp", 100, MOVE, "lands at once"),
         Row("b-0", None, 0, SKIP, "the rate limit: 1 eviction(s) per interval, all planned")],
        Settings(max_evictions=1)),
}

EXCLUDED = {
    "a DaemonSet pod": Case([OD, SP], [pod("agent", "od", owner="agent", kind="DaemonSet")],
                            [Row("agent", None, 0, SKIP, "a DaemonSet pod: DaemonSet agent runs it on its node")]),
    "a mirror pod": Case([OD, SP], [pod("etcd", "od", owner="od", kind="Node", annotations={MIRROR_ANNOTATION: "x"})],
                         [Row("etcd", None, 0, SKIP, "a mirror pod: the kubelet runs it from a static manifest")]),
    "a mirror pod known by its controller, its Node": Case(
        [OD, SP], [pod("etcd", "od", owner="od", kind="Node")],
        [Row("etcd", None, 0, SKIP, "a mirror pod: the kubelet runs it from a static manifest")]),
    "a pod no controller owns": Case([OD, SP], [pod("lone", "od", owner=None)],
                                     [Row("lone", None, 0, SKIP, "no controller owns it: nothing would recreate it")]),
    "a pod annotated rebalance false": Case(
        [OD, SP], [pod("web-0", "od", annotations={ANNOTATION_REBALANCE: "false"})],
        [Row("web-0", None, 0, SKIP, f'annotated {ANNOTATION_REBALANCE}: "false"')]),
    "a pod of an excluded namespace": Case([OD, SP], [pod("dns", "od", ns="kube-system")],
                                           [Row("dns", None, 0, SKIP, "namespace kube-system is excluded")]),
    "a pod on a node about to be reclaimed is the spot controller's": Case(
        [node("od", taints=[SPOT_ITN]), SP], [pod("web-0", "od")],
        [Row("web-0", None, 0, SKIP, "its node od is about to be reclaimed "
                                     "(taint aws-node-termination-handler/spot-itn): the spot controller moves it")]),
    "a pod whose volume claims a PersistentVolumeClaim": Case(
        [OD, SP], [pod("db-0", "od", owner="db",
                       volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}]), FILL],
        [Row("db-0", None, 0, SKIP, "its volume claims PersistentVolumeClaim data-0, whose volume's place the model "
                                    "does not know")]),
    "a Job's pod": Case([OD, SP], [pod("batch", "od", owner="batch", kind="Job")],
                        [Row("batch", None, 0, SKIP,
                              "owned by Job batch, whose replicas the rebalancer cannot wait for")]),
    "a Deployment the snapshot lacks, above a ReplicaSet it has": Case(
        [OD, SP], [pod("web-0", "od")],
        [Row("web-0", None, 0, SKIP, "its Deployment shop/web is not in the snapshot")],
        more={"deployments": {"web": {}}, "drop_deployments": True}),
    "a ReplicaSet the snapshot lacks": Case(
        [OD, SP], [pod("web-0", "od")],
        [Row("web-0", None, 0, SKIP, "its ReplicaSet shop/web-rs is not in the snapshot")],
        more={"drop_replicasets": True}),
}

UNREADABLE = {
    "a pod with an invalid quantity": Case(
        [OD, SP], [pod("web-0", "od", cpu="1x")], [Row("web-0", None, 0, SKIP, "pod shop/web-0 cannot be read: ")]),
    "a pod with a malformed preferred term": Case(
        [OD, SP], [pod("web-0", "od", affinity={"nodeAffinity": {PREFERRED: [
            {"weight": 5, "preference": {"matchExpressions": [
                {"key": ZONE, "operator": "Near", "values": ["a"]}]}}]}})],
        [Row("web-0", None, 0, SKIP,
             "pod shop/web-0 cannot be read: preferredDuringSchedulingIgnoredDuringExecution[0]")]),
    "a Deployment whose maxUnavailable the Deployment controller would refuse": Case(
        [OD, SP], [pod("web-0", "od"), *(pod(f"web-{i}", "sp") for i in range(1, 4))],
        [Row("web-0", None, 0, SKIP,
             "Deployment shop/web cannot be read: maxUnavailable 'one' is not an integer or a percentage")],
        more={"deployments": {"web": {"strategy": {"rollingUpdate": {"maxUnavailable": "one"}}}}}),
    "a budget whose selector cannot be read blocks the pods of its namespace": Case(
        [OD, SP], [pod("web-0", "od")],
        [Row("web-0", None, 0, SKIP, "PodDisruptionBudget odd cannot be read: ")],
        more={"pdbs": [{"metadata": {"name": "odd", "namespace": "shop"}, "spec": {"selector": {"matchExpressions": [
            {"key": "app", "operator": "Near", "values": ["web"]}]}}, "status": {"disruptionsAllowed": 1}}]}),
    "a pod whose pod anti-affinity the scheduler would refuse to parse": Case(
        [OD, SP], [pod("web-0", "od", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": HOSTNAME, "labelSelector": {"matchExpressions": [
                {"key": "app", "operator": "Near", "values": ["web"]}]}}]}}), FILL],
        [Row("web-0", None, 0, SKIP, "pod shop/web-0 cannot be read: ")]),
    "a node with an invalid allocatable: its pods are skipped and nothing lands there": Case(
        [node("od", cpu="lots"), node("od-b", zone="b"), node("sp", "spot", zone="c")],
        [pod("web-0", "od"), pod("db-0", "od-b", owner="db", interruptible=False, affinity=prefer((50, ZONE, "a")))],
        [Row("web-0", None, 0, SKIP, "node od cannot be read: ")]),
}


def _decide(case: Case) -> list[Decision]:
    more = dict(case.more)
    drop_replicasets = more.pop("drop_replicasets", False)
    drop_deployments = more.pop("drop_deployments", False)
    built = world(case.nodes, case.pods, **more)
    if drop_replicasets:
        built = replace(built, replicasets=[])
    if drop_deployments:
        built = replace(built, deployments=[])
    return plan(built, case.settings, backoff=case.backoff)


def _check(case: Case) -> None:
    decisions = _decide(case)
    assert rows(decisions) == [(r.pod, r.target, r.gain, r.verdict) for r in case.want], [d.reason for d in decisions]
    for decision, row in zip(decisions, case.want, strict=True):
        assert row.reason in decision.reason, (decision.reason, row.reason)


@pytest.mark.parametrize("case", list(CANDIDATES.values()), ids=list(CANDIDATES))
def test_candidates(case: Case) -> None:
    _check(case)


@pytest.mark.parametrize("case", list(SIMULATION.values()), ids=list(SIMULATION))
def test_the_simulated_landing(case: Case) -> None:
    _check(case)


@pytest.mark.parametrize("case", list(MIN_GAIN.values()), ids=list(MIN_GAIN))
def test_the_min_gain_boundary(case: Case) -> None:
    _check(case)


@pytest.mark.parametrize("case", list(SAFETY.values()), ids=list(SAFETY))
def test_safety_read_from_the_snapshot(case: Case) -> None:
    _check(case)


@pytest.mark.parametrize("case", list(EXCLUDED.values()), ids=list(EXCLUDED))
def test_pods_never_moved(case: Case) -> None:
    _check(case)


@pytest.mark.parametrize("case", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_what_the_model_cannot_read_is_skipped_with_the_reason(case: Case) -> None:
    _check(case)


def test_a_malformed_preferred_term_makes_a_candidate_of_unknown_why() -> None:
    decisions = _decide(UNREADABLE["a pod with a malformed preferred term"])
    assert [d.candidate.why for d in decisions] == [Why.UNREADABLE]


def test_the_owner_of_a_deployments_pod_is_the_deployment_and_ties_name_the_other_top_nodes() -> None:
    [tied] = _decide(SIMULATION["two spot nodes tied: each gains, the move counts the worst by name"])
    assert tied.ties == frozenset({"sp2"}) and tied.target == "sp"
    [moved] = _decide(SAFETY["a Deployment whose 25% of 4 allows one down moves, its owner the Deployment"])
    assert (moved.candidate.owner.kind, moved.candidate.owner.name, moved.candidate.owner.uid) == (
        "Deployment", "web", "uid-web")
    assert moved.candidate.why is Why.INTERRUPTIBLE_ON_DEMAND and moved.ties == frozenset()


def test_the_best_gain_comes_first() -> None:
    pods = [pod("small-0", "od", owner="small", interruptible=False, affinity=prefer((20, ZONE, "b"))),
            pod("big-0", "od", owner="big", interruptible=False, affinity=prefer((80, ZONE, "b"))),
            pod("spot-0", "od", owner="spot"), FILL]
    fill_b = pod("fill-b", "od-b", owner=None, cpu="1", interruptible=False)
    decisions = plan(world([OD, node("od-b", zone="b"), node("sp", "spot", zone="b")], [*pods, fill_b]), Settings())
    assert rows(decisions) == [("spot-0", "sp", 100, MOVE), ("big-0", "sp", 80, MOVE), ("small-0", "sp", 20, MOVE)]


def test_the_projection_keeps_what_the_decisions_read() -> None:
    raw = pod("web-0", "od", annotations={ANNOTATION_REBALANCE: "false", "other": "dropped"}, nodeSelector={"a": "b"},
              priorityClassName="high", volumes=[{"name": "tmp", "emptyDir": {}},
                                                 {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}])
    got = decide.project_pod(raw)
    assert got["metadata"]["annotations"] == {INTERRUPTIBLE: "true", ANNOTATION_REBALANCE: "false"}
    assert got["metadata"]["ownerReferences"] == [{"kind": "ReplicaSet", "name": "web-rs", "uid": "uid-web-rs",
                                                   "controller": True}]
    assert (got["spec"]["nodeSelector"], got["spec"]["priorityClassName"]) == ({"a": "b"}, "high")
    assert got["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]
    assert got["status"]["conditions"] == [{"type": "Ready", "status": "True"}]


# ---- the property: never two moves for one owner, never more than the limit, never a node
# the scheduler model rejects ----

@st.composite
def worlds(draw: st.DrawFn) -> tuple[World, Settings]:
    nodes = [node(f"n{i}", draw(st.sampled_from(["on-demand", "spot", None])), zone=draw(st.sampled_from("ab")),
                  cpu=draw(st.sampled_from(["300m", "1", "4"]))) for i in range(draw(st.integers(1, 5)))]
    pods: list[Obj] = []
    for o in range(draw(st.integers(1, 4))):
        affinity = prefer((draw(st.integers(1, 100)), ZONE, draw(st.sampled_from("ab"))))
        interruptible = draw(st.booleans())
        for r in range(draw(st.integers(1, 3))):
            on = draw(st.sampled_from([n["metadata"]["name"] for n in nodes]))
            pods.append(pod(f"o{o}-{r}", on, owner=f"o{o}", interruptible=interruptible, affinity=affinity,
                            cpu=draw(st.sampled_from(["100m", "250m"]))))
    budgets = [pdb(f"o{o}", {"app": f"o{o}"}, draw(st.integers(0, 2))) for o in range(4) if draw(st.booleans())]
    chosen = Settings(min_gain=draw(st.integers(1, 60)), max_evictions=draw(st.integers(0, 3)))
    return world(nodes, pods, pdbs=budgets), chosen


def _feasible(world_: World, decision: Decision, moves: Sequence[Decision]) -> bool:
    """The target passes every filter of the model with the pod off its node and every other
    move made (resources add up the same whichever move the pass simulated first)."""
    elsewhere = {d.candidate.key: d.target for d in moves if d is not decision}
    others = [{**p, "spec": {**p["spec"], "nodeName": elsewhere.get(_key(p), p["spec"]["nodeName"])}}
              for p in world_.pods if _key(p) != decision.candidate.key]
    incoming = next(p for p in world_.pods if _key(p) == decision.candidate.key)
    incoming = {**incoming, "spec": {k: v for k, v in incoming["spec"].items() if k != "nodeName"}}
    result = schedule(incoming, Cluster.from_objects(world_.nodes, others), preempt=False)
    return decision.target in result.feasible


def _key(p: Mapping[str, Any]) -> str:
    return f"{p['metadata']['namespace']}/{p['metadata']['name']}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_plan_never_moves_two_pods_of_an_owner_nor_more_than_the_limit_nor_onto_a_node_the_model_rejects(
        drawn: tuple[World, Settings]) -> None:
    world_, chosen = drawn
    decisions = plan(world_, chosen)
    moves = [d for d in decisions if d.verdict is MOVE]
    assert len(moves) <= chosen.max_evictions
    assert len({d.candidate.owner.uid for d in moves}) == len(moves)
    assert all(d.gain >= chosen.min_gain and d.target != d.candidate.node for d in moves)
    assert all(_feasible(world_, d, moves) for d in moves), [(d.candidate.key, d.target) for d in moves]
    assert [d.gain for d in decisions] == sorted((d.gain for d in decisions), reverse=True)
