"""The validating webhook of PlacementPolicies (``POST /validate-policy``): lint at ``kubectl apply``.

A PlacementPolicy being created or updated is read as the server reads it from the cluster
(``policy.sources.document``) and refused, with lint's messages (each at its field path, with
"did you mean" where a name is close to a known one), when

* the loader refuses it (the errors ``placement-webhook lint`` prints for it);
* a policy file in force defines its name (a name defined twice is in force nowhere);
* it conflicts with a policy in force: both can select one object and set a scheduling field
  differently, or their required node affinities, ANDed, match no node (lint's conflicts).

Lint's other findings (parts of the policy that can never apply) are sent back as warnings,
which kubectl prints. Everything else is allowed: any other resource or subresource, any other
operation (the webhook fails open for all but PlacementPolicies), and an UPDATE that leaves the
spec as it was, so that an existing policy's labels or finalizers can change whatever its spec
says (its status says what is wrong), as Kubernetes' own validation lets unchanged fields be.
Nothing here reads the cluster: the set in force is in memory, and until one is loaded the
policy is checked on its own, never refused for what the server does not know.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook import API_GROUP, POLICY_KIND
from webhook.engine import conflicts as engine_conflicts
from webhook.engine import review
from webhook.kube.kinds import BUILTIN, Targets
from webhook.kube.warnings import clip_all
from webhook.policy import crd, lint, loader
from webhook.policy.errors import LoadError, format_path
from webhook.policy.loader import Loaded
from webhook.policy.policyset import PolicySet
from webhook.policy.sources import NAME_PATH, Assembled, document

__all__ = ["Verdict", "answer", "check", "log_fields"]

GUARDED_OPERATIONS = ("CREATE", "UPDATE")


@dataclass(frozen=True)
class Verdict:
    """Allowed or not; the errors that refuse it, each at its field; the warnings sent back;
    and why it was not checked at all (``skipped``: not a PlacementPolicy CREATE or UPDATE)."""

    allowed: bool
    name: str = ""
    errors: tuple[LoadError, ...] = ()
    duplicate: bool = False
    warnings: tuple[str, ...] = field(default=())
    skipped: str = ""


def check(request: review.Request, in_force: Assembled | None, *, targets: Targets = BUILTIN) -> Verdict:
    """lint's verdict on the PlacementPolicy ``request`` carries, against the set ``in_force``."""
    skipped = _not_guarded(request)
    if skipped:
        return Verdict(True, skipped=skipped)
    assert request.object is not None
    doc = document(request.object)
    name = str(doc.data["metadata"]["name"])
    if request.operation == "UPDATE" and _same_spec(request):
        return Verdict(True, name, skipped="the spec did not change")
    try:
        (candidate,) = loader.load_documents([doc], targets=targets)
    except loader.PolicyLoadError as exc:
        return Verdict(False, name, tuple(exc.errors))
    if in_force is None:
        return Verdict(True, name, skipped="no policy set in force yet: checked on its own")
    defined = in_force.files.get(name)
    if defined is not None:
        message = (f"policy name {name!r} is already defined at {defined}; a name defined twice is in force "
                   "nowhere: rename this policy, or remove the file's")
        return Verdict(False, name, (LoadError(doc.file, 0, format_path(NAME_PATH), message),), duplicate=True)
    together = _with(in_force, candidate, doc)
    refused = lint.conflicts(together, name) + engine_conflicts.contradictions(together, only=name)
    notes = lint.never_applies(together, name) + engine_conflicts.uncompilable(together, only=name)
    return Verdict(not refused, name, tuple(_sorted(refused)), warnings=tuple(_warning(e) for e in _sorted(notes)))


def _not_guarded(request: review.Request) -> str:
    """Why the request is not one this webhook checks ("" when it is)."""
    if request.group != API_GROUP or request.kind != POLICY_KIND:
        return f"not a {POLICY_KIND}"
    if request.sub_resource:
        return f"the {request.sub_resource} subresource"
    if request.operation not in GUARDED_OPERATIONS:
        return f"a {request.operation}"
    if not isinstance(request.object, dict):
        return "no object"
    return ""


def _same_spec(request: review.Request) -> bool:
    old, new = request.old_object or {}, request.object or {}
    return "spec" in old and old.get("spec") == new.get("spec")


def _with(in_force: Assembled, candidate: Any, doc: Any) -> Loaded:
    """The set in force with ``candidate`` in place of the policy of its name, if any."""
    loaded = in_force.loaded
    others = tuple(p for p in loaded.policies if p.name != candidate.name)
    policies = PolicySet((*others, candidate), targets=loaded.policies.targets)
    return Loaded(policies, {**loaded.sources, candidate.name: doc}, {**loaded.bases, candidate.name: ()})


def _sorted(errors: list[LoadError]) -> list[LoadError]:
    return sorted(set(errors), key=lambda e: (e.file, e.line, e.field, e.message))


def _warning(error: LoadError) -> str:
    return f"{error.field}: {error.message}" if error.field else error.message


# --- the answer -------------------------------------------------------------------------------


def answer(request: review.Request, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview answer: allowed (with lint's warnings), or refused with a 422 Invalid
    whose causes carry each error's field path, as the API server's own validation does (kubectl
    prints them one a line under ``The placementpolicies "<name>" is invalid``); the message says
    them all, for clients that print only it."""
    if verdict.allowed:
        return review.respond(request, patch=b"", warnings=list(verdict.warnings))
    causes = [{"reason": "FieldValueDuplicate" if verdict.duplicate else "FieldValueInvalid",
               "message": e.message, "field": e.field} for e in verdict.errors]
    count = len(verdict.errors)
    message = (f"{POLICY_KIND} {verdict.name!r} has {count} lint error{'s' if count != 1 else ''}:\n"
               + "\n".join(str(e) for e in verdict.errors))
    response: dict[str, Any] = {
        "uid": request.uid,
        "allowed": False,
        "status": {"status": "Failure", "code": 422, "reason": "Invalid", "message": message,
                   "details": {"group": API_GROUP, "kind": crd.PLURAL, "name": verdict.name, "causes": causes}},
    }
    warnings = clip_all(list(verdict.warnings))
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}


def log_fields(request: review.Request, verdict: Verdict) -> dict[str, Any]:
    """The fields of the policy review's log line."""
    fields: dict[str, Any] = {"uid": request.uid, "operation": request.operation, "name": verdict.name or request.name,
                              "dryRun": request.dry_run, "allowed": verdict.allowed}
    if verdict.skipped:
        fields["skipped"] = verdict.skipped
    if verdict.errors:
        fields["errors"] = [str(e) for e in verdict.errors][:50]
    return fields
