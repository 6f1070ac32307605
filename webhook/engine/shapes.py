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

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

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


Found = tuple[list[str], str]
"""The steps down to the first field of another shape (innermost first: ``.key`` or ``[index]``)
and what is wrong with it. Admission checks every object it mutates, so the path is spelled out
only for a field that is wrong."""

Inside = Callable[[Any], Found | None]
"""What is wrong inside a value already known to be of its shape's JSON type, or None."""


class Expected(NamedTuple):
    """A shape compiled for a value that is not null: the JSON type it must have, what a value of
    another type is, and the check of what is inside it (None: nothing inside is read).

    The shapes are compiled once, at import, so a check asks no shape what it is. A field's type
    is checked in its parent's loop, not by a call of its own: most fields are strings or lists
    of anything, and a call for each would add a tenth to the check."""

    kind: type
    what: str
    inside: Inside | None


def expected(shape: Shape) -> Expected | None:
    """``shape`` compiled, or None where any value will do."""
    if shape is None:
        return None
    if isinstance(shape, dict):
        fields = tuple((key, rule) for key, inner in shape.items() if (rule := expected(inner)) is not None)
        return Expected(dict, "not a mapping", _fields(fields) if fields else None)
    if isinstance(shape, list):
        element = expected(shape[0])  # None: any element will do, null included
        return Expected(list, "not a list", None if element is None else _elements(element))
    return Expected(shape, "not a string" if shape is str else f"not a {shape.__name__}", None)


def _fields(fields: tuple[tuple[str, Expected], ...]) -> Inside:
    flat = tuple((key, *rule) for key, rule in fields)

    def inside(value: dict[str, Any]) -> Found | None:
        for key, kind, what, deeper in flat:
            item = value.get(key)
            if item is None:  # null counts as absent
                continue
            if not isinstance(item, kind):
                found: Found | None = ([], what)
            elif deeper is None:
                continue
            else:
                found = deeper(item)
            if found is not None:
                found[0].append(f".{key}")
                return found
        return None

    return inside


def _elements(element: Expected) -> Inside:
    kind, what, deeper = element

    def inside(value: list[Any]) -> Found | None:
        for i, item in enumerate(value):
            # The engine reads elements unconditionally: null is refused where a shape is expected.
            if item is None:
                found: Found | None = ([], "null")
            elif not isinstance(item, kind):
                found = [], what
            elif deeper is None:
                continue
            else:
                found = deeper(item)
            if found is not None:
                found[0].append(f"[{i}]")
                return found
        return None

    return inside


def _misfit(value: Any, rule: Expected) -> Found | None:
    """What is wrong with ``value`` (not null) for ``rule``, or None."""
    kind, what, inside = rule
    if not isinstance(value, kind):
        return [], what
    return None if inside is None else inside(value)


_METADATA = expected({"labels": {}, "annotations": {}})
_LABELS = expected({})
_SELECTOR = expected(LABEL_SELECTOR)
_POD_SPEC = expected(POD_SPEC)


def check(obj: dict[str, Any], target: Target) -> None:
    """Raise ``PlacementError`` naming the first field the engine reads that has another type."""
    found = _problem(obj.get("metadata"), _METADATA, ("metadata",))
    for path, rule in ((target.pod_labels, _LABELS), (target.selector, _SELECTOR), (target.pod_spec, _POD_SPEC)):
        if path and not found:
            found = _problem(get_path(obj, path), rule, path)
    if found:
        raise PlacementError(found)


def _problem(value: Any, rule: Expected | None, path: Sequence[str]) -> str | None:
    """What is wrong with ``value``, the field at ``path``, or None."""
    found = None if value is None or rule is None else _misfit(value, rule)
    if found is None:
        return None
    steps, what = found
    return _said(".".join(path) + "".join(reversed(steps)), what)


def _said(where: str, what: str) -> str:
    """The field's own name and what is wrong first: a warning is cut at 120 characters, and a
    pod spec's paths are long."""
    leaf = where.rsplit(".", 1)[-1]
    return f"{leaf} is {what} (at {where})"
