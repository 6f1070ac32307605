"""The node labels of the resource labeler, and the node terms a policy's ``resources`` read.

``placement-webhook label-nodes`` keeps these labels true on every node (``labeler.values``)
and a policy's ``resources`` (or a Wukong VM's ``resourceAffinity``) becomes node terms over
them (docs/policies.md, "resources"): one table, so what is written is what is read.
"""
from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from webhook import PREFIX
from webhook.kube.nodeterms import Term, dedupe, expr_key
from webhook.kube.quantity import ceil_scaled

__all__ = ["AVAILABLE_LABELS", "USAGE_LABELS", "resource_preferred", "resource_required"]

# Percent of the node's allocatable its pods request, by the resources field that prefers it.
USAGE_LABELS = {"preferredCPU": "cpu-usage", "preferredMemory": "memory-usage", "preferredStorage": "storage-usage"}
# resourceType -> (label, unit the labeler writes in, as a scale of the base unit)
AVAILABLE_LABELS: dict[str, tuple[str, Fraction | int]] = {
    "cpu": ("cpu-available", Fraction(1, 1000)),  # millicores
    "memory": ("memory-available", 2**20),  # MiB
    "storage": ("storage-available", 2**20),  # MiB
    "gpu": ("gpu-available", 1),  # devices
}


def resource_preferred(resources: Mapping[str, Any]) -> list[Term]:
    """``preferredCPU {weight, threshold: "70%"}`` -> preferred ``cpu-usage Lt 70``."""
    out: list[Term] = []
    for field_name, label in USAGE_LABELS.items():
        pref = resources.get(field_name)
        if pref is None:
            continue
        threshold = str(pref.get("threshold", "")).strip().rstrip("%")
        expr = {"key": PREFIX + label, "operator": "Lt", "values": [str(int(threshold))]}
        out.append({"weight": pref.get("weight"), "preference": {"matchExpressions": [expr]}})
    return out


def resource_required(resources: Mapping[str, Any]) -> list[Term]:
    """``requiredResources`` -> one term: ``<type>-available Gt <minAvailable - 1>``.

    Labels are integers in the unit of ``AVAILABLE_LABELS``; "at least q" is "more than
    ceil(q) - 1", so 4Gi is ``memory-available Gt 4095`` and 500m ``cpu-available Gt 499``.
    A ``minAvailable`` that is no quantity raises ``QuantityError``.
    """
    exprs: list[Term] = []
    for req in resources.get("requiredResources") or ():
        label, unit = AVAILABLE_LABELS[str(req.get("resourceType"))]
        amount = ceil_scaled(str(req.get("minAvailable")), unit)
        exprs.append({"key": PREFIX + label, "operator": "Gt", "values": [str(amount - 1)]})
    return [{"matchExpressions": dedupe(exprs, expr_key)}] if exprs else []
