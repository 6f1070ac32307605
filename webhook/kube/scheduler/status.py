"""Filter outcomes in the scheduler's words, and the FitError message built from them.

A ``Failure`` is a non-success ``framework.Status`` of one plugin: its code, its reasons (the
exact strings the plugin returns, which are what ``kubectl describe`` shows) and, beyond what
the scheduler reports, details saying which rule failed on this node.

``fit_error_message`` is ``FitError.Error()`` (pkg/scheduler/framework/types.go): "0/N nodes
are available:" then the PreFilter message, or else each reason counted over the nodes and
the nodes absent from the status map (sorted as strings, "<count> <reason>"), then the
PostFilter (preemption) message. Since v1.30 the PostFilter part is appended as " %v"; before
it was " %v." which printed a double full stop after "...for scheduling.".
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ERROR",
    "UNRESOLVABLE",
    "UNSCHEDULABLE",
    "Failure",
    "Reason",
    "fit_error_message",
]

# framework.Code names, as the scheduler prints them.
UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"
ERROR = "Error"


class Reason:
    """The plugins' reason strings, copied from their sources."""

    # nodeunschedulable.ErrReasonUnschedulable
    UNSCHEDULABLE = "node(s) were unschedulable"
    # nodename.ErrReason
    NODE_NAME = "node(s) didn't match the requested node name"
    # tainttoleration.Filter since kubernetes#134740 (v1.35, and v1.34 patch releases); before it
    # named the taint: "node(s) had untolerated taint {key: value}" (LEGACY_TAINT, Options).
    UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
    LEGACY_TAINT = "node(s) had untolerated taint {{{key}: {value}}}"
    # nodeaffinity.ErrReasonPod and errReasonConflict (a PreFilter status)
    NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
    NODE_AFFINITY_CONFLICT = "pod affinity terms conflict"
    # nodeports.ErrReason
    NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
    # noderesources.fitsRequest
    TOO_MANY_PODS = "Too many pods"
    # interpodaffinity.ErrReason*
    AFFINITY = "node(s) didn't match pod affinity rules"
    ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
    EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
    # podtopologyspread.ErrReasonConstraintsNotMatch / ErrReasonNodeLabelNotMatch
    SPREAD = "node(s) didn't match pod topology spread constraints"
    SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
    # schedule_one.findNodesThatFitPod: the status of nodes a PreFilterResult left out
    PREFILTER_NODES = "node(s) didn't satisfy plugin(s) [{plugins}]"
    # preemption
    NO_VICTIMS = "No preemption victims found for incoming pod"
    NOT_HELPFUL = "Preemption is not helpful for scheduling"
    # v1.35 DefaultPreemption.PodEligibleToPreemptOthers. The master branch (v1.36) checks
    # this earlier, as UnschedulableAndUnresolvable "Preemptor couldn't preempt other victims
    # because of preemptionPolicy: never".
    PREEMPTION_NEVER = "not eligible due to preemptionPolicy=Never."

    @staticmethod
    def insufficient(resource: str) -> str:
        return f"Insufficient {resource}"


@dataclass(frozen=True, slots=True)
class Failure:
    """One plugin's verdict against a node: ``code`` is Unschedulable (preemption may help) or
    UnschedulableAndUnresolvable (it cannot); ``reasons`` as the scheduler reports them."""

    plugin: str
    code: str
    reasons: tuple[str, ...]
    details: tuple[str, ...] = ()

    @property
    def resolvable(self) -> bool:
        """Whether removing pods could make the node fit (the code is Unschedulable)."""
        return self.code == UNSCHEDULABLE

    def __str__(self) -> str:
        extra = f" ({'; '.join(self.details)})" if self.details else ""
        return f"{self.plugin}: {', '.join(self.reasons)}{extra}"


def fit_error_message(num_nodes: int, statuses: Iterable[Failure], absent: Failure | None = None,
                      num_absent: int = 0, prefilter: str = "", postfilter: str = "") -> str:
    """``FitError.Error()``: each node's recorded status counted once per reason."""
    message = f"0/{num_nodes} nodes are available:"
    if prefilter:
        message += f" {prefilter}."
    else:
        counts: Counter[str] = Counter()
        for status in statuses:
            counts.update(status.reasons)
        if absent is not None and num_absent > 0:
            for reason in absent.reasons:
                counts[reason] += num_absent
        histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
        if histogram:
            message += f" {', '.join(histogram)}."
    if postfilter:
        message += f" {postfilter}"
    return message
