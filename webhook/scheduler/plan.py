"""The pod to schedule, parsed once: what every plugin's PreFilter/PreScore reads of the pod
alone, before any node or other pod is looked at.

A plan is shared by all replicas of one pod template (``signature`` leaves out the names), so
placing 100 replicas parses the spec once.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.kube.affinity import PREFERRED
from webhook.scheduler.labels import compile_selector
from webhook.scheduler.nodeaffinity import (
    PreferredTerms,
    RequiredNodeAffinity,
    prefilter_node_names,
)
from webhook.scheduler.podinfo import PodInfo
from webhook.scheduler.release import Release, since
from webhook.scheduler.resources import (
    Resource,
    pod_requests,
    scorer_requests,
    to_resource,
)
from webhook.scheduler.spread import Constraint, spread_constraints

__all__ = ["DEFAULT_WEIGHTS", "Options", "PodPlan", "signature"]

# The default profile's score plugins and weights (pkg/scheduler/apis/config/v1/default_plugins.go).
# ImageLocality (weight 1) is not modelled: it needs the images each node holds.
DEFAULT_WEIGHTS: Mapping[str, int] = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
}


@dataclass(frozen=True, slots=True)
class Options:
    """Knobs of the modelled profile; the defaults are the kube-scheduler's.

    ``hard_pod_affinity_weight``: InterPodAffinityArgs.hardPodAffinityWeight (default 1).
    ``release``: the kube-scheduler release whose messages the model words (None: the newest);
    ``release.Release`` lists what changed when. ``Options.for_version((1, 20))`` sets it.
    """

    hard_pod_affinity_weight: int = 1
    release: Release | None = None
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))

    @classmethod
    def for_version(cls, version: tuple[int, ...] | Release | None, **knobs: Any) -> Options:
        """Options for a cluster of ``version``: (major, minor), (major, minor, patch), a
        ``Release``, or None for the newest release."""
        if version is None or isinstance(version, Release):
            return cls(release=version, **knobs)
        return cls(release=Release(*version[:3]), **knobs)

    def since(self, first: Release) -> bool:
        """Whether the modelled release is ``first`` or later."""
        return since(self.release, first)


def signature(pod: Mapping[str, Any], default_selector: Mapping[str, Any] | None) -> str:
    """What makes two pods schedule alike: namespace, labels, spec, the default spread selector."""
    meta = pod.get("metadata") or {}
    key = [meta.get("namespace") or "default", meta.get("labels") or {}, pod.get("spec") or {}, default_selector]
    return json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)


class PodPlan:
    """The pod to schedule and everything derived from it alone."""

    __slots__ = (
        "balanced_requests",
        "fit_request",
        "hard_spread",
        "info",
        "least_requests",
        "node_name",
        "preempt_never",
        "preferred",
        "prefilter_nodes",
        "required",
        "soft_spread",
        "spec",
        "system_spread",
        "tolerations",
    )

    def __init__(self, pod: Mapping[str, Any], default_selector: Mapping[str, Any] | None = None) -> None:
        self.info = PodInfo(pod, strict=True)
        spec: Mapping[str, Any] = pod.get("spec") or {}
        self.spec = spec
        self.node_name = str(spec.get("nodeName") or "")
        self.tolerations: tuple[Mapping[str, Any], ...] = tuple(spec.get("tolerations") or ())
        self.required = RequiredNodeAffinity.of(spec)
        preferred = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(PREFERRED)
        # getPodPreferredNodeAffinity: nil when the field is absent, and then PreScore skips.
        self.preferred = None if preferred is None else PreferredTerms(preferred)
        self.prefilter_nodes = prefilter_node_names(spec)
        # NodeResourcesFit PreFilter: computePodResourceRequest (SetMaxResource of PodRequests).
        self.fit_request: Resource = to_resource(pod_requests(spec), at_least_zero=True)
        self.least_requests = scorer_requests(spec, ("cpu", "memory"), non_zero=True)
        self.balanced_requests = scorer_requests(spec, ("cpu", "memory"), non_zero=False)
        default = compile_selector(default_selector) if default_selector is not None else None
        labels = self.info.labels
        self.hard_spread: tuple[Constraint, ...] = spread_constraints(spec, labels, "DoNotSchedule", default)
        self.soft_spread: tuple[Constraint, ...] = spread_constraints(spec, labels, "ScheduleAnyway", default)
        # PreScore's requireAllTopologies is false only for the system default constraints.
        self.system_spread = not spec.get("topologySpreadConstraints")
        self.preempt_never = spec.get("preemptionPolicy") == "Never"

    @property
    def namespace(self) -> str:
        return self.info.namespace

    @property
    def labels(self) -> Mapping[str, str]:
        return self.info.labels
