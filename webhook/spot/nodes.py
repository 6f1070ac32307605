"""What a node is to spot placement: its capacity type, its pool, and whether it is about to be
reclaimed; and what a pod is: critical, interruptible, or neither.

Capacity follows the providers of docs/policies.md ("capacity"): a node is spot when
the provider's label carries a spot value, on-demand when it carries an on-demand value (or,
for providers that mark only spot nodes, when the label is absent), and unknown otherwise.
An unknown never counts as spot or on-demand.

A node is about to be reclaimed (``Detector.reclaim``) when it carries one of the taints the
interruption handlers put on such nodes (aws-node-termination-handler's spot-itn, scheduled
maintenance, ASG lifecycle termination and rebalance recommendation taints; Karpenter's
disruption taint in its v1 and v1beta1 forms; GKE's impending-node-termination taint), a
configured taint, label or annotation, or, for a spot node, a Ready condition that has not
been True for longer than ``notReadySeconds`` (a reclaimed instance stops reporting).

``Detector.signal`` says the same as a ``ReclaimSignal``, shaped like aws-node-termination-
handler's ``monitor.InterruptionEvent`` (pkg/monitor/types.go: Kind, NodeName, StartTime; the
drain's deadline follows from it): which node, what kind of signal, what said so, when it was
seen, and the provider's notice of when the node goes, when it gives one. A configured label or
annotation whose value is a time (RFC 3339, or Unix seconds as the handler's ``action-time``
label writes them) gives that notice; the taints carry none (their values are event ids).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.kube.affinity import PREFERRED, REQUIRED
from webhook.kube.nodes import tolerates
from webhook.kube.times import timestamp
from webhook.spot.config import SpotConfig

__all__ = ["ON_DEMAND", "RECLAIM_TAINTS", "SPOT", "UNKNOWN", "Detector", "PodClass", "ReclaimSignal", "capacity",
           "classify", "node_projection", "pool", "provider_of"]

SPOT, ON_DEMAND, UNKNOWN = "spot", "on-demand", "unknown"
RECLAIM_TAINTS: tuple[str, ...] = (
    "aws-node-termination-handler/spot-itn",
    "aws-node-termination-handler/scheduled-maintenance",
    "aws-node-termination-handler/asg-lifecycle-termination",
    "aws-node-termination-handler/rebalance-recommendation",
    "karpenter.sh/disrupted",  # Karpenter v1
    "karpenter.sh/disruption",  # Karpenter v1beta1 (value "disrupting")
    "cloud.google.com/impending-node-termination",
)
# The kind of each taint's signal: aws-node-termination-handler's own kinds (monitor.SpotITNKind,
# ScheduledEventKind, ASGLifecycleKind, RebalanceRecommendationKind) for its taints.
TAINT_KINDS: dict[str, str] = {
    "aws-node-termination-handler/spot-itn": "SPOT_ITN",
    "aws-node-termination-handler/scheduled-maintenance": "SCHEDULED_EVENT",
    "aws-node-termination-handler/asg-lifecycle-termination": "ASG_LIFECYCLE",
    "aws-node-termination-handler/rebalance-recommendation": "REBALANCE_RECOMMENDATION",
    "karpenter.sh/disrupted": "KARPENTER_DISRUPTION",
    "karpenter.sh/disruption": "KARPENTER_DISRUPTION",
    "cloud.google.com/impending-node-termination": "IMPENDING_TERMINATION",
}
CONFIGURED, NOT_READY = "CONFIGURED", "NOT_READY"


@dataclass(frozen=True)
class ReclaimSignal:
    """A node about to be reclaimed. ``when``: Unix time the signal was seen (for a drain that
    resumes, when the drain began); ``notice``: when the provider says the node goes, if it
    says."""

    node: str
    kind: str
    source: str  # what said so, in words: "taint aws-node-termination-handler/spot-itn"
    when: float
    notice: float | None = None

    def deadline(self, timeout: float) -> float:
        """When the drain gives up: the provider's notice, else ``timeout`` seconds after ``when``."""
        return self.notice if self.notice is not None else self.when + timeout


def _meta(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return node.get("metadata") or {}


def capacity(node: Mapping[str, Any], config: SpotConfig) -> str:
    """spot, on-demand or unknown, by the configured provider's label."""
    label, spot, on_demand = config.capacity_rules()
    labels = _meta(node).get("labels") or {}
    value = labels.get(label)
    if value is not None and str(value) in spot:
        return SPOT
    if (value is None and not on_demand) or (value is not None and str(value) in on_demand):
        return ON_DEMAND
    return UNKNOWN


def pool(node: Mapping[str, Any], config: SpotConfig) -> tuple[str, ...]:
    """The spot pool a node belongs to: its values of the configured pool labels."""
    labels = _meta(node).get("labels") or {}
    return tuple([str(labels.get(key, "")) for key in config.interruptions.pool_labels])  # a list: faster


class Detector:
    """Says whether, and why, a node is about to be reclaimed."""

    def __init__(self, config: SpotConfig) -> None:
        self.config = config
        self.taints = frozenset((*RECLAIM_TAINTS, *config.reclaim.taints))

    def reclaim(self, node: Mapping[str, Any], now: float) -> str | None:
        """The reason the node is about to be reclaimed, or None. ``now`` is Unix time."""
        reason = self.fixed(node)
        if reason is not None:
            return reason
        return self.not_ready(self.not_ready_since(node), now)

    def signal(self, node: Mapping[str, Any], now: float) -> ReclaimSignal | None:
        """``reclaim`` as a ``ReclaimSignal`` seen at ``now`` (Unix time)."""
        name = str(_meta(node).get("name") or "")
        found = self._match(node)
        if found is not None:
            where, key, value = found
            kind = TAINT_KINDS.get(key, CONFIGURED) if where == "taint" else CONFIGURED
            notice = _notice(value) if where != "taint" else None
            return ReclaimSignal(name, kind, f"{where} {key}", now, notice)
        reason = self.not_ready(self.not_ready_since(node), now)
        return None if reason is None else ReclaimSignal(name, NOT_READY, reason, now)

    def fixed(self, node: Mapping[str, Any]) -> str | None:
        """A reclaim signal that does not depend on the time: a taint, a label, an annotation."""
        found = self._match(node)
        return None if found is None else f"{found[0]} {found[1]}"

    def _match(self, node: Mapping[str, Any]) -> tuple[Literal["taint", "label", "annotation"], str, Any] | None:
        """Where the signal is (taint, label or annotation), its key and its value."""
        # ``type(x) is dict`` first: the ABC check behind ``isinstance(x, Mapping)`` costs more
        # than the rest of the test, and this runs for thousands of nodes.
        for taint in (node.get("spec") or {}).get("taints") or ():
            if (type(taint) is dict or isinstance(taint, Mapping)) and taint.get("key") in self.taints:
                return "taint", str(taint.get("key")), taint.get("value")
        meta = _meta(node)
        reclaim = self.config.reclaim
        if reclaim.labels:
            labels = meta.get("labels") or {}
            for key, value in reclaim.labels.items():
                if key in labels and (value == "" or str(labels[key]) == value):
                    return "label", key, labels[key]
        if reclaim.annotations:
            annotations = meta.get("annotations") or {}
            for key, value in reclaim.annotations.items():
                if key in annotations and (value == "" or str(annotations[key]) == value):
                    return "annotation", key, annotations[key]
        return None

    def not_ready_since(self, node: Mapping[str, Any]) -> float | None:
        """For a spot node whose Ready condition is not True: since when (Unix time)."""
        if self.config.reclaim.not_ready_seconds is None:
            return None
        for condition in (node.get("status") or {}).get("conditions") or ():
            if (type(condition) is dict or isinstance(condition, Mapping)) and condition.get("type") == "Ready" \
                    and condition.get("status") != "True":
                since = timestamp(condition.get("lastTransitionTime"))
                # The capacity last: it is the costlier check, and most nodes are Ready.
                if since is not None and capacity(node, self.config) == SPOT:
                    return since
        return None

    def not_ready(self, since: float | None, now: float) -> str | None:
        limit = self.config.reclaim.not_ready_seconds
        if since is None or limit is None or now - since <= limit:
            return None
        return f"spot node not Ready for {int(now - since)} s"


def _notice(value: Any) -> float | None:
    """A label's or annotation's value read as the time the node goes: RFC 3339, or whole Unix
    seconds; None when it is neither (a plain marker such as "true")."""
    text = str(value).strip()
    if text.isdigit() and len(text) >= 9:  # Unix seconds since 1973: not a count or a flag
        return float(text)
    return timestamp(text)


@dataclass(frozen=True)
class PodClass:
    """critical: must run on demand; interruptible: welcome on spot; ``why`` says which rule."""

    critical: bool
    interruptible: bool
    why: str


def classify(pod: Mapping[str, Any], config: SpotConfig,
             priority_class: Mapping[str, Mapping[str, Any]] | None = None) -> PodClass:
    """Critical by priority (``spec.priority``, which the Priority admission plugin always
    sets, else the named PriorityClass's value) or annotation; interruptible by annotation,
    by tolerating the provider's spot taint, or by asking for spot in its node affinity or
    nodeSelector (what a ``capacity: spot`` policy writes)."""
    meta, spec = _meta(pod), pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    priority = spec.get("priority")
    if not isinstance(priority, int) or isinstance(priority, bool):
        named = (priority_class or {}).get(str(spec.get("priorityClassName") or ""))
        priority = named.get("value") if named else None
    if str(annotations.get(config.critical.annotation, "")).lower() == "true":
        return PodClass(True, False, f"annotation {config.critical.annotation}")
    if isinstance(priority, int) and priority >= config.critical.priority_threshold:
        return PodClass(True, False, f"priority {priority} >= {config.critical.priority_threshold}")
    if str(annotations.get(config.interruptible.annotation, "")).lower() == "true":
        return PodClass(False, True, f"annotation {config.interruptible.annotation}")
    prov = provider_of(config)
    spot_taint = _taint_of(prov.get("toleration"))
    if spot_taint and any(tolerates(t, spot_taint) for t in spec.get("tolerations") or () if isinstance(t, Mapping)):
        return PodClass(False, True, "tolerates the spot taint")
    if _asks_for_spot(spec, prov):
        return PodClass(False, True, "its node affinity asks for spot")
    return PodClass(False, False, "")


def _asks_for_spot(spec: Mapping[str, Any], prov: Mapping[str, Any]) -> bool:
    label, spot = prov["label"], {str(v) for v in prov.get("spot") or ()}
    if str((spec.get("nodeSelector") or {}).get(label, "")) in spot:
        return True
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    terms: list[Mapping[str, Any]] = list(((node_affinity.get(REQUIRED) or {}).get("nodeSelectorTerms")) or ())
    terms += [(p or {}).get("preference") or {} for p in node_affinity.get(PREFERRED) or ()]
    return any(e.get("key") == label and e.get("operator") == "In" and spot & {str(v) for v in e.get("values") or ()}
               for term in terms for e in (term or {}).get("matchExpressions") or ())


def _taint_of(toleration: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The taint a provider puts on its spot nodes, which its toleration is written for."""
    if not toleration:
        return None
    return {"key": toleration.get("key"), "value": toleration.get("value"), "effect": toleration.get("effect")}


def provider_of(config: SpotConfig) -> Mapping[str, Any]:
    """The configured provider's table entry: label, spot and on-demand values, toleration."""
    return config.provider_entry()


def node_projection(config: SpotConfig, keep: tuple[str, ...] = ()) -> Any:
    """The cluster view's node projection plus what spot decisions read: the annotations the
    reclaim detector is configured to watch (and ``keep``), and the Ready condition's
    lastTransitionTime (which ``project_node`` keeps)."""
    from webhook.cluster.cache import project_node

    watched = (*config.reclaim.annotations, *keep)

    def project(obj: Mapping[str, Any]) -> dict[str, Any]:
        out = project_node(obj)
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        kept = {k: annotations[k] for k in watched if k in annotations}
        if kept:
            out["metadata"]["annotations"] = kept
        return out

    return project
