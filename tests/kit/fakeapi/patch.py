"""PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch.

Error mapping follows staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go:
  * jsonpatch.DecodePatch error -> 400 BadRequest; patchObj.Apply error -> NewGenericServerResponse(422)
    (reason Invalid, message "the server rejected our request due to an error in our request").
  * merge patch of a non-JSON document -> 400.
  * strategic merge: interpretStrategicMergePatchError maps ErrBadJSONDoc & co. to 400; an unknown
    ``$patch`` value is mergepatch.ErrBadPatchType, a plain error -> 500 with reason unknown.

Strategic merge patch (apimachinery/pkg/util/strategicpatch) uses the Go struct tags of the
patched type. The table below holds the ``patchStrategy``/``patchMergeKey`` tags of the fields this
fake's users touch (k8s.io/api/core/v1/types.go and friends); every other list is replaced whole,
which is also what happens for lists without a strategy. Notably ``NodeSpec.Taints`` has no
patchStrategy (``+listType=atomic``), so a strategic patch of ``spec.taints`` replaces the list, as
does ``PodSpec.Tolerations``.
"""
from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import msgspec

from .errors import JSON, bad_request, generic, plain_error

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
SUPPORTED = [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH]

# path (dotted, list items as "[]") -> merge key, or "" for a merged list of primitives
_POD_SPEC = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "imagePullSecrets": "name", "hostAliases": "ip",
    "containers[].env": "name", "containers[].ports": "containerPort", "containers[].volumeMounts": "mountPath",
    "containers[].volumeDevices": "devicePath",
    "initContainers[].env": "name", "initContainers[].ports": "containerPort",
    "initContainers[].volumeMounts": "mountPath",
}
_META = {"metadata.ownerReferences": "uid", "metadata.finalizers": ""}
_CONDITIONS = {"status.conditions": "type"}
MERGE_KEYS: dict[str, dict[str, str]] = {
    "Pod": {**_META, **{f"spec.{k}": v for k, v in _POD_SPEC.items()}, **_CONDITIONS,
            "status.podIPs": "ip"},
    "Node": {**_META, **_CONDITIONS, "status.addresses": "type", "spec.podCIDRs": ""},
    "Namespace": {**_META, **_CONDITIONS},
    "PodDisruptionBudget": {**_META, **_CONDITIONS},
    "Deployment": {**_META, **{f"spec.template.spec.{k}": v for k, v in _POD_SPEC.items()}, **_CONDITIONS},
    "ReplicaSet": {**_META, **{f"spec.template.spec.{k}": v for k, v in _POD_SPEC.items()}, **_CONDITIONS},
}
_DEFAULT_KEYS = _META


def decode_patch(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise bad_request(f"error decoding patch: {exc}") from None


def apply(patch_type: str, original: JSON, body: bytes, kind: str) -> JSON:
    if patch_type == JSON_PATCH:
        return json_patch(original, body)
    patch = decode_patch(body)
    if patch_type == MERGE_PATCH:
        if not isinstance(patch, dict):  # jsonpatch.ErrBadJSONPatch
            raise bad_request("Invalid JSON Patch")
        merged: JSON = merge_patch(original, patch)
        return merged
    if not isinstance(patch, dict):  # mergepatch.ErrBadJSONDoc
        raise bad_request("invalid JSON document")
    return strategic_merge(original, patch, MERGE_KEYS.get(kind, _DEFAULT_KEYS))


def json_patch(original: JSON, body: bytes) -> JSON:
    try:
        ops = msgspec.json.decode(body)
        if not isinstance(ops, list):
            raise ValueError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        patch = jsonpatch.JsonPatch(ops)
    except (msgspec.DecodeError, ValueError, jsonpatch.JsonPatchException) as exc:
        raise bad_request(str(exc)) from None
    if len(ops) > 10000:  # maxJSONPatchOperations
        raise plain_error(f"Request entity too large: The allowed maximum operations in a JSON patch is 10000, "
                          f"got {len(ops)}", 413)
    try:
        result = patch.apply(copy.deepcopy(original))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError, TypeError,
            ValueError) as exc:
        raise generic(422, str(exc)) from None
    if not isinstance(result, dict):
        raise generic(422, "patch did not produce an object")
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge(original: JSON, patch: JSON, keys: dict[str, str]) -> JSON:
    merged: JSON = _merge_map(original, patch, "", keys)
    return merged


def _merge_map(original: Any, patch: JSON, path: str, keys: dict[str, str]) -> Any:
    directive = patch.get("$patch")
    if directive is not None:
        # strategicpatch handleDirectiveInMergeMap
        if directive == "replace":
            return {k: v for k, v in patch.items() if k != "$patch"}
        if directive == "delete":
            return {}
        raise plain_error(f"unknown patch type: {directive} in map: {_go_map(patch)}")
    out = copy.copy(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys",):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(out.get(name), list) and isinstance(value, list):
                out[name] = [v for v in out[name] if v not in value]
            continue
        if key.startswith("$"):
            continue  # unknown directives in keys are dropped by the typed decode
        sub = f"{path}.{key}" if path else key
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = _merge_map(out.get(key), value, sub, keys)
        elif isinstance(value, list) and sub in keys and isinstance(out.get(key), list):
            out[key] = _merge_list(out[key], value, sub, keys)
        else:
            out[key] = _strip(value)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_list(original: list[Any], patch: list[Any], path: str, keys: dict[str, str]) -> list[Any]:
    merge_key = keys[path]
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [_strip(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if not merge_key:  # a set of primitives: union, original order first
        out = list(original)
        out.extend(v for v in patch if v not in out)
        return out
    out = [copy.copy(item) for item in original]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"map: {_go_map(item) if isinstance(item, dict) else item} does not contain "
                              f"declared merge key: {merge_key}")
        index = next((i for i, cur in enumerate(out)
                      if isinstance(cur, dict) and cur.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
            continue
        if index is None:
            out.append(_strip(item))
        else:
            out[index] = _merge_map(out[index], item, f"{path}[]", keys)
    return out


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _go_map(value: JSON) -> str:
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(value.items())) + "]"
