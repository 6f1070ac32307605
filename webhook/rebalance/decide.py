"""Which running pods to move, decided on one snapshot of the cluster: pure, no I/O.

``plan(world, settings)`` finds the candidates, simulates each with the scheduler model and
returns a ``Decision`` for every candidate: MOVE (evict it now), STAY (simulated, not worth it)
or SKIP (not simulated, with the reason). Best gain first.

Candidates
  * an interruptible pod (``spot.nodes.classify``) on an on-demand node (``spot.nodes.capacity``)
    while a spot node exists that is schedulable and not about to be reclaimed;
  * a pod with preferred node-affinity terms (where admission writes the policies' capacity,
    resources and avoided-nodes preferences) whose node scores fewer preference points than the
    best node of the cluster does.

Preference points (the scale ``--min-gain`` is in)
  A node is worth, to a pod, the sum of the weights (1..100 each) of the pod's
  ``preferredDuringSchedulingIgnoredDuringExecution`` node-affinity terms that the node
  matches: exactly what the NodeAffinity plugin's Score sums before NormalizeScore scales the
  sums to 0..100 (``NodeAffinity.Score`` in pkg/scheduler/framework/plugins/nodeaffinity of
  v1.20). The term matching is the scheduler model's own (``scheduler.nodeaffinity``). An
  interruptible pod gets ``Settings.spot_points`` more on a spot node (100 by default: as much as
  one maximal term, so that running on spot counts as much as the strongest preference a policy
  can write, and a capacity preference written as a preferred term - which admission adds for
  ``capacity: spot`` - counts twice, as it should: both say "spot"). A node whose capacity is
  unknown (``spot.nodes.UNKNOWN``) never counts as spot. The gain of a move is the points of
  the node the pod would land on minus the points of the node it runs on; a move is made only
  when the gain is at least ``Settings.min_gain`` (10 points by default: a tenth of a maximal
  term, so that weight-1 tie-breakers do not churn pods).

Safety, read from the snapshot itself, so a controller that restarts can never evict twice
  * one pod per owner at a time: an owner (a Deployment through its ReplicaSet, a ReplicaSet of
    its own, a StatefulSet) whose pods are not all Ready, one of them terminating, or whose Ready
    pods are fewer than its desired replicas is busy - the replacement of an earlier move is not
    Ready yet - and its pods are skipped; one pod per owner is simulated a pass;
  * a PodDisruptionBudget selecting the pod whose ``status.disruptionsAllowed`` is below 1 (the
    disruption controller's count, which the Eviction API refuses to go below), or more than
    one budget selecting it (the Eviction API refuses such a pod), skips it; a move in this pass
    uses up one of the budget's disruptions for the next candidate;
  * a Deployment whose rolling update allows no unavailable replica (maxUnavailable resolves to
    0 as the Deployment controller resolves it, ``kube.deployment.resolve``) is never disrupted;
  * never DaemonSet pods (their controller pins each to its node), mirror pods (the kubelet's
    static pods), pods without a controller (nothing recreates them), pods of other controllers
    (a Job's pod would lose its work), pods annotated ``placement.novasphere.dev/rebalance:
    "false"``, pods of excluded namespaces, nor a pod on a node about to be reclaimed (the spot
    controller drains those, ``spot.nodes.Detector``);
  * at most ``Settings.max_evictions`` MOVEs per pass (the controller's rate limit per interval).

Simulation
  Each candidate is taken off the snapshot (every other pod stays where it is) and scheduled
  with the model's default profile (``scheduler.framework.schedule``) without preemption: it
  must fit at once, since an evicted pod that waits Pending or preempts another is worse off
  than one left alone. It lands on the node with the top score; when several tie, the real
  scheduler picks one at random (``selectHost``), so the pod counts as landing on the worst of
  them and moves only if each gains ``min_gain``. A MOVE is accounted for at its landing before
  the next candidate is simulated. A candidate whose best node, by preference points alone,
  cannot gain ``min_gain`` STAYs without a simulation.

  The candidates are simulated in order of the most they could gain; among those that could
  gain as much, by name, starting at a place that moves with the snapshot's clock. A simulation
  scores every node (about 0.1 s of CPU at 5,000 nodes), so a pass runs at most
  ``Settings.max_simulations``; those past it, and the other pods of an owner already simulated,
  are skipped for a later pass, which starts elsewhere.

Bad input: a pod or node the model cannot read (an invalid quantity, a malformed affinity) is
left out of the snapshot and its pods are skipped with the reason; it is never guessed at.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook import ANNOTATION_REBALANCE
from webhook.cluster.snapshot import project_pod as project_scheduled_pod
from webhook.kube import pods as kube_pods
from webhook.kube.times import timestamp
from webhook.rebalance.model import Candidate, Decision, Owner, Verdict, Why
from webhook.rebalance.points import Landscape, Node, Preferences, preferred_of, read_node
from webhook.rebalance.safety import Budgets, Owners, Root, controller_ref
from webhook.scheduler.cluster import Cluster
from webhook.scheduler.framework import schedule
from webhook.scheduler.plan import Options
from webhook.scheduler.podinfo import PodInfo
from webhook.spot.config import SpotConfig
from webhook.spot.drain import MIRROR_ANNOTATION, pod_key, ready
from webhook.spot.nodes import ON_DEMAND, SPOT, Detector, capacity, classify

__all__ = ["MIRROR_ANNOTATION", "Settings", "World", "plan", "project_pod"]

# What ``PodInfo`` reads of a pod's spec besides the priority (``PodInfo.__init__``).
_PARSED_SPEC = ("containers", "initContainers", "overhead", "resources", "affinity")
# What ``classify`` and the preferences read of a pod's spec besides the priority.
_CLASSIFIED_SPEC = ("tolerations", "nodeSelector", "affinity")
# What reading a malformed object raises in the model: the pod or node is skipped, not guessed at.
_UNREADABLE = (ValueError, TypeError, AttributeError, KeyError)


@dataclass(frozen=True)
class Settings:
    """``min_gain``: points a move must gain; ``max_evictions``: MOVEs per pass (the rate limit
    per interval); ``spot_points``: what a spot node is worth to an interruptible pod;
    ``options``: the scheduler profile modelled (``Options.for_version`` of the cluster);
    ``max_simulations``: candidates simulated per pass (each schedules the pod over every node,
    about 0.1 s of CPU at 5,000 nodes: 30 keep a pass of that size within a few seconds; the
    others are weighed in later passes)."""

    min_gain: int = 10
    max_evictions: int = 5
    excluded_namespaces: frozenset[str] = frozenset({"kube-system"})
    spot: SpotConfig = field(default_factory=SpotConfig)
    spot_points: int = 100
    options: Options = field(default_factory=Options)
    max_simulations: int = 30


@dataclass(frozen=True)
class World:
    """One snapshot of the cluster as plain dicts, as the cluster cache holds them. Pods should
    be projected with ``project_pod`` (it keeps the annotations, nodeSelector and Ready
    condition the decisions read besides what the scheduler model reads). ``now``: Unix time of
    the snapshot, the spot detector's clock for a spot node that stopped reporting Ready."""

    nodes: Sequence[Mapping[str, Any]]
    pods: Sequence[Mapping[str, Any]]
    pdbs: Sequence[Mapping[str, Any]] = ()
    priority_classes: Sequence[Mapping[str, Any]] = ()
    namespaces: Sequence[Mapping[str, Any]] = ()
    replicasets: Sequence[Mapping[str, Any]] = ()
    deployments: Sequence[Mapping[str, Any]] = ()
    statefulsets: Sequence[Mapping[str, Any]] = ()
    now: float = 0.0


def plan(world: World, settings: Settings, *, backoff: frozenset[str] = frozenset()) -> list[Decision]:
    """A decision for every candidate of ``world``, best gain first. ``backoff``: owner uids the
    controller has backed off (their pods are skipped)."""
    return _Pass(world, settings, backoff).run()


def project_pod(obj: Mapping[str, Any], *, spot: SpotConfig | None = None, share: Any = None) -> dict[str, Any]:
    """``cluster.snapshot.project_pod`` plus what the rebalancer reads besides: the annotations
    it weighs (the opt-out, the mirror one, ``spot``'s critical and interruptible ones),
    ``nodeSelector`` and ``priorityClassName``, the volumes that claim a PersistentVolumeClaim,
    the Ready condition and the owners' uids."""
    config = spot or SpotConfig()
    keep = share if share is not None else (lambda value: value)
    out = project_scheduled_pod(obj, share=keep)
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    watched = (ANNOTATION_REBALANCE, MIRROR_ANNOTATION, config.critical.annotation, config.interruptible.annotation)
    annotations = meta.get("annotations") or {}
    kept = {k: annotations[k] for k in watched if k in annotations}
    if kept:
        out["metadata"]["annotations"] = keep(kept)
    owners = [{k: ref[k] for k in ("kind", "name", "uid", "controller") if k in ref}
              for ref in meta.get("ownerReferences") or () if isinstance(ref, Mapping)]
    if owners:
        out["metadata"]["ownerReferences"] = keep(owners)
    for key in ("nodeSelector", "priorityClassName"):
        if spec.get(key) is not None:
            out["spec"][key] = keep(spec[key])
    claims = [{"name": v.get("name"), "persistentVolumeClaim": {"claimName": claim.get("claimName")}}
              for v in spec.get("volumes") or () if isinstance(v, Mapping)
              and isinstance(claim := v.get("persistentVolumeClaim"), Mapping)]
    if claims:
        out["spec"]["volumes"] = keep(claims)
    conditions = [{"type": "Ready", "status": c.get("status")}
                  for c in (obj.get("status") or {}).get("conditions") or ()
                  if isinstance(c, Mapping) and c.get("type") == "Ready"]
    if conditions:
        out["status"]["conditions"] = keep(conditions)
    return out


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


@dataclass
class _Pod:
    """A candidate as the pass weighs it: what it prefers, its points here and the best it could
    get anywhere (an upper bound: by preference points alone, before any filter)."""

    obj: Mapping[str, Any]
    candidate: Candidate
    node: Node
    prefs: Preferences | None = None
    now: int = 0
    best: int = 0
    root: Root | None = None
    ref: Mapping[str, Any] | None = None
    error: str | None = None

    @property
    def bound(self) -> int:
        return self.best - self.now


class _Pass:
    """One decision pass over a snapshot."""

    def __init__(self, world: World, settings: Settings, backoff: frozenset[str]) -> None:
        self.world, self.settings, self.backoff = world, settings, backoff
        detector = Detector(settings.spot)
        self.nodes: dict[str, Node] = {}
        for obj in world.nodes:
            node = read_node(obj, lambda n: (capacity(n, settings.spot), detector.reclaim(n, world.now)))
            self.nodes[node.name] = node
        self.landscape = Landscape(self.nodes.values())
        self.spot_exists = any(n.capacity == SPOT for n in self.landscape.nodes)
        self.priority_classes = {str(_meta(pc).get("name") or ""): pc for pc in world.priority_classes}
        self.owners = Owners(world.replicasets, world.deployments, world.statefulsets)
        self.budgets = Budgets(world.pdbs)
        self.infos: dict[str, PodInfo] = {}
        self.unreadable: dict[str, str] = {}  # pod key -> why the model cannot read it
        self.blurred: dict[str, str] = {}  # node -> a pod on it the model cannot read
        self._parsed: dict[tuple[Any, ...], PodInfo] = {}  # see _parse
        self._classified: dict[tuple[Any, ...], tuple[bool, Preferences]] = {}  # see _prefers
        self._times: dict[Any, float | None] = {}  # startTime -> Unix time
        self.weighed: dict[str, tuple[str, Verdict]] = {}  # owner uid -> the pod simulated, its verdict
        self.moves = self.simulations = 0
        self.cluster = self._snapshot()

    # ---- the snapshot ----

    def _snapshot(self) -> Cluster:
        """The scheduler's snapshot, built once: readable nodes with the readable pods bound to
        them (``Cluster.from_objects``, with a pod or node it cannot read left out and noted)."""
        bound: dict[str, list[PodInfo]] = {}
        for pod in self.world.pods:
            name = str((pod.get("spec") or {}).get("nodeName") or "")
            node = self.nodes.get(name)
            if node is None or node.info is None or kube_pods.terminal(pod):
                continue
            try:
                info = self._parse(pod)
            except _UNREADABLE as exc:
                self.unreadable[pod_key(pod)] = f"pod {pod_key(pod)} cannot be read: {exc}"
                self.blurred.setdefault(name, pod_key(pod))
                continue
            self.infos[info.key] = info
            bound.setdefault(name, []).append(info)
        infos = [n.info.with_pods(bound[n.name]) if n.name in bound else n.info
                 for n in self.nodes.values() if n.info is not None]
        return Cluster(infos, _namespace_labels(self.world.namespaces), self.world.pdbs)

    def _parse(self, pod: Mapping[str, Any]) -> PodInfo:
        """``PodInfo(pod, strict=False)``, the parse shared between replicas: the cluster view
        keeps one copy of the labels, containers and affinity that replicas share
        (``cluster.snapshot.SharedValues``), and parsing 150,000 pods one by one (their requests
        as exact fractions) would be most of a pass. What differs between replicas - name,
        start time, whether terminating - is each pod's own. The key holds the ids of the
        shared values: the world holds every one of them for the whole pass."""
        meta, spec = _meta(pod), pod.get("spec") or {}
        key = (meta.get("namespace"), id(meta.get("labels")), spec.get("priority"),
               *(id(spec.get(k)) for k in _PARSED_SPEC))
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = self._parsed[key] = PodInfo(pod, strict=False)
            return parsed
        info = parsed.renamed(pod)
        started = (pod.get("status") or {}).get("startTime")
        if started not in self._times:
            self._times[started] = timestamp(started)
        info.start_time = self._times[started]
        info.terminating = meta.get("deletionTimestamp") is not None
        return info

    # ---- the pass ----

    def run(self) -> list[Decision]:
        self._count_owners()
        decisions: list[Decision] = []
        ready_to_weigh: list[_Pod] = []
        for pod in self._candidates():
            skipped = self._excluded(pod)
            if skipped is not None:
                decisions.append(self._decide(pod, Verdict.SKIP, skipped))
            elif pod.bound < self.settings.min_gain:
                decisions.append(self._decide(pod, Verdict.STAY, self._no_better(pod)))
            else:
                ready_to_weigh.append(pod)
        for pod in _in_turn(ready_to_weigh, int(self.world.now)):
            decisions.append(self._weigh(pod))
        decisions.sort(key=lambda d: (-d.gain, d.candidate.key))
        return decisions

    def _count_owners(self) -> None:
        """Each root workload's pods as the snapshot shows them: Ready, not Ready, terminating."""
        for pod in self.world.pods:
            if kube_pods.terminal(pod):
                continue
            meta = _meta(pod)
            ref = controller_ref(meta)
            if ref is None:
                continue
            root = self.owners.root(str(meta.get("namespace") or "default"), ref)
            if isinstance(root, str):
                continue
            root.pods += 1
            if meta.get("deletionTimestamp") is not None:
                root.terminating.append(pod_key(pod))
            elif ready(pod):
                root.ready += 1
            else:
                root.unready.append(pod_key(pod))

    def _candidates(self) -> list[_Pod]:
        out = []
        for obj in self.world.pods:
            node = self.nodes.get(str((obj.get("spec") or {}).get("nodeName") or ""))
            if node is None or kube_pods.terminal(obj):
                continue
            pod = self._candidate(obj, node)
            if pod is not None:
                out.append(pod)
        return out

    def _candidate(self, obj: Mapping[str, Any], node: Node) -> _Pod | None:
        """The pod as a candidate, or None when it is not one (it runs where it prefers)."""
        try:
            interruptible, prefs = self._prefers(obj)
        except _UNREADABLE as exc:
            return _Pod(obj, self._candidate_of(obj, node, Why.UNREADABLE), node,
                        error=f"pod {pod_key(obj)} cannot be read: {exc}")
        now, best = prefs.points(node), self.landscape.best(prefs)
        if interruptible and node.capacity == ON_DEMAND and self.spot_exists:
            why = Why.INTERRUPTIBLE_ON_DEMAND
        elif prefs.terms is not None and best > now:
            why = Why.PREFERENCE_UNMET
        else:
            return None
        return _Pod(obj, self._candidate_of(obj, node, why), node, prefs, now, best,
                    error=self.unreadable.get(pod_key(obj)))

    def _prefers(self, obj: Mapping[str, Any]) -> tuple[bool, Preferences]:
        """Whether the pod is interruptible (``spot.nodes.classify``), and its preferences; worked
        out once for the replicas that share what ``classify`` and the terms read (the cluster
        view keeps one copy of the annotations, tolerations and affinity they share)."""
        meta, spec = _meta(obj), obj.get("spec") or {}
        key = (id(meta.get("annotations")), spec.get("priority"), spec.get("priorityClassName"),
               *(id(spec.get(k)) for k in _CLASSIFIED_SPEC))
        found = self._classified.get(key)
        if found is None:
            interruptible = classify(obj, self.settings.spot, self.priority_classes).interruptible
            prefs = Preferences(self.landscape.terms(preferred_of(spec)),
                                self.settings.spot_points if interruptible else 0)
            found = self._classified[key] = (interruptible, prefs)
        return found

    def _candidate_of(self, obj: Mapping[str, Any], node: Node, why: Why) -> Candidate:
        meta = _meta(obj)
        ref = controller_ref(meta) or {}
        owner = Owner(str(ref.get("kind") or ""), str(ref.get("name") or ""), str(ref.get("uid") or ""))
        return Candidate(str(meta.get("namespace") or "default"), str(meta.get("name") or ""),
                         str(meta.get("uid") or ""), node.name, owner, why)

    def _excluded(self, pod: _Pod) -> str | None:
        """Why the pod is never moved, whatever a simulation would say; resolves its owner."""
        meta, candidate = _meta(pod.obj), pod.candidate
        annotations = meta.get("annotations") or {}
        if candidate.namespace in self.settings.excluded_namespaces:
            return f"namespace {candidate.namespace} is excluded"
        if str(annotations.get(ANNOTATION_REBALANCE, "")).lower() == "false":
            return f'annotated {ANNOTATION_REBALANCE}: "false"'
        ref = controller_ref(meta)
        # The kubelet's copy of a static pod: annotated so, its controller its Node.
        if MIRROR_ANNOTATION in annotations or (ref is not None and ref.get("kind") == "Node"):
            return "a mirror pod: the kubelet runs it from a static manifest"
        if ref is None:
            return "no controller owns it: nothing would recreate it"
        if ref.get("kind") == "DaemonSet":
            return f"a DaemonSet pod: DaemonSet {ref.get('name')} runs it on its node"
        claim = _claim(pod.obj)
        if claim is not None:
            # The model has no volume plugins (VolumeBinding, VolumeZone, the attach limits): it
            # cannot tell where the claimed volume may follow the pod, nor the scheduler's
            # answer, and a zonal volume would hold the replacement Pending in another zone.
            return f"its volume claims PersistentVolumeClaim {claim}, whose volume's place the model does not know"
        if pod.error is not None:
            return pod.error
        if pod.node.error is not None:
            return pod.node.error
        if pod.node.reclaim is not None:
            return (f"its node {pod.node.name} is about to be reclaimed ({pod.node.reclaim}): "
                    "the spot controller moves it")
        root = self.owners.root(candidate.namespace, ref)
        if isinstance(root, str):
            return root
        pod.root, pod.ref = root, ref
        pod.candidate = Candidate(candidate.namespace, candidate.name, candidate.uid, candidate.node,
                                  Owner(root.kind, root.name, root.uid), candidate.why)
        return None

    def _no_better(self, pod: _Pod) -> str:
        return (f"no node is worth --min-gain {self.settings.min_gain} points more: {pod.node.name} is worth "
                f"{pod.now}, the best node {pod.best}")

    def _blocked(self, pod: _Pod) -> str | None:
        """Why the pod may not be evicted now, or not weighed in this pass: its owner backed
        off, busy or weighed already, its strategy, its budget, the rate limit, the simulations
        a pass may run."""
        root = pod.root
        assert root is not None
        if root.uid in self.backoff:
            return f"{root.label} is backed off after failed evictions"
        weighed = self.weighed.get(root.uid)
        if weighed is not None:
            pod_key, verdict = weighed
            if verdict is Verdict.MOVE:
                return f"one pod per owner: {pod_key} of {root.label} moves in this pass"
            said = "was simulated and stays" if verdict is Verdict.STAY else "could not be simulated"
            return f"one pod per owner a pass: {pod_key} of {root.label} {said}"
        try:
            why = root.busy() or root.strategy()
        except _UNREADABLE as exc:  # a replica count or maxUnavailable the controller would refuse
            why = f"{root.label} cannot be read: {exc}"
        why = why or self.budgets.blocks(pod.candidate.namespace, _meta(pod.obj).get("labels") or {})
        if why is not None:
            return why
        if self.moves >= self.settings.max_evictions:
            return f"the rate limit: {self.settings.max_evictions} eviction(s) per interval, all planned"
        if self.simulations >= self.settings.max_simulations:
            return (f"not simulated: the pass's {self.settings.max_simulations} simulation(s) went to candidates "
                    "that could gain as much or more; a later pass weighs it")
        return None

    def _weigh(self, pod: _Pod) -> Decision:
        blocked = self._blocked(pod)
        if blocked is not None:
            return self._decide(pod, Verdict.SKIP, blocked)
        self.simulations += 1
        decision = self._simulate(pod)
        assert pod.root is not None
        self.weighed[pod.root.uid] = (pod.candidate.key, decision.verdict)
        if decision.verdict is Verdict.MOVE:
            self.moves += 1
            self.budgets.use(pod.candidate.namespace, _meta(pod.obj).get("labels") or {})
        return decision

    def _decide(self, pod: _Pod, verdict: Verdict, reason: str, target: str | None = None,
                there: int | None = None, chosen: Sequence[str] = ()) -> Decision:
        """``chosen``: every node at the top score; the decision's ``ties`` are those but ``target``."""
        return Decision(pod.candidate, verdict, reason, target, pod.now, pod.now if there is None else there,
                        frozenset(chosen) - {target})

    # ---- the simulation ----

    def _simulate(self, pod: _Pod) -> Decision:
        """Take the pod off the snapshot, schedule it with every other pod in place, and keep it
        where it lands if it moves (else where it was) for the next candidate."""
        info = self.infos[pod.candidate.key]
        here = pod.node.name
        without = self.cluster.unbind(info, here)
        assert pod.ref is not None and pod.prefs is not None
        incoming = _unbound(pod.obj)
        # The model filters and scores every node. The real scheduler stops filtering once it
        # has found numFeasibleNodesToFind feasible nodes (percentageOfNodesToScore: adaptive,
        # 50% - nodes/125, at least 5% and 100 nodes; 10% of a 5,000-node cluster, 500 nodes),
        # starting where its previous cycle stopped, and scores only those: it may bind the pod
        # to a feasible node the model ranks lower. The landing predicted is the best the
        # scheduler could pick; the controller follows where the replacement really goes.
        try:
            result = schedule(incoming, without, options=self.settings.options, preempt=False,
                              default_selector=self.owners.selector(pod.candidate.namespace, pod.ref))
        except _UNREADABLE as exc:
            self.cluster = without.bind(info, here)
            return self._decide(pod, Verdict.SKIP, f"pod {pod.candidate.key} cannot be read: {exc}")
        if not result.chosen:
            self.cluster = without.bind(info, here)
            return self._decide(pod, Verdict.STAY, f"would not schedule at once: {result.message}")
        decision = self._landing(pod, result.chosen)
        self.cluster = without.bind(info, decision.target if decision.verdict is Verdict.MOVE and decision.target
                                    else here)
        return decision

    def _landing(self, pod: _Pod, chosen: Sequence[str]) -> Decision:
        """Where the pod counts as landing: the worst of the nodes tied at the top score, since
        ``selectHost`` picks among them at random; a move must gain ``min_gain`` on each."""
        assert pod.prefs is not None
        prefs, here = pod.prefs, pod.node.name
        target = min(chosen, key=lambda name: (prefs.points(self.nodes[name]), name))
        there = prefs.points(self.nodes[target])
        tied = f", the worst of {len(chosen)} nodes tied at the top score" if len(chosen) > 1 else ""
        if target == here:
            return self._decide(pod, Verdict.STAY, f"would land back on {here}{tied}", target, there, chosen)
        gain = there - pod.now
        if gain < self.settings.min_gain:
            return self._decide(pod, Verdict.STAY, f"would land on {target}{tied}, worth {there} points against "
                                f"{pod.now} on {here}: {gain:+d} is less than --min-gain {self.settings.min_gain}",
                                target, there, chosen)
        doubt = next((n for n in chosen if n in self.blurred), None)
        if doubt is not None:
            return self._decide(pod, Verdict.STAY, f"would land on {doubt}{tied}, whose pod {self.blurred[doubt]} "
                                "the model cannot read", target, there, chosen)
        return self._decide(pod, Verdict.MOVE, f"lands at once on {target}{tied}, worth {there} points against "
                            f"{pod.now} on {here} ({gain:+d})", target, there, chosen)


def _in_turn(pods: Sequence[_Pod], turn: int) -> list[_Pod]:
    """The order of the simulations: the most a candidate could gain first; among candidates
    that could gain as much, by name, starting ``turn`` places on (the snapshot's second), so
    that when the simulations a pass may run or one pod per owner leave some out, the next
    passes start elsewhere and reach each in turn."""
    groups: dict[int, list[_Pod]] = {}
    for pod in pods:
        groups.setdefault(pod.bound, []).append(pod)
    ordered: list[_Pod] = []
    for bound in sorted(groups, reverse=True):
        group = sorted(groups[bound], key=lambda p: p.candidate.key)
        start = turn % len(group)
        ordered += group[start:] + group[:start]
    return ordered


def _claim(pod: Mapping[str, Any]) -> str | None:
    """The first PersistentVolumeClaim the pod's volumes claim, if any."""
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        claim = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if isinstance(claim, Mapping):
            return str(claim.get("claimName") or "")
    return None


def _unbound(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as its replacement meets the scheduler: the same spec without ``nodeName`` (the
    controller makes the replacement from its template, which admission mutated as it did this
    pod's while the policies stay the same)."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    return {**pod, "spec": spec}


def _namespace_labels(namespaces: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(_meta(ns).get("name") or ""): _meta(ns).get("labels") or {} for ns in namespaces}
