"""Filter outcomes in the scheduler's words, and the FitError message built from them.

A ``Failure`` is a non-success ``framework.Status`` of one plugin: its code, its reasons (the
exact strings the plugin returns, which are what ``kubectl describe`` shows) and, beyond what
the scheduler reports, details saying which rule failed on this node.

``fit_error_message`` is ``FitError.Error()`` (pkg/scheduler/framework/types.go): "0/N nodes
are available:" then the PreFilter message, or else each reason counted over the nodes and
the nodes absent from the status map (sorted as strings, "<count> <reason>"), then the
PostFilter (preemption) message. How that reads depends on the release (``release.Release``
lists the changes): before v1.24 the message ends after the reasons (v1.20's
``FitError.Error`` in pkg/scheduler/core/generic_scheduler.go); v1.24 appends the PostFilter
part as " %v"; v1.25 to v1.29 as " %v.", which prints a double full stop after "...for
scheduling."; v1.30 and later as " %v" again. Before v1.25 a PreFilter rejection was counted
on every node like a Filter reason; since, it is said once.

The reasons whose words changed are functions of the release (``Reason.taint``,
``node_affinity``, ``node_name``, ``interpod``); the constants are the newest release's.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from webhook.scheduler.release import GENERIC_TAINT, V1_21, V1_22, V1_24, V1_25, V1_30, Release, since

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
    # nodename.ErrReason; before v1.21 "hostname"
    NODE_NAME = "node(s) didn't match the requested node name"
    NODE_NAME_BEFORE_1_21 = "node(s) didn't match the requested hostname"
    # tainttoleration.Filter since kubernetes#134740 (v1.35.0 and v1.34.2); v1.25 up to it named
    # the taint (TAINT_NAMED), and before v1.25 said it differently (TAINT_BEFORE_1_25).
    UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
    TAINT_NAMED = "node(s) had untolerated taint {{{key}: {value}}}"
    TAINT_BEFORE_1_25 = "node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate"
    # nodeaffinity.ErrReasonPod (before v1.21 without "/selector") and errReasonConflict (a
    # PreFilter status, since v1.24)
    NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
    NODE_AFFINITY_BEFORE_1_21 = "node(s) didn't match Pod's node affinity"
    NODE_AFFINITY_CONFLICT = "pod affinity terms conflict"
    # nodeports.ErrReason
    NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
    # noderesources.fitsRequest
    TOO_MANY_PODS = "Too many pods"
    # interpodaffinity.ErrReason*; before v1.22 each status led with ErrReasonAffinityNotMatch
    AFFINITY_OR_ANTI_BEFORE_1_22 = "node(s) didn't match pod affinity/anti-affinity"
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

    @staticmethod
    def taint(key: str, value: str, release: Release | None) -> str:
        """TaintToleration's reason for the first untolerated taint, as ``release`` words it."""
        if since(release, GENERIC_TAINT):
            return Reason.UNTOLERATED_TAINT
        if since(release, V1_25):
            return Reason.TAINT_NAMED.format(key=key, value=value)
        return Reason.TAINT_BEFORE_1_25.format(key=key, value=value)

    @staticmethod
    def node_affinity(release: Release | None) -> str:
        return Reason.NODE_AFFINITY if since(release, V1_21) else Reason.NODE_AFFINITY_BEFORE_1_21

    @staticmethod
    def node_name(release: Release | None) -> str:
        return Reason.NODE_NAME if since(release, V1_21) else Reason.NODE_NAME_BEFORE_1_21

    @staticmethod
    def interpod(reason: str, release: Release | None) -> tuple[str, ...]:
        """An InterPodAffinity status's reasons: before v1.22 the generic one came first."""
        return (reason,) if since(release, V1_22) else (Reason.AFFINITY_OR_ANTI_BEFORE_1_22, reason)


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
                      num_absent: int = 0, prefilter: str = "", postfilter: str = "",
                      release: Release | None = None) -> str:
    """``FitError.Error()`` of ``release``: each node's recorded status counted once per reason
    (``statuses``, and ``num_absent`` nodes more with the ``absent`` status); a ``prefilter``
    rejection said once (since v1.25: before, the caller counts it on every node); the
    PostFilter message (since v1.24)."""
    message = f"0/{num_nodes} nodes are available:"
    if prefilter and since(release, V1_25):
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
    if postfilter and since(release, V1_24):
        # v1.25 to v1.29 joined the parts with " %v.", a second full stop after the first.
        message += f" {postfilter}" if since(release, V1_30) or not since(release, V1_25) else f" {postfilter}."
    return message
