"""AdmissionReview wire format (``admission.k8s.io/v1`` and ``v1beta1``): parse and answer.

The wire shapes are handled once, here. ``parse`` turns a request body into a plain
``Request`` (or raises ``BadReview``, which the server maps to HTTP 400); ``respond``
turns what admission decided back into the AdmissionReview answer.
"""
from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook import codec
from webhook.kube.kinds import split_api_version
from webhook.kube.objects import meta
from webhook.kube.warnings import clip_all

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
DEFAULT_NAMESPACE = "default"


class BadReview(ValueError):
    """The body is not a usable AdmissionReview (the server answers HTTP 400)."""


@dataclass(frozen=True, slots=True)
class Request:
    """The parts of an AdmissionReview request that admission needs."""

    uid: str
    api_version: str  # the review's: admission.k8s.io/v1 or /v1beta1
    group: str
    version: str
    kind: str
    operation: str  # CREATE | UPDATE | DELETE | CONNECT
    namespace: str | None
    name: str | None
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None = None
    sub_resource: str | None = None
    dry_run: bool = False


def parse(body: bytes | str | Mapping[str, Any]) -> Request:
    """Parse an AdmissionReview from the raw body (or already decoded JSON)."""
    review = _decode(body)
    api_version = review.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise BadReview(f"apiVersion must be one of {', '.join(API_VERSIONS)}, got {api_version!r}")
    if review.get("kind") != "AdmissionReview":
        raise BadReview(f"kind must be AdmissionReview, got {review.get('kind')!r}")
    req = review.get("request")
    if not isinstance(req, dict):
        raise BadReview("AdmissionReview has no request object")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing or empty")
    obj = _mapping_or_none(req, "object")
    old = _mapping_or_none(req, "oldObject")
    group, version, kind = _request_kind(req, obj or old)
    namespace = req.get("namespace") or meta(obj or old, "namespace")
    return Request(
        uid=uid,
        api_version=str(api_version),
        group=group,
        version=version,
        kind=kind,
        operation=_operation(req, obj=obj, old=old),
        namespace=str(namespace) if namespace else None,
        name=str(req.get("name") or meta(obj or old, "name") or "") or None,
        object=obj,
        old_object=old,
        sub_resource=str(req.get("subResource") or "") or None,
        dry_run=req.get("dryRun") is True,
    )


def _decode(body: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(body, Mapping):
        return body
    try:
        review = codec.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise BadReview(f"body is not JSON: {exc}") from exc
    except RecursionError:
        # Both decoders recurse per level of nesting and stop at Python's recursion limit (about
        # 1,000 levels, fewer the deeper the caller's stack). The API server's decoder allows
        # 10,000 (encoding/json's maxNestingDepth), but no real object nests that deep.
        raise BadReview("body nests arrays and objects too deeply to be read") from None
    if not isinstance(review, dict):
        raise BadReview(f"AdmissionReview must be a JSON object, got a JSON {_json_type(review)}")
    return review


def _json_type(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _mapping_or_none(req: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = req.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise BadReview(f"request.{key} must be an object, got a JSON {_json_type(value)}")


def _request_kind(req: Mapping[str, Any], obj: Mapping[str, Any] | None) -> tuple[str, str, str]:
    """``request.kind``, or the object's own apiVersion/kind when a (hand-made) review omits it."""
    gvk = req.get("kind")
    if isinstance(gvk, dict) and gvk.get("kind"):
        return str(gvk.get("group") or ""), str(gvk.get("version") or ""), str(gvk["kind"])
    if gvk is not None and not isinstance(gvk, dict):
        raise BadReview(f"request.kind must be an object {{group, version, kind}}, got {gvk!r}")
    if obj is None:
        return "", "", ""
    group, version = split_api_version(str(obj.get("apiVersion") or ""))
    return group, version, str(obj.get("kind") or "")


def _operation(req: Mapping[str, Any], *, obj: Any, old: Any) -> str:
    """``request.operation``; when a hand-made review omits it, infer it from the objects.

    The API server always sends an operation. Without one, the objects present say what
    happened: object and oldObject -> UPDATE, only oldObject -> DELETE, otherwise CREATE
    (the usual hand-written review carries just the new object).
    """
    op = req.get("operation")
    if op is None or op == "":
        if obj is not None and old is not None:
            return "UPDATE"
        return "DELETE" if old is not None else "CREATE"
    if op not in OPERATIONS:
        raise BadReview(f"request.operation must be one of {', '.join(OPERATIONS)}, got {op!r}")
    return str(op)


def respond(request: Request, *, patch: bytes, warnings: list[str]) -> dict[str, Any]:
    """The AdmissionReview answer: the request's apiVersion, its uid, always allowed; the
    JSON patch (``patch``, the bytes of its JSON, sent as base64) and ``patchType`` only when
    there is one; the warnings clipped as the API server wants them (``clip_all``)."""
    return _answer(request, patch=base64.b64encode(patch).decode("ascii"), warnings=clip_all(warnings))


def encoded_answer(request: Request, *, patch: bytes, warnings: list[str]) -> bytes:
    """``codec.dumps(respond(...))`` for admission's answer, the body the server sends, made in
    one pass: the encoder writes the patch's base64 itself, an answer holds no float to check
    for NaN, and ``warnings`` are ``Outcome.warnings``, which admission clipped already."""
    return codec.dumps(_answer(request, patch=patch, warnings=warnings), floats=False)


def _answer(request: Request, *, patch: bytes | str, warnings: list[str]) -> dict[str, Any]:
    """The answer with ``patch`` as given: its base64 text, or its bytes for ``codec`` to encode."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = patch
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}


def request_for_object(
    obj: dict[str, Any],
    *,
    operation: str = "CREATE",
    namespace: str | None = None,
    old_object: dict[str, Any] | None = None,
    api_version: str = API_VERSIONS[0],
    uid: str | None = None,
) -> Request:
    """A request as the API server would send it for ``obj`` (dry-run CLI, test suites).

    The namespace is ``namespace``, else the object's own, else ``default`` (what kubectl
    uses when neither the manifest nor the command names one). The uid is derived from
    the object's identity so dry-run output is reproducible.
    """
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}, got {operation!r}")
    group, version = split_api_version(str(obj.get("apiVersion") or ""))
    kind = str(obj.get("kind") or "")
    ns = namespace or meta(obj, "namespace") or DEFAULT_NAMESPACE
    name = meta(obj, "name") or None
    identity = f"{group}/{kind}/{ns}/{name or meta(obj, 'generateName') or ''}/{operation}"
    return Request(
        uid=uid or str(uuid.uuid5(uuid.NAMESPACE_URL, identity)),
        api_version=api_version,
        group=group,
        version=version,
        kind=kind,
        operation=operation,
        namespace=str(ns),
        name=str(name) if name else None,
        object=obj,
        old_object=old_object,
    )
