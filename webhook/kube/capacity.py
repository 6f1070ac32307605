"""Capacity providers: how each marks its spot and on-demand nodes (docs/policies.md, "capacity").

A provider names the node label that says a node's capacity type, the values it writes for
spot and for on-demand nodes (none: it marks only spot nodes, so on-demand is "label absent"),
and the taint it puts on spot nodes, if any. Admission writes ``capacity_requirement`` into
node affinity, and the spot controller and extender classify nodes by the same entry, so a
node is spot to one exactly when it is spot to the other.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["AKS_TOLERATION", "PROVIDERS", "capacity_requirement", "provider"]

# AKS taints its spot node pools kubernetes.azure.com/scalesetpriority=spot:NoSchedule.
AKS_TOLERATION = {
    "key": "kubernetes.azure.com/scalesetpriority",
    "operator": "Equal",
    "value": "spot",
    "effect": "NoSchedule",
}

PROVIDERS: dict[str, dict[str, Any]] = {
    "generic": {"label": "node.kubernetes.io/capacity", "spot": ["spot"], "onDemand": ["on-demand"]},
    "karpenter": {"label": "karpenter.sh/capacity-type", "spot": ["spot"], "onDemand": ["on-demand"]},
    "eks": {"label": "eks.amazonaws.com/capacityType", "spot": ["SPOT"], "onDemand": ["ON_DEMAND"]},
    "gke": {"label": "cloud.google.com/gke-spot", "spot": ["true"], "onDemand": []},
    "aks": {
        "label": "kubernetes.azure.com/scalesetpriority",
        "spot": ["spot"],
        "onDemand": [],
        "toleration": AKS_TOLERATION,
    },
}


def provider(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The provider entry of a ``capacity`` block: a named one (default ``generic``) or the
    explicit ``{label, spot, onDemand, toleration}`` it spells out."""
    chosen = spec.get("provider", "generic")
    if isinstance(chosen, Mapping):
        return chosen
    return PROVIDERS[str(chosen)]


def capacity_requirement(prov: Mapping[str, Any], want: str) -> dict[str, Any]:
    """``spot`` or ``on-demand`` as one node selector requirement; an empty on-demand list
    means the provider marks only spot nodes, so on-demand is "label absent"."""
    values = [str(v) for v in prov.get("spot" if want == "spot" else "onDemand") or ()]
    if not values:
        return {"key": prov["label"], "operator": "DoesNotExist"}
    return {"key": prov["label"], "operator": "In", "values": values}
