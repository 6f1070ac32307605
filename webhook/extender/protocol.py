"""The kube-scheduler extender wire format, ``k8s.io/kube-scheduler/extender/v1``.

The Go types carry no JSON tags, so the scheduler sends the Go field names (``Pod``,
``Nodes``, ``NodeNames``) and decodes answers with Go's case-insensitive field matching
(types_test.go ``TestCompatibility`` round-trips lower-cased JSON). The embedded ``v1.Pod`` and
``v1.NodeList`` are ordinary API JSON. ``HTTPExtender.Filter`` (pkg/scheduler/extender.go)
sends ``NodeNames`` when the extender is ``nodeCacheCapable`` and whole ``Nodes`` otherwise,
and reads the same field back: an answer without it filters every node out. So the answer
always uses the request's form. ``FailedAndUnresolvableNodes`` exists from v1.21 and takes
precedence over ``FailedNodes``; a node rejected for good is listed in both, so older
schedulers still see a reason. ``HostPriorityList`` is a bare JSON array of
``{"Host", "Score"}``; scores are 0..10 (``MinExtenderPriority``/``MaxExtenderPriority``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from webhook import codec

__all__ = ["MAX_SCORE", "BadArgs", "ExtenderArgs", "encode", "filter_result", "parse", "parse_body",
           "priority_list"]

MIN_SCORE, MAX_SCORE = 0, 10


class BadArgs(ValueError):
    """The body is not an ExtenderArgs the extender can answer."""


@dataclass
class ExtenderArgs:
    pod: dict[str, Any]
    names_mode: bool  # NodeNames sent (nodeCacheCapable) rather than Nodes
    node_names: list[str]
    nodes: list[dict[str, Any]] = field(default_factory=list)  # whole Node objects (objects mode)
    # The same Nodes as the request's bytes, when read by ``parse_body``: an answer passes them
    # back as they came, without decoding and encoding megabytes of images and conditions.
    raw_nodes: list[msgspec.Raw] = field(default_factory=list)


def _field(body: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json: an exact match first, else a case-insensitive one."""
    if name in body:
        return body[name]
    lowered = name.lower()
    return next((value for key, value in body.items() if isinstance(key, str) and key.lower() == lowered), None)


def parse(body: Any) -> ExtenderArgs:
    """An ``ExtenderArgs`` from decoded JSON; ``BadArgs`` says what is wrong with it."""
    if not isinstance(body, Mapping):
        raise BadArgs(f"ExtenderArgs must be a JSON object, not {type(body).__name__}")
    pod = _field(body, "Pod")
    if not isinstance(pod, dict):
        raise BadArgs("ExtenderArgs.Pod is missing or not an object")
    names = _field(body, "NodeNames")
    nodes = _field(body, "Nodes")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadArgs("ExtenderArgs.NodeNames must be a list of node names")
        return ExtenderArgs(pod, True, list(names))
    if nodes is None:
        raise BadArgs("ExtenderArgs has neither NodeNames nor Nodes")
    items = nodes.get("items") if isinstance(nodes, Mapping) else None
    if items is None and isinstance(nodes, Mapping):
        items = []  # an empty NodeList marshals with "items": null
    if not isinstance(items, list) or not all(isinstance(n, dict) for n in items):
        raise BadArgs("ExtenderArgs.Nodes must be a NodeList with an items list of Node objects")
    named = [str((n.get("metadata") or {}).get("name") or "") for n in items]
    if any(not name for name in named):
        raise BadArgs("a Node in ExtenderArgs.Nodes has no metadata.name")
    return ExtenderArgs(pod, False, named, list(items))


class _Meta(msgspec.Struct):
    name: str = ""
    labels: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None


class _Spec(msgspec.Struct):
    taints: list[Any] | None = None
    unschedulable: Any = None


class _Status(msgspec.Struct):
    conditions: list[Any] | None = None
    allocatable: dict[str, Any] | None = None


class _SlimNode(msgspec.Struct):
    """What the rules read of a Node; msgspec skips everything else without building it."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)
    status: _Status = msgspec.field(default_factory=_Status)


class _NodeList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class _Args(msgspec.Struct):
    """ExtenderArgs as the scheduler's encoding/json writes it: the Go field names."""

    Pod: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # empty when absent (Raw takes no union)
    Nodes: _NodeList | None = None
    NodeNames: list[str] | None = None


_args_decoder = msgspec.json.Decoder(_Args)
_node_decoder = msgspec.json.Decoder(_SlimNode)


def parse_body(body: bytes) -> ExtenderArgs:
    """An ``ExtenderArgs`` from the request's bytes. The scheduler's own form (Go field names)
    is read with typed decoders that build only what the rules read and keep each Node's bytes;
    anything else (other spellings, which Go would accept too) goes through ``parse``."""
    try:
        typed = _args_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        typed = None
    if typed is None or not typed.Pod or (typed.NodeNames is None and typed.Nodes is None):
        try:
            return parse(codec.loads(body))
        except ValueError as exc:
            if isinstance(exc, BadArgs):
                raise
            raise BadArgs(f"the body is not JSON: {exc}") from None
    pod = codec.loads(bytes(typed.Pod))
    if not isinstance(pod, dict):
        raise BadArgs("ExtenderArgs.Pod is missing or not an object")
    if typed.NodeNames is not None:
        return ExtenderArgs(pod, True, list(typed.NodeNames))
    raws = list((typed.Nodes.items if typed.Nodes is not None else None) or ())
    nodes: list[dict[str, Any]] = []
    for raw in raws:
        try:
            slim = _node_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise BadArgs(f"a Node in ExtenderArgs.Nodes is not a Node object: {exc}") from None
        if not slim.metadata.name:
            raise BadArgs("a Node in ExtenderArgs.Nodes has no metadata.name")
        nodes.append(msgspec.to_builtins(slim))
    return ExtenderArgs(pod, False, [n["metadata"]["name"] for n in nodes], nodes, raws)


def filter_result(args: ExtenderArgs, passed: list[str], failed: Mapping[str, str],
                  unresolvable: Mapping[str, str], error: str = "") -> dict[str, Any]:
    """``ExtenderFilterResult`` in the form of the request."""
    out: dict[str, Any] = {"FailedNodes": {**failed, **unresolvable}, "FailedAndUnresolvableNodes": dict(unresolvable),
                           "Error": error}
    if args.names_mode:
        out["NodeNames"] = passed
    else:
        keep = set(passed)
        originals: list[Any] = args.raw_nodes or args.nodes
        out["Nodes"] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                        "items": [original for node, original in zip(args.nodes, originals, strict=True)
                                  if (node.get("metadata") or {}).get("name") in keep]}
    return out


def error_result(names_mode: bool | None, error: str) -> dict[str, Any]:
    """A filter answer carrying only ``Error``: the scheduler treats it as the extender failing
    (skipped when ``ignorable``), never as "no node fits"."""
    return {"NodeNames" if names_mode is not False else "Nodes": None, "FailedNodes": {},
            "FailedAndUnresolvableNodes": {}, "Error": error}


def priority_list(scores: Mapping[str, int]) -> list[dict[str, Any]]:
    """``HostPriorityList``, scores clamped to 0..10 (the scheduler does not clamp them)."""
    return [{"Host": host, "Score": max(MIN_SCORE, min(MAX_SCORE, int(score)))} for host, score in scores.items()]


_encoder = msgspec.json.Encoder()


def encode(answer: Any) -> bytes:
    """An answer as JSON; Nodes passed back as the request's bytes are written as they came."""
    try:
        return _encoder.encode(answer)
    except (TypeError, ValueError, OverflowError):
        return codec.dumps(answer)  # what msgspec will not write, the standard library does
