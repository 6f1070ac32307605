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
    pod: dict[str, Any]  # what the rules read of the Pod, of the types they expect (``_Pod``)
    names_mode: bool  # NodeNames sent (nodeCacheCapable) rather than Nodes
    node_names: list[str]
    nodes: list[dict[str, Any]] = field(default_factory=list)  # what the rules read of each Node (objects mode)
    # The same Nodes as they came (the request's bytes, when read by ``parse_body``): an answer
    # passes them back unchanged, without decoding and encoding megabytes of images and conditions.
    raw_nodes: list[Any] = field(default_factory=list)


# --- what the rules read, typed -------------------------------------------------------------------------------
# Every part of the Pod and the Nodes that the rules (webhook/spot/nodes.py) read is decoded into
# these types, so input of another type is refused here with the path of the field, as Go's
# encoding/json refuses it for the Pod and Node types, instead of failing in the rules. What they do not read
# is skipped, whatever its type. Every field takes null too, as Go's encoding/json does (it leaves
# the field unset).


class _Struct(msgspec.Struct, omit_defaults=True):
    pass


class _Requirement(_Struct):
    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class _Term(_Struct):
    matchExpressions: list[_Requirement] | None = None  # noqa: N815 - the API's field names


class _Selector(_Struct):
    nodeSelectorTerms: list[_Term] | None = None  # noqa: N815


class _Preferred(_Struct):
    weight: int | None = None
    preference: _Term | None = None


class _NodeAffinity(_Struct):
    requiredDuringSchedulingIgnoredDuringExecution: _Selector | None = None  # noqa: N815
    preferredDuringSchedulingIgnoredDuringExecution: list[_Preferred] | None = None  # noqa: N815


class _Affinity(_Struct):
    nodeAffinity: _NodeAffinity | None = None  # noqa: N815


class _Toleration(_Struct):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None


class _PodMeta(_Struct):
    name: str | None = None
    namespace: str | None = None
    annotations: dict[str, str] | None = None


class _PodSpec(_Struct):
    priority: int | None = None
    priorityClassName: str | None = None  # noqa: N815
    tolerations: list[_Toleration] | None = None
    nodeSelector: dict[str, str] | None = None  # noqa: N815
    affinity: _Affinity | None = None


class _Pod(_Struct):
    metadata: _PodMeta | None = None
    spec: _PodSpec | None = None


class _Meta(_Struct):
    name: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class _Taint(_Struct):
    key: str | None = None
    value: str | None = None
    effect: str | None = None


class _Spec(_Struct):
    taints: list[_Taint] | None = None


class _Condition(_Struct):
    type: str | None = None
    status: str | None = None
    lastTransitionTime: str | None = None  # noqa: N815


class _Status(_Struct):
    conditions: list[_Condition] | None = None


class _SlimNode(_Struct):
    """What the rules read of a Node; msgspec skips everything else without building it."""

    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: _Status | None = None


class _NodeList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class _Args(msgspec.Struct):
    """ExtenderArgs as the scheduler's encoding/json writes it: the Go field names."""

    Pod: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # empty when absent (Raw takes no union)
    Nodes: _NodeList | None = None
    NodeNames: list[str] | None = None


_args_decoder = msgspec.json.Decoder(_Args)
_pod_decoder = msgspec.json.Decoder(_Pod)
_node_decoder = msgspec.json.Decoder(_SlimNode)
TOO_DEEP = "the body nests arrays and objects too deeply to be read"


def _problem(exc: msgspec.ValidationError, where: str) -> str:
    """msgspec's words, with the field it names (``$``: what was decoded) written from ``where``."""
    text, _, path = str(exc).partition(" - at `$")
    return f"{where}{path.rstrip('`')}: {text[:1].lower()}{text[1:]}"


def _pod(value: Any) -> dict[str, Any]:
    """What the rules read of a decoded Pod (``parse``)."""
    if not isinstance(value, dict):
        raise BadArgs("ExtenderArgs.Pod is missing or not an object")
    try:
        return msgspec.to_builtins(msgspec.convert(value, _Pod))  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        raise BadArgs(_problem(exc, "ExtenderArgs.Pod")) from None


def _node(value: Any, index: int) -> dict[str, Any]:
    """What the rules read of a decoded Node (``parse``)."""
    try:
        slim = msgspec.convert(value, _SlimNode)
    except msgspec.ValidationError as exc:
        raise BadArgs(_problem(exc, f"ExtenderArgs.Nodes.items[{index}]")) from None
    return _named(slim, index)


def _named(slim: _SlimNode, index: int) -> dict[str, Any]:
    if slim.metadata is None or not slim.metadata.name:
        raise BadArgs(f"a Node in ExtenderArgs.Nodes has no metadata.name (items[{index}])")
    return msgspec.to_builtins(slim)  # type: ignore[no-any-return]


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
    pod = _pod(_field(body, "Pod"))
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
    slim = [_node(item, index) for index, item in enumerate(items)]
    return ExtenderArgs(pod, False, [n["metadata"]["name"] for n in slim], slim, list(items))


def parse_body(body: bytes) -> ExtenderArgs:
    """An ``ExtenderArgs`` from the request's bytes. The scheduler's own form (Go field names)
    is read with typed decoders that build only what the rules read and keep each Node's bytes;
    anything else (other spellings, which Go would accept too) goes through ``parse``.

    Nesting deeper than Python's recursion limit (about 1,000 levels) is refused as bad input:
    the decoders recurse per level, and no Pod or Node nests that deep."""
    try:
        return _parse_body(body)
    except RecursionError:
        raise BadArgs(TOO_DEEP) from None


def _parse_body(body: bytes) -> ExtenderArgs:
    try:
        typed = _args_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        typed = None
    if typed is None or not typed.Pod or (typed.NodeNames is None and typed.Nodes is None):
        try:
            decoded = codec.loads(body)
        except ValueError as exc:
            raise BadArgs(f"the body is not JSON: {exc}") from None
        return parse(decoded)
    try:
        pod = msgspec.to_builtins(_pod_decoder.decode(typed.Pod))
    except msgspec.ValidationError as exc:
        raise BadArgs(_problem(exc, "ExtenderArgs.Pod")) from None
    except msgspec.DecodeError:  # valid JSON (the whole body decoded), but not an object
        raise BadArgs("ExtenderArgs.Pod is missing or not an object") from None
    if typed.NodeNames is not None:
        return ExtenderArgs(pod, True, list(typed.NodeNames))
    raws = list((typed.Nodes.items if typed.Nodes is not None else None) or ())
    nodes: list[dict[str, Any]] = []
    for index, raw in enumerate(raws):
        try:
            slim = _node_decoder.decode(raw)
        except msgspec.ValidationError as exc:
            raise BadArgs(_problem(exc, f"ExtenderArgs.Nodes.items[{index}]")) from None
        except msgspec.DecodeError:  # valid JSON (the whole body decoded), but not an object
            raise BadArgs(f"ExtenderArgs.Nodes.items[{index}] is not a Node object") from None
        nodes.append(_named(slim, index))
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
        originals = args.raw_nodes or args.nodes
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
