"""Request bodies and options, decoded as the apiserver's handlers decode them.

  * negotiation.NegotiateInputSerializer: no Content-Type means JSON; an unknown one is 415
    "the body of the request was in an unknown format - accepted media types include: ...".
  * a body that does not decode is 400 via transformDecodeError: "the object provided is
    unrecognized (must be of type Pod): couldn't get version/kind; json parse error: ... (<summary>)",
    a body of another kind is "<Kind> in version \"v1\" cannot be handled as a Pod: ...", and one of
    another served version is "the API version in the data (%s) does not match the expected API
    version (%v)" (handlers/create.go, update.go).
  * dryRun must be "All" and fieldManager at most 128 printable bytes (metav1 validation
    ValidateDryRun / ValidateFieldManager) -> 422 on {Create,Update,Patch,Delete}Options.
  * DeleteOptions come from the body (meta.k8s.io/v1 or the group's own DeleteOptions) or, without
    a body, from the query (handlers/delete.go); propagationPolicy must be Orphan, Background or
    Foreground.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import yaml

from .errors import JSON, FieldError, bad_request, options_invalid, unsupported_media_type
from .managed import validate_manager

BODY_TYPES = ["application/json", "application/yaml"]


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def summarize(data: bytes, limit: int = 30) -> str:
    """handlers summarizeData."""
    if not data:
        return "<empty>"
    if data[:1] == b"{":
        text = data.decode("utf-8", "replace")
        return text[:limit] + " ..." if len(data) > limit else text
    return data[:limit].hex() + (" ..." if len(data) > limit else "")


def decode_object(data: bytes, content_type: str, kind: str) -> JSON:
    mt = media_type(content_type) or "application/json"
    try:
        if mt == "application/json":
            obj = msgspec.json.decode(data)
        elif mt == "application/yaml":
            obj = yaml.safe_load(data.decode("utf-8"))
        else:
            raise unsupported_media_type(BODY_TYPES)
    except (msgspec.DecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise bad_request(f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; "
                          f"json parse error: {exc} ({summarize(data)})") from None
    if not isinstance(obj, dict):
        raise bad_request(f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; "
                          f"json parse error: json: cannot unmarshal {type(obj).__name__} into Go value of type "
                          f"struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string "
                          f"\"json:\\\"kind,omitempty\\\"\" }} ({summarize(data)})")
    check_structure(obj, kind)
    return obj


_GO_TYPES = {str: "string", bool: "bool", int: "number", float: "number", list: "array", dict: "object"}
_META_FIELDS: dict[str, tuple[type, str]] = {
    "name": (str, "string"), "generateName": (str, "string"), "namespace": (str, "string"),
    "resourceVersion": (str, "string"), "uid": (str, "types.UID"), "labels": (dict, "map[string]string"),
    "annotations": (dict, "map[string]string"), "finalizers": (list, "[]string"),
    "ownerReferences": (list, "[]v1.OwnerReference"), "generation": (int, "int64"),
}


def check_structure(obj: JSON, kind: str) -> None:
    """What decoding into the Go type rejects before any handler logic runs (metadata, spec, status)."""
    def fail(value: Any, field: str, go_type: str) -> None:
        got = _GO_TYPES.get(type(value), "value")
        raise bad_request(f"{kind} in version \"{(obj.get('apiVersion') or 'v1').split('/')[-1]}\" cannot be "
                          f"handled as a {kind}: json: cannot unmarshal {got} into Go struct field {field} of type "
                          f"{go_type}")

    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        fail(meta, f"{kind}.metadata", "v1.ObjectMeta")
    for key, (want, go_type) in _META_FIELDS.items():
        value = (meta or {}).get(key)
        if value is None:
            continue
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            fail(value, f"ObjectMeta.metadata.{key}", go_type)
        if want is dict and not all(isinstance(v, str) for v in value.values()):
            fail(next(v for v in value.values() if not isinstance(v, str)), f"ObjectMeta.metadata.{key}", "string")
        if key == "finalizers" and not all(isinstance(v, str) for v in value):
            fail(next(v for v in value if not isinstance(v, str)), "ObjectMeta.metadata.finalizers", "string")
        if key == "ownerReferences" and not all(isinstance(v, dict) for v in value):
            fail(next(v for v in value if not isinstance(v, dict)), "ObjectMeta.metadata.ownerReferences",
                 "v1.OwnerReference")
    for key in ("spec", "status", "deleteOptions"):
        value = obj.get(key)
        if value is not None and not isinstance(value, dict):
            fail(value, f"{kind}.{key}", f"v1.{kind}{key[0].upper()}{key[1:]}")


SCHEME = "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"


def check_type(obj: JSON, res_kind: str, accepted: Sequence[str], expected: str,
               known: Sequence[str] = ()) -> None:
    """The body's GroupVersionKind: one the scheme cannot decode is transformDecodeError's 400, one it
    decodes but the endpoint does not accept is "the API version in the data ... does not match"."""
    api_version, kind = obj.get("apiVersion") or expected, obj.get("kind") or res_kind
    if kind != res_kind or (api_version not in accepted and api_version not in known):
        raise bad_request(f'{kind} in version "{api_version.split("/")[-1]}" cannot be handled as a {res_kind}: '
                          f'no kind "{kind}" is registered for version "{api_version}" in scheme "{SCHEME}"')
    if api_version not in accepted:
        raise bad_request(f"the API version in the data ({api_version}) does not match the expected API version "
                          f"({expected})")


def dry_run(values: Sequence[str], options_kind: str) -> bool:
    for value in values:
        if value != "All":
            raise options_invalid(options_kind, [FieldError("FieldValueNotSupported", "dryRun",
                                                            'supported values: "All"', list(values))])
    return bool(values)


def field_manager(query: Mapping[str, str], options_kind: str) -> str:
    manager = query.get("fieldManager", "")
    errs = validate_manager(manager)
    if errs:
        raise options_invalid(options_kind, errs)
    return manager


def delete_options(data: bytes, content_type: str, query: Mapping[str, str], dry: Sequence[str]) -> JSON:
    if data.strip():
        mt = media_type(content_type) or "application/json"
        if mt not in BODY_TYPES:
            raise unsupported_media_type(BODY_TYPES)
        try:
            options: Any = msgspec.json.decode(data) if mt == "application/json" else yaml.safe_load(data)
        except (msgspec.DecodeError, yaml.YAMLError) as exc:
            raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
        if not isinstance(options, dict):
            raise bad_request("decoded object cannot be converted to DeleteOptions")
    else:
        options = {}
        if "gracePeriodSeconds" in query:
            try:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            except ValueError:
                raise bad_request(f'strconv.ParseInt: parsing "{query["gracePeriodSeconds"]}": invalid syntax') \
                    from None
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in query:
            options["orphanDependents"] = query["orphanDependents"].lower() in ("true", "1")
        if dry:
            options["dryRun"] = list(dry)
    errs: list[FieldError] = []
    policy = options.get("propagationPolicy")
    if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
        errs.append(FieldError("FieldValueNotSupported", "propagationPolicy",
                               'supported values: "Foreground", "Background", "Orphan", "nil"', policy))
    if policy is not None and options.get("orphanDependents") is not None:
        errs.append(FieldError("FieldValueInvalid", "propagationPolicy", "orphanDependents and deletionPropagation "
                               "cannot be both set", policy))
    if errs:
        raise options_invalid("DeleteOptions", errs)
    dry_run(list(options.get("dryRun") or []), "DeleteOptions")
    grace = options.get("gracePeriodSeconds")
    if grace is not None and not isinstance(grace, int):
        raise bad_request("gracePeriodSeconds must be an integer")
    result: JSON = options
    return result

