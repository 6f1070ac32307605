"""The PlacementPolicy CustomResourceDefinition, generated from the policy model.

``placementpolicies.placement.novasphere.dev``: cluster-scoped, ``v1alpha1``, short name ``pp``,
``apiextensions.k8s.io/v1`` (served from Kubernetes 1.16; nothing here needs more than 1.19).
Its schema is the model's own (``schema`` and ``lint`` read the same one), made structural by
:mod:`webhook.policy.structural`; the status is the webhook's account of the policy. The chart
ships the output of ``placement-webhook schema --crd`` in ``crds/``, and a test holds the two equal.
"""
from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import TypeAdapter

from webhook import API_GROUP, POLICY_KIND
from webhook.policy import structural, types
from webhook.policy.model import PlacementPolicy, rewrite_objects

__all__ = [
    "CONDITION_READY",
    "KIND",
    "NAME",
    "PLURAL",
    "REASON_LOADED",
    "SHORT_NAMES",
    "VERSION",
    "definition",
    "manifest",
    "openapi_schema",
]

KIND = POLICY_KIND
PLURAL = "placementpolicies"
SINGULAR = "placementpolicy"
NAME = f"{PLURAL}.{API_GROUP}"
VERSION = "v1alpha1"
SHORT_NAMES = ("pp",)
CONDITION_READY = "Ready"
REASON_LOADED = "Loaded"

HEADER = """\
# The PlacementPolicy CustomResourceDefinition, generated from the policy model: do not edit.
# Regenerate with: placement-webhook schema --crd > charts/placement-webhook/crds/placementpolicies.yaml
"""

# Kubernetes' resource.Quantity as CRDs spell it (controller-gen's schema for resource.Quantity):
# an integer, or a string in the quantity grammar. The model's own schema (a string, or any
# number as YAML writes it) has no structural form; this one is what the API server knows.
_QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_KUBERNETES_SCALARS: dict[str, dict[str, Any]] = {
    json.dumps(TypeAdapter(types.Quantity).json_schema(), sort_keys=True): {
        "anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"type": "string", "pattern": _QUANTITY_PATTERN}],
    },
}

_ROOT_DESCRIPTION = (
    "A PlacementPolicy says which workloads it selects (spec.match, spec.exclude) and what placement "
    "they get (spec.placement, spec.scheduling, spec.rollout, spec.vm); the placement-webhook "
    "mutating admission webhook applies it when they are created or updated."
)

# The shape of metav1.Condition (k8s.io/apimachinery/pkg/apis/meta/v1, type Condition), with
# the validation its kubebuilder markers give it.
_CONDITION: dict[str, Any] = {
    "type": "object",
    "description": "One aspect of the policy's state; the Ready condition says whether it is in force.",
    "required": ["type", "status", "lastTransitionTime", "reason", "message"],
    "properties": {
        "type": {"type": "string", "maxLength": 316, "description": "The condition, in CamelCase: Ready.",
                 "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
        "status": {"type": "string", "enum": ["True", "False", "Unknown"],
                   "description": "True, False or Unknown."},
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                               "description": "The metadata.generation the condition was set from."},
        "lastTransitionTime": {"type": "string", "format": "date-time",
                               "description": "When the status last changed."},
        "reason": {"type": "string", "minLength": 1, "maxLength": 1024,
                   "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                   "description": f"Why, in CamelCase: {REASON_LOADED} when the policy is in force."},
        "message": {"type": "string", "maxLength": 32768, "description": (
            "Details for people: when the policy is not in force, its errors, each with its field path.")},
    },
}

_STATUS: dict[str, Any] = {
    "type": "object",
    "description": "What the webhook made of the policy; written by the webhook, never by its author.",
    "properties": {
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                               "description": "The metadata.generation the webhook last loaded."},
        "conditions": {
            "type": "array",
            "description": (f"The policy's conditions. {CONDITION_READY} is True ({REASON_LOADED}) when the "
                            "webhook applies the policy, False with the errors when it does not."),
            "items": _CONDITION,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
        "changedObjects": {"type": "integer", "format": "int64", "minimum": 0,
                           "description": "How many objects the policy changed since it was loaded."},
    },
}

# JSONPath as the API server's table converter reads it (one value per column; a list prints as JSON).
_COLUMNS: list[dict[str, Any]] = [
    {"name": "Order", "type": "integer", "jsonPath": ".spec.order",
     "description": "Policies run by ascending order."},
    {"name": "Kinds", "type": "string", "jsonPath": ".spec.match.kinds",
     "description": "The kinds the policy selects; none: every kind."},
    {"name": "Enforcement", "type": "string", "jsonPath": ".spec.enforcement",
     "description": "patch, or audit (changes nothing)."},
    {"name": "Ready", "type": "string", "jsonPath": f'.status.conditions[?(@.type=="{CONDITION_READY}")].status',
     "description": "Whether the webhook applies the policy."},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def openapi_schema() -> dict[str, Any]:
    """The ``openAPIV3Schema`` of the CRD: the model's spec, structural, and the status."""
    raw = PlacementPolicy.model_json_schema(by_alias=True, mode="validation")
    document = rewrite_objects(raw, _kubernetes_scalar)
    spec = structural.convert(document["properties"]["spec"], document.get("$defs", {}), at="spec")
    return {
        "type": "object",
        "description": _ROOT_DESCRIPTION,
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "placement.novasphere.dev/v1alpha1"},
            "kind": {"type": "string", "description": KIND},
            # The API server validates metadata itself and allows a schema nothing more (ValidateStructural).
            "metadata": {"type": "object"},
            "spec": spec,
            "status": _STATUS,
        },
    }


def definition() -> dict[str, Any]:
    """The CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": API_GROUP,
            "scope": "Cluster",
            "names": {"plural": PLURAL, "singular": SINGULAR, "kind": KIND, "listKind": f"{KIND}List",
                      "shortNames": list(SHORT_NAMES)},
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": openapi_schema()},
                "subresources": {"status": {}},
                "additionalPrinterColumns": _COLUMNS,
            }],
        },
    }


def manifest() -> str:
    """The CRD as the chart ships it: YAML under a header that says how to regenerate it."""
    return HEADER + yaml.dump(definition(), Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


class _Dumper(yaml.SafeDumper):
    """Writes a value the schema uses twice in full, not as a YAML anchor and alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _kubernetes_scalar(node: dict[str, Any]) -> dict[str, Any]:
    """``node``, or Kubernetes' spelling of it where it is a scalar type Kubernetes spells its own way."""
    bare = {k: v for k, v in node.items() if k not in ("description", "title")}
    known = _KUBERNETES_SCALARS.get(json.dumps(bare, sort_keys=True))
    if known is None:
        return node
    return {**known, **{k: v for k, v in node.items() if k == "description"}}
