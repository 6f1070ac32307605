"""Kubernetes' own rules for names, label keys and label values.

Each check returns an error message (None when valid), worded like the API server's, so a
policy is rejected at load for exactly what the API server would reject in the object the
engine writes. Source: k8s.io/apimachinery/pkg/util/validation (IsDNS1123Subdomain,
IsDNS1123Label, IsQualifiedName, IsValidLabelValue).
"""
from __future__ import annotations

import re

__all__ = [
    "dns_label_error",
    "dns_subdomain_error",
    "label_value_error",
    "qualified_name_error",
]

_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(rf"^{_NAME}$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE = re.compile(rf"^{_DNS_LABEL}$")
_DNS_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")

_NAME_HINT = (
    "must be 63 characters or less, start and end with an alphanumeric character, "
    "with '-', '_', '.' and alphanumerics between"
)


def dns_subdomain_error(value: str) -> str | None:
    """RFC 1123 subdomain, as for object names and PriorityClass names."""
    if not value:
        return "must not be empty"
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _DNS_SUBDOMAIN_RE.match(value):
        return (
            f"{value!r} is not a valid DNS subdomain: lower case alphanumerics, '-' and '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def dns_label_error(value: str) -> str | None:
    """RFC 1123 label, as for namespace names."""
    if not value:
        return "must not be empty"
    if len(value) > 63 or not _DNS_LABEL_RE.match(value):
        return f"{value!r} is not a valid DNS label: at most 63 lower case alphanumerics or '-'"
    return None


def qualified_name_error(value: str) -> str | None:
    """A label or annotation key: ``[prefix/]name`` with a DNS-subdomain prefix."""
    if not value:
        return "must not be empty"
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix:
            return f"{value!r}: prefix part must not be empty"
        error = dns_subdomain_error(prefix)
        if error:
            return f"{value!r}: prefix part {error}"
    if not name:
        return f"{value!r}: name part must not be empty"
    if len(name) > 63 or not _NAME_RE.match(name):
        return f"{value!r}: name part {_NAME_HINT}"
    return None


def label_value_error(value: str) -> str | None:
    """A label value: empty, or a name of at most 63 characters."""
    if value == "":
        return None
    if len(value) > 63 or not _NAME_RE.match(value):
        return f"{value!r} is not a valid label value: {_NAME_HINT}"
    return None
