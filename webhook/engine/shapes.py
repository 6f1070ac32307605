"""The JSON types of the workload fields the engine reads, checked before a policy is applied.

The API server decodes a built-in object into its Go types before any webhook sees it, so there
an affinity is always an object and a requirement's ``values`` a list. A review sent by hand, or a
custom resource that keeps unknown fields (KubeVirt's schemas do), can carry anything. The engine
reads these fields with ``.get`` and iterates them, so a field of another type is refused here,
naming it, and admission leaves the policy out with that warning (``PlacementError``), as for any
policy it cannot apply, rather than failing with an internal error.

A shape is: a dict (a JSON object whose listed fields have those shapes; others are not read), a
one-element list (a JSON array whose every element has that shape), ``str``, or None (anything).
A field that is null counts as absent, as Go's encoding/json leaves it unset; an element that is
null where an object is expected is refused, since the engine reads elements unconditionally.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.engine.context import PlacementError
from webhook.kube.affinity import PREFERRED, REQUIRED
from webhook.kube.kinds import Target
from webhook.kube.pointers import get_path

Shape = dict[str, Any] | list[Any] | type | None

REQUIREMENT: Shape = {"key": str, "operator": str, "values": [None]}
NODE_TERM: Shape = {"matchExpressions": [REQUIREMENT], "matchFields": [REQUIREMENT]}
LABEL_SELECTOR: Shape = {"matchLabels": {}, "matchExpressions": [REQUIREMENT]}
POD_TERM: Shape = {"labelSelector": LABEL_SELECTOR, "namespaceSelector": LABEL_SELECTOR, "namespaces": [None],
                   "matchLabelKeys": [None], "topologyKey": str}
POD_AFFINITY: Shape = {REQUIRED: [POD_TERM], PREFERRED: [{"podAffinityTerm": POD_TERM}]}
AFFINITY: Shape = {
    "nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [NODE_TERM]}, PREFERRED: [{"preference": NODE_TERM}]},
    "podAffinity": POD_AFFINITY,
    "podAntiAffinity": POD_AFFINITY,
}
POD_SPEC: Shape = {"affinity": AFFINITY, "nodeSelector": {}, "tolerations": [{}]}


def check(obj: dict[str, Any], target: Target) -> None:
    """Raise ``PlacementError`` naming the first field the engine reads that has another type."""
    found = problem(obj.get("metadata"), {"labels": {}, "annotations": {}}, "metadata")
    for path, shape in ((target.pod_labels, {}), (target.selector, LABEL_SELECTOR), (target.pod_spec, POD_SPEC)):
        found = found or (problem(get_path(obj, path), shape, _dotted(path)) if path else None)
    if found:
        raise PlacementError(found)


def _said(where: str, what: str) -> str:
    """The field's own name and what is wrong first: a warning is cut at 120 characters, and a
    pod spec's paths are long."""
    leaf = where.rsplit(".", 1)[-1]
    return f"{leaf} is {what} (at {where})"


def problem(value: Any, shape: Shape, where: str) -> str | None:
    """What is wrong with ``value`` at ``where`` for ``shape``, or None."""
    found = _misshapen(value, shape)
    if found is None:
        return None
    steps, what = found
    return _said(where + "".join(reversed(steps)), what)


def _misshapen(value: Any, shape: Shape) -> tuple[list[str], str] | None:
    """The steps from ``value`` down to the first field of another shape (innermost first:
    ``.key`` or ``[index]``) and what is wrong with it, or None. Admission checks every
    object it mutates, so the path is spelled out only for a field that is wrong."""
    if value is None or shape is None:
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return [], "not a mapping"
        for key, inner in shape.items():
            found = _misshapen(value.get(key), inner)
            if found is not None:
                found[0].append(f".{key}")
                return found
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [], "not a list"
        element = shape[0]
        if element is None:  # any element will do, null included
            return None
        for i, item in enumerate(value):
            # The engine reads elements unconditionally: null is refused where a shape is expected.
            found = ([], "null") if item is None else _misshapen(item, element)
            if found is not None:
                found[0].append(f"[{i}]")
                return found
        return None
    if isinstance(value, shape):
        return None
    return [], "not a string" if shape is str else f"not a {shape.__name__}"


def _dotted(path: Sequence[str]) -> str:
    return ".".join(path)
