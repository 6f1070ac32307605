"""Changes that make a Deployment schedule and its rollout finish, each one verified.

A candidate is a JSON patch of the Deployment: the rollout strategy (``maxSurge: 0,
maxUnavailable: 1``, or ``matchLabelKeys: [pod-template-hash]`` on the required self
anti-affinity terms where the cluster honours it, Kubernetes 1.31+), a required node-affinity
expression widened by the values of the nodes it turned away, one ``nodeSelector`` entry
dropped, one node-affinity expression dropped from its term (or the term's required affinity
made preferred, when the expression is all the term has: dropping a term from the OR would
narrow, and an empty term matches no node), the toleration of a taint that kept nodes out;
and how many more nodes shaped like those that only crowding turned away (pods already there,
resources taken) would let it finish. Every candidate is applied and the whole rollout
simulated again (``scheduler.rollouts``); only those after which it completes are
suggested, with the verdict that proves it.

Suggestions come ranked by how little they change and how likely they are wanted, each with
its reason (``Rank``): a different rollout order before a rule widened, a rule widened before
one dropped, a requirement dropped or an ordinary taint tolerated before nodes are bought,
nodes before a required rule made preferred; and last a taint that keeps nodes for dedicated
hardware (GPUs and other accelerators, dedicated pools, the control plane): legal, but a
web workload on GPU nodes is rarely what anyone wants, unless it asks for that hardware.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

import jsonpatch

from webhook.engine.rollout import blocking_self_terms
from webhook.kube import pointers
from webhook.kube.affinity import PREFERRED, REQUIRED
from webhook.kube.deployment import REVISION_KEY
from webhook.scheduler.cluster import Cluster
from webhook.scheduler.framework import Result
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.scheduler.plan import Options
from webhook.scheduler.rollouts import rolling_update
from webhook.scheduler.taints import find_untolerated

__all__ = ["Rank", "Simulation", "Suggestion", "Verdict", "dedicated_taint", "suggest"]

POD = "/spec/template/spec"
HOSTNAME = "kubernetes.io/hostname"
Patch = list[dict[str, Any]]


class Verdict(Protocol):
    """What a simulation answers: whether every replica placed (and the rollout finished),
    how many replicas there are, and the scheduling cycle of a pod left pending."""

    @property
    def completes(self) -> bool: ...

    @property
    def replicas(self) -> int: ...

    @property
    def result(self) -> Result | None: ...


# A simulation of a (changed) workload on a cluster: the rollout, or placing its replicas.
Simulation = Callable[[Mapping[str, Any], Cluster], Verdict]


class Rank(IntEnum):
    """How much a kind of change changes, and how unlikely it is to be wanted: lower first."""

    ROLLOUT = 0  # how the rollout proceeds, not where pods may run
    WIDEN = 1  # a rule kept, letting in the nodes it turned away
    RELAX = 2  # a requirement dropped, or an ordinary taint tolerated
    ADD_NODES = 3  # the workload unchanged, the cluster grown
    PREFERRED = 4  # every required node-affinity term only preferred
    DEDICATED = 5  # nodes kept for dedicated hardware opened to the workload


@dataclass(frozen=True)
class Candidate:
    """A change to try: what it says, its JSON patch, its rank and why it ranks there."""

    change: str
    patch: Patch
    rank: Rank
    why: str


@dataclass(frozen=True)
class Suggestion:
    """A change and the simulation after it: a JSON patch of the workload, or nodes to add
    to the cluster (``nodes``: their count, each shaped like an existing node); ``rank`` and
    ``why``: how much it changes and how likely it is wanted, in a sentence."""

    change: str
    patch: Patch
    verdict: Verdict
    nodes: int = 0
    rank: Rank = Rank.RELAX
    why: str = ""


# Filters more nodes of an existing, suitable shape can satisfy: a node turned away only by
# these takes the pod in a copy without its pods. The others (node affinity, taints, a cordon,
# a named node) turn away every copy of the node too.
CROWDING = frozenset({"InterPodAffinity", "PodTopologySpread", "NodeResourcesFit", "NodePorts"})


def suggest(deployment: Mapping[str, Any], cluster: Cluster, *, match_label_keys: bool | None = None,
            options: Options | None = None, limit: int = 5, simulate: Simulation | None = None,
            pod_path: str | None = POD, rollout: bool = True, add_nodes: bool = True,
            progress: Callable[[str], None] | None = None) -> list[Suggestion]:
    """Verified changes after which the simulation of ``deployment`` on ``cluster`` completes
    (none when it already does). ``match_label_keys``: whether the cluster honours
    ``matchLabelKeys`` in pod affinity terms (None: unknown, not suggested).

    ``simulate`` defaults to the Deployment's rolling update; ``pod_path`` is the pointer of
    the workload's pod spec (None: it has none to patch, as a Wukong VM), ``rollout`` whether
    strategy changes are candidates (a Deployment's) and ``add_nodes`` whether more nodes can
    help (not for a DaemonSet, which runs a pod on each new node too), so the same search
    serves every kind.
    """
    if simulate is None:
        simulate = lambda obj, snapshot: rolling_update(obj, snapshot, options=options)  # noqa: E731
    stuck = simulate(deployment, cluster)
    if stuck.completes:
        return []
    found: list[Suggestion] = []
    # Tried in rank order (stable: each kind in the order it is generated), the added nodes in
    # their place among them, so that the limit keeps the likeliest changes.
    candidates = sorted(_candidates(deployment, cluster, match_label_keys, pod_path, rollout, stuck.result),
                        key=lambda c: c.rank)
    nodes_pending = add_nodes
    for candidate in candidates:
        if nodes_pending and candidate.rank > Rank.ADD_NODES:
            found += _nodes_needed(deployment, cluster, stuck, simulate, progress)
            nodes_pending = False
        if len(found) >= limit:
            return found
        if progress is not None:
            progress(f"verifying: {candidate.change}")
        try:
            changed = jsonpatch.apply_patch(copy.deepcopy(dict(deployment)), candidate.patch)
        except jsonpatch.JsonPatchException:
            continue  # the object is not shaped as the candidate assumed: not a change to offer
        verdict = simulate(changed, cluster)
        if verdict.completes:
            found.append(Suggestion(candidate.change, candidate.patch, verdict, rank=candidate.rank,
                                    why=candidate.why))
    if nodes_pending and len(found) < limit:
        found += _nodes_needed(deployment, cluster, stuck, simulate, progress)
    return found


def _nodes_needed(deployment: Mapping[str, Any], cluster: Cluster, stuck: Verdict, simulate: Simulation,
                  progress: Callable[[str], None] | None) -> list[Suggestion]:
    if progress is not None:
        progress("counting the nodes that would be missing")
    more = _more_nodes(deployment, cluster, stuck, simulate)
    return [more] if more is not None else []


def _more_nodes(deployment: Mapping[str, Any], cluster: Cluster, stuck: Verdict,
                simulate: Simulation) -> Suggestion | None:
    """The fewest nodes, copied in turn from the nodes only crowding kept the pod off, after
    which the simulation completes."""
    if stuck.result is None:
        return None
    shapes = sorted(name for name, failures in stuck.result.failures.items()
                    if failures and all(f.plugin in CROWDING for f in failures))
    if not shapes:
        return None

    def with_nodes(count: int) -> Verdict:
        extra = [_copy_of(cluster.nodes[shapes[i % len(shapes)]].obj, i) for i in range(count)]
        bigger = Cluster([*cluster.nodes.values(), *(NodeInfo(n) for n in extra)], cluster.namespace_labels,
                         cluster.pdbs)
        return simulate(deployment, bigger)

    # More nodes of these shapes only add room, so the fewest that suffice (at most one per
    # replica: more would not be the answer) is found by doubling and then halving the range,
    # each count simulated in full; the count suggested is one that was simulated to complete.
    low, high = 0, 1
    while high <= stuck.replicas:
        verdict = with_nodes(high)
        if verdict.completes:
            break
        low, high = high, high * 2
    else:
        high = stuck.replicas
        verdict = with_nodes(high)
        if not verdict.completes:
            return None
    while high - low > 1:
        middle = (low + high) // 2
        attempt = with_nodes(middle)
        if attempt.completes:
            high, verdict = middle, attempt
        else:
            low = middle
    like = ", ".join(dict.fromkeys(shapes[i % len(shapes)] for i in range(high)))
    noun = "node" if high == 1 else "nodes"
    return Suggestion(f"add {high} {noun} like {like} (same labels, taints and allocatable)", [], verdict,
                      nodes=high, rank=Rank.ADD_NODES,
                      why=f"the workload stays as it is; the cluster needs {high} more {noun} of a shape it already has")


def _copy_of(node: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A new, empty node shaped like ``node``: its own name and hostname label."""
    meta = node.get("metadata") or {}
    name = f"{meta.get('name', 'node')}-copy-{index}"
    labels = dict(meta.get("labels") or {})
    if HOSTNAME in labels:
        labels[HOSTNAME] = name
    return {**node, "metadata": {**meta, "name": name, "labels": labels}}


def _candidates(deployment: Mapping[str, Any], cluster: Cluster, match_label_keys: bool | None, pod_path: str | None,
                rollout: bool, result: Result | None) -> Iterator[Candidate]:
    spec = deployment.get("spec") or {}
    template = spec.get("template") or {}
    if rollout:
        yield from _strategy(deployment, template, match_label_keys)
    pod_spec = pointers.resolve(deployment, pod_path)[1] if pod_path is not None else None
    if pod_path is None or not isinstance(pod_spec, Mapping):
        return
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        yield Candidate(f"drop nodeSelector {key}={value}",
                        [{"op": "remove", "path": f"{pod_path}/nodeSelector/{_escape(key)}"}], Rank.RELAX,
                        f"drops one placement requirement ({key}={value}); the others stay")
    if result is not None:
        yield from _widen(pod_spec, pod_path, _only_affinity(cluster, result))
    yield from _node_affinity(pod_spec, pod_path)
    yield from _tolerations(pod_spec, cluster, pod_path)


def _only_affinity(cluster: Cluster, result: Result) -> list[NodeInfo]:
    """The nodes that node affinity alone kept the pod off."""
    return [cluster.nodes[name] for name, failures in sorted(result.failures.items())
            if failures and all(f.plugin == "NodeAffinity" for f in failures) and name in cluster.nodes]


def _widen(pod_spec: Mapping[str, Any], pod_path: str, nodes: list[NodeInfo]) -> Iterator[Candidate]:
    """Each required ``In`` expression widened by the values of the nodes only node affinity
    turned away, and each ``NotIn`` narrowed by them: the smallest relaxation that lets those
    nodes in, keeping the rest of the rule."""
    if not nodes:
        return
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED) or {}
    base = f"{pod_path}/affinity/nodeAffinity/{REQUIRED}/nodeSelectorTerms"
    for t, term in enumerate(required.get("nodeSelectorTerms") or ()):
        for e, expr in enumerate((term or {}).get("matchExpressions") or ()):
            key, op = str(expr.get("key", "")), expr.get("operator")
            values = [str(v) for v in expr.get("values") or ()]
            seen = sorted({n.labels[key] for n in nodes if key in n.labels})
            path = f"{base}/{t}/matchExpressions/{e}/values"
            why = f"keeps the rule on {key}, letting in only the values of the nodes it turned away"
            if op == "In" and (extra := [v for v in seen if v not in values]):
                yield Candidate(f"widen nodeSelectorTerms[{t}].matchExpressions[{e}] ({key} In [{', '.join(values)}]) "
                                f"to also allow {', '.join(extra)}",
                                [{"op": "replace", "path": path, "value": values + extra}], Rank.WIDEN, why)
            elif op == "NotIn" and (kept := [v for v in values if v not in seen]) != values and kept:
                yield Candidate(f"narrow nodeSelectorTerms[{t}].matchExpressions[{e}] ({key} NotIn "
                                f"[{', '.join(values)}]) to no longer exclude {', '.join(v for v in values if v in seen)}",
                                [{"op": "replace", "path": path, "value": kept}], Rank.WIDEN, why)


def _strategy(deployment: Mapping[str, Any], template: Mapping[str, Any],
              match_label_keys: bool | None) -> Iterator[Candidate]:
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        yield Candidate("set maxSurge: 0, maxUnavailable: 1 (take one old pod down before each new one)",
                        [{"op": "add", "path": "/spec/strategy",
                          "value": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}],
                        Rank.ROLLOUT, "changes only how the rollout proceeds, not where the pods may run; one "
                        "replica fewer serves while each is replaced")
    if not match_label_keys:
        return
    pod_spec = template.get("spec") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    blocking = blocking_self_terms(pod_spec, labels, (deployment.get("metadata") or {}).get("namespace"))
    anti = ((pod_spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(REQUIRED) or []
    patch: Patch = []
    for index, term in enumerate(anti):
        if not any(term is b for b in blocking) or _selects_key(term.get("labelSelector"), REVISION_KEY):
            continue  # the API server rejects a matchLabelKeys key that the labelSelector has
        keys = [*(term.get("matchLabelKeys") or ()), REVISION_KEY]
        patch.append({"op": "add", "path": f"{POD}/affinity/podAntiAffinity/{REQUIRED}/{index}/matchLabelKeys",
                      "value": keys})
    if patch:
        yield Candidate("scope the required anti-affinity to one revision: matchLabelKeys: [pod-template-hash]", patch,
                        Rank.ROLLOUT, "the replicas of one revision still keep apart; only old and new ones stop "
                        "repelling each other during the rollout")


def _selects_key(selector: Mapping[str, Any] | None, key: str) -> bool:
    selector = selector or {}
    return key in (selector.get("matchLabels") or {}) or any(
        e.get("key") == key for e in selector.get("matchExpressions") or ())


def _node_affinity(pod_spec: Mapping[str, Any], pod_path: str) -> Iterator[Candidate]:
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get(REQUIRED)
    if required is None:
        return
    terms = required.get("nodeSelectorTerms") or []
    base = f"{pod_path}/affinity/nodeAffinity"
    for t, term in enumerate(terms):
        exprs = term.get("matchExpressions") or []
        many = len(exprs) + len(term.get("matchFields") or []) > 1
        for e, expr in enumerate(exprs):
            if many:
                values = [str(v) for v in expr.get("values") or ()]
                shown = f"{expr.get('key')} {expr.get('operator')}" + (f" [{', '.join(values)}]" if values else "")
                yield Candidate(f"drop nodeSelectorTerms[{t}].matchExpressions[{e}] ({shown})",
                                [{"op": "remove", "path": f"{base}/{REQUIRED}/nodeSelectorTerms/{t}/matchExpressions/{e}"}],
                                Rank.RELAX, f"drops one requirement ({shown}); the rest of the term stays")
    # The widest change that keeps the intent: every required term becomes a preference.
    preferred = [{"weight": 100, "preference": term} for term in terms if term]
    ops: Patch = [{"op": "remove", "path": f"{base}/{REQUIRED}"}]
    if node_affinity.get(PREFERRED):
        ops += [{"op": "add", "path": f"{base}/{PREFERRED}/-", "value": p} for p in preferred]
    elif preferred:
        ops.append({"op": "add", "path": f"{base}/{PREFERRED}", "value": preferred})
    yield Candidate("make the required node affinity preferred (weight 100)", ops, Rank.PREFERRED,
                    "the widest change: the terms only weigh in the score, and any node may be chosen")


def _tolerations(pod_spec: Mapping[str, Any], cluster: Cluster, pod_path: str) -> Iterator[Candidate]:
    """A toleration for each distinct taint that is the first one keeping some node out
    (``FindMatchingUntoleratedTaint``), most common first; one that keeps nodes for dedicated
    hardware ranks last, unless the pod requests a resource of that name."""
    as_list = isinstance(pod_spec.get("tolerations"), list)
    tolerations = tuple(t for t in pod_spec.get("tolerations") or () if isinstance(t, Mapping))
    seen: dict[tuple[str, str, str], int] = {}
    for node in cluster.nodes.values():
        taint = find_untolerated(node.taints, tolerations)
        if taint is not None:
            found = (str(taint.get("key", "")), str(taint.get("value") or ""), str(taint.get("effect", "")))
            seen[found] = seen.get(found, 0) + 1
    requested = _requested_resources(pod_spec)
    for (key, value, effect), count in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0])):
        toleration = {"key": key, "operator": "Equal", "value": value, "effect": effect} if value else \
            {"key": key, "operator": "Exists", "effect": effect}
        shown = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
        # Append to a list the pod has; otherwise "add" sets the member, null or absent alike.
        op = {"op": "add", "path": f"{pod_path}/tolerations/-", "value": toleration} if as_list else \
            {"op": "add", "path": f"{pod_path}/tolerations", "value": [toleration]}
        rank, why = _taint_rank(key, value, count, requested)
        yield Candidate(f"tolerate the taint {shown}", [op], rank, why)


# Words in a taint's key or value that mark nodes kept for dedicated hardware or duties.
_DEDICATED = frozenset({"gpu", "gpus", "accelerator", "accelerators", "tpu", "tpus", "dedicated", "master"})


def dedicated_taint(key: str, value: str) -> bool:
    """Whether the taint keeps nodes for dedicated hardware or duties: GPUs and other
    accelerators (``nvidia.com/gpu``, ``cloud.google.com/gke-accelerator``), dedicated pools
    (``dedicated=...``), the control plane (``node-role.kubernetes.io/control-plane``, ``master``)."""
    text = f"{key}={value}".lower()
    return "control-plane" in text or bool(_DEDICATED & set(re.split(r"[^a-z0-9]+", text)))


def _taint_rank(key: str, value: str, count: int, requested: set[str]) -> tuple[Rank, str]:
    nodes = f"{count} node(s) tainted {key}"
    if key in requested:
        return Rank.RELAX, f"the workload requests {key}, which the {nodes} are kept for"
    if dedicated_taint(key, value):
        return Rank.DEDICATED, (f"last resort: the {nodes} are kept for dedicated hardware or duties, which this "
                                f"workload does not ask for")
    return Rank.RELAX, f"lets the pods onto the {nodes}, which keep other pods out today"


def _requested_resources(pod_spec: Mapping[str, Any]) -> set[str]:
    """The resource names the pod's containers request or limit."""
    names: set[str] = set()
    for container in [*(pod_spec.get("containers") or ()), *(pod_spec.get("initContainers") or ())]:
        if not isinstance(container, Mapping):
            continue
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            names.update(str(k) for k in (resources.get(part) or {}))
    return names


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
