"""Status errors, built the way k8s.io/apimachinery/pkg/api/errors/errors.go builds them.

Every failure the fake answers is a ``Status`` (kind Status, apiVersion v1) written with the
HTTP code the Status carries, as ``responsewriters.ErrorNegotiated`` does
(staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go), including the
``Retry-After`` header when ``details.retryAfterSeconds`` is set.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


def qualified(group: str, resource: str) -> str:
    """schema.GroupResource.String(): ``pods`` or ``leases.coordination.k8s.io``."""
    return f"{resource}.{group}" if group else resource


def group_kind(group: str, kind: str) -> str:
    """schema.GroupKind.String()."""
    return f"{kind}.{group}" if group else kind


@dataclass
class FieldError:
    """One k8s.io/apimachinery/pkg/util/validation/field.Error."""

    type: str  # CauseType: FieldValueRequired, FieldValueInvalid, ...
    field: str
    detail: str = ""
    bad_value: Any = None

    _TYPE_TEXT = {
        "FieldValueRequired": "Required value",
        "FieldValueForbidden": "Forbidden",
        "FieldValueInvalid": "Invalid value",
        "FieldValueNotSupported": "Unsupported value",
        "FieldValueTooLong": "Too long",
        "FieldValueDuplicate": "Duplicate value",
    }

    def body(self) -> str:
        """field.Error.ErrorBody()."""
        text = self._TYPE_TEXT.get(self.type, self.type)
        if self.type in ("FieldValueInvalid", "FieldValueNotSupported", "FieldValueDuplicate"):
            text = f"{text}: {_go_value(self.bad_value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def error(self) -> str:
        return f"{self.field}: {self.body()}"


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[]string{" + ", ".join(f'"{v}"' for v in value) + "}"
    return str(value)


@dataclass
class ApiError(Exception):
    """A StatusError: raise it anywhere, the HTTP layer writes ``status()``."""

    code: int
    reason: str
    message: str
    details: JSON | None = None
    list_meta: JSON = field(default_factory=dict)
    status_word: str = "Failure"

    def __str__(self) -> str:
        return self.message

    def status(self) -> JSON:
        body: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.list_meta),
                      "status": self.status_word}
        if self.message:
            body["message"] = self.message
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        if self.code:
            body["code"] = self.code
        return body

    def headers(self) -> dict[str, str]:
        retry = (self.details or {}).get("retryAfterSeconds", 0)
        return {"Retry-After": str(retry)} if retry else {}


def _details(group: str, kind: str, name: str, **extra: Any) -> JSON:
    out: JSON = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    if kind:
        out["kind"] = kind
    out.update({k: v for k, v in extra.items() if v})
    return out


def not_found(group: str, resource: str, name: str) -> ApiError:
    """errors.NewNotFound."""
    return ApiError(404, "NotFound", f'{qualified(group, resource)} "{name}" not found',
                    _details(group, resource, name))


def already_exists(group: str, resource: str, name: str) -> ApiError:
    """errors.NewAlreadyExists."""
    return ApiError(409, "AlreadyExists", f'{qualified(group, resource)} "{name}" already exists',
                    _details(group, resource, name))


def generate_name_conflict(group: str, resource: str, name: str) -> ApiError:
    """errors.NewGenerateNameConflict (retryAfterSeconds 1)."""
    return ApiError(409, "AlreadyExists",
                    f'{qualified(group, resource)} "{name}" already exists, the server was not able '
                    "to generate a unique name for the object",
                    _details(group, resource, name, retryAfterSeconds=1))


def conflict(group: str, resource: str, name: str, err: str) -> ApiError:
    """errors.NewConflict."""
    return ApiError(409, "Conflict",
                    f'Operation cannot be fulfilled on {qualified(group, resource)} "{name}": {err}',
                    _details(group, resource, name))


# storage.ErrResourceVersionConflicts / registry OptimisticLockErrorMsg
MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def modified(group: str, resource: str, name: str) -> ApiError:
    return conflict(group, resource, name, MODIFIED)


def forbidden(group: str, resource: str, name: str, err: str, causes: list[JSON] | None = None) -> ApiError:
    """errors.NewForbidden."""
    if not resource:
        message = f"forbidden: {err}"
    elif not name:
        message = f"{qualified(group, resource)} is forbidden: {err}"
    else:
        message = f'{qualified(group, resource)} "{name}" is forbidden: {err}'
    return ApiError(403, "Forbidden", message, _details(group, resource, name, causes=causes))


def bad_request(message: str) -> ApiError:
    """errors.NewBadRequest (no details)."""
    return ApiError(400, "BadRequest", message)


def invalid(group: str, kind: str, name: str, errs: list[FieldError]) -> ApiError:
    """errors.NewInvalid: 422 with one cause per field error."""
    causes = [{"reason": e.type, "message": e.body(), "field": e.field} for e in errs]
    agg = errs[0].error() if len(errs) == 1 else "[" + ", ".join(e.error() for e in errs) + "]"
    return ApiError(422, "Invalid", f'{group_kind(group, kind)} "{name}" is invalid: {agg}',
                    _details(group, kind, name, causes=causes) or {"causes": causes})


def options_invalid(kind: str, errs: list[FieldError]) -> ApiError:
    """NewInvalid(GroupKind{meta.k8s.io, <Options kind>}, "", errs) as the handlers raise it."""
    return invalid("meta.k8s.io", kind, "", errs)


def too_many_requests(message: str, retry_after: int, causes: list[JSON] | None = None) -> ApiError:
    """errors.NewTooManyRequests: details always present (maybe empty)."""
    details: JSON = {}
    if causes:
        details["causes"] = causes
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return ApiError(429, "TooManyRequests", message, details)


def resource_expired(message: str, continue_token: str | None = None) -> ApiError:
    """errors.NewResourceExpired (410, reason Expired), optionally with a continue token."""
    return ApiError(410, "Expired", message, None, {"continue": continue_token} if continue_token else {})


def timeout(message: str, retry_after: int, causes: list[JSON] | None = None) -> ApiError:
    """errors.NewTimeoutError (504)."""
    details: JSON = {}
    if causes:
        details["causes"] = causes
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return ApiError(504, "Timeout", f"Timeout: {message}", details)


def plain_error(message: str, code: int = 500) -> ApiError:
    """A Go error that is no StatusError: ErrorToAPIStatus makes it code 500, reason unknown ("")."""
    return ApiError(code, "", message)


def unauthorized() -> ApiError:
    """What the authentication filter answers: errors.NewUnauthorized("Unauthorized")."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def service_unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


def unsupported_media_type(accepted: list[str]) -> ApiError:
    """negotiation.NewUnsupportedMediaTypeError."""
    return ApiError(415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: "
                    + ", ".join(accepted))


_GENERIC = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    403: ("Forbidden", ""),  # the message is the server's (what RBAC refused)
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", "the server reported a conflict"),
    410: ("Gone", ""),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted, but may still be "
                     "processing the request"),
}


def generic(code: int, server_message: str = "", retry_after: int = 0) -> ApiError:
    """errors.NewGenericServerResponse(code, "", GroupResource{}, "", msg, retry, false).

    This is what go-restful's service error handler (endpoints/handlers serviceErrorHandler in
    genericapiserver/handler.go) answers for unknown routes (404) and wrong methods (405), and what
    the patch handler answers for a JSON patch that cannot be applied (422).
    """
    reason, message = _GENERIC.get(code, ("", ""))
    if code == 403 or code == 415 or not message:
        message = server_message
    if not reason and code >= 500:
        reason = "InternalError"
        message = f'an error on the server ("{server_message}") has prevented the request from succeeding'
    if not message:
        message = f"the server responded with the status code {code} but did not return more information"
    details: JSON = {"retryAfterSeconds": retry_after} if retry_after else {}
    return ApiError(code, reason, message, details)
