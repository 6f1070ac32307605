"""AdmissionReviews as the API server sends them, built from the production wire model.

``review.request_for_object`` makes the ``Request`` admission sees; ``admission_review``
writes it out in the wire shape ``review.parse`` reads, so the two can never drift apart.
"""
from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from webhook.engine import review

USER = {"username": "kubernetes-admin", "groups": ["system:masters"]}


def admission_review(
    obj: dict[str, Any] | None,
    *,
    api_version: str = review.API_VERSIONS[0],
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    namespace: str | None = None,
    dry_run: bool = False,
    sub_resource: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """The AdmissionReview of ``obj`` (``old`` for UPDATE and DELETE's oldObject)."""
    subject = obj if obj is not None else old
    assert subject is not None, "a review needs an object or an old object"
    req = review.request_for_object(
        subject, operation=operation, namespace=namespace, old_object=old, api_version=api_version,
        uid=uid or str(uuid.uuid4()),
    )
    return to_wire(req, obj=obj, dry_run=dry_run, sub_resource=sub_resource)


def to_wire(
    req: review.Request, *, obj: dict[str, Any] | None, dry_run: bool = False, sub_resource: str | None = None
) -> dict[str, Any]:
    """A ``Request`` in the wire shape of ``admission.k8s.io`` (what ``review.parse`` reads)."""
    resource = req.kind.lower() + "s"
    request: dict[str, Any] = {
        "uid": req.uid,
        "kind": {"group": req.group, "version": req.version, "kind": req.kind},
        "resource": {"group": req.group, "version": req.version, "resource": resource},
        "namespace": req.namespace,
        "name": req.name,
        "operation": req.operation,
        "userInfo": USER,
        "object": obj,
        "oldObject": req.old_object,
        "dryRun": dry_run,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": req.api_version, "kind": "AdmissionReview", "request": request}


def decode_patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch of an AdmissionReview answer (which must carry one)."""
    response = answer["response"]
    assert response.get("patchType") == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch
