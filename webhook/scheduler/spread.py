"""PodTopologySpread: constraints, the PreFilter/Filter state and the PreScore/Score state.

Sources (pkg/scheduler/framework/plugins/podtopologyspread): ``filterTopologySpreadConstraints``
and ``buildDefaultConstraints`` (common.go), ``calPreFilterState``/``updateWithPod``/``Filter``
(filtering.go), ``initPreScoreState``/``PreScore``/``Score``/``NormalizeScore`` (scoring.go).

Domain counts are kept per constraint, not per topology key (the v1.32+ layout: two
constraints on one key with different selectors no longer share counts). The global minimum
is recomputed exactly; the v1.3x ``criticalPaths`` kept only two candidates, which could go
stale after pods were removed during preemption (the newest code keeps it exact too).
NodeInclusionPolicyInPodTopologySpread is GA (v1.33): nodeAffinityPolicy defaults to Honor,
nodeTaintsPolicy to Ignore.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.scheduler.labels import Selector, compile_selector

PLUGIN = "PodTopologySpread"
HOSTNAME = "kubernetes.io/hostname"
# systemDefaultConstraints (plugin.go), used when the pod has no constraints of its own.
SYSTEM_DEFAULTS: tuple[Mapping[str, Any], ...] = (
    {"topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 3},
    {"topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 5},
)


@dataclass(frozen=True, slots=True)
class Constraint:
    """``topologySpreadConstraint``: one constraint with its selector parsed."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


def _parse(raw: Mapping[str, Any], labels: Mapping[str, str], selector: Selector | None) -> Constraint:
    if selector is None:
        selector = compile_selector(raw.get("labelSelector"))
        # matchLabelKeys: the pod's values ANDed in (mergeLabelSetWithSelector); the API server
        # already does this at creation since v1.34, and doing it twice changes nothing.
        extra = [(k, "In", frozenset({labels[k]})) for k in raw.get("matchLabelKeys") or () if k in labels]
        selector = selector.with_requirements(extra)
    min_domains = raw.get("minDomains")
    return Constraint(
        max_skew=int(raw.get("maxSkew") or 0),
        topology_key=str(raw.get("topologyKey", "")),
        selector=selector,
        min_domains=1 if min_domains is None else int(min_domains),
        node_affinity_policy=str(raw.get("nodeAffinityPolicy") or "Honor"),
        node_taints_policy=str(raw.get("nodeTaintsPolicy") or "Ignore"),
    )


def spread_constraints(spec: Mapping[str, Any], labels: Mapping[str, str], action: str,
                       default_selector: Selector | None) -> tuple[Constraint, ...]:
    """The pod's constraints with ``whenUnsatisfiable == action``; without any of its own, the
    system defaults - only when ``default_selector`` (``helper.DefaultSelector``: the selectors
    of the Services, ReplicationController, ReplicaSet or StatefulSet owning the pod) is not empty."""
    own = spec.get("topologySpreadConstraints") or ()
    if own:
        return tuple(_parse(c, labels, None) for c in own if c.get("whenUnsatisfiable") == action)
    if default_selector is None or default_selector.empty:
        return ()
    return tuple(_parse(c, labels, default_selector) for c in SYSTEM_DEFAULTS if c["whenUnsatisfiable"] == action)


