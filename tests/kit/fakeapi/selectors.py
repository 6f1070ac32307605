"""Label and field selectors, parsed and matched as k8s.io/apimachinery does it.

* Label selectors: ``labels.Parse`` (apimachinery/pkg/labels/selector.go) — ``=``, ``==``, ``!=``,
  ``in (...)``, ``notin (...)``, ``key``, ``!key``, ``>``, ``<``; keys must be qualified names and
  values valid label values. ``notin`` and ``!=`` match objects without the label.
* metav1.LabelSelector -> selector: ``LabelSelectorAsSelector`` (matchLabels + matchExpressions
  In/NotIn/Exists/DoesNotExist).
* Field selectors: ``fields.ParseSelector`` (apimachinery/pkg/fields/selector.go) — ``=``, ``==``,
  ``!=`` joined by commas, with ``\\`` escapes; only the labels the kind's field-label conversion
  func accepts (pkg/apis/core/v1/conversion.go, runtime.DefaultMetaV1FieldSelectorConversion).
* Field values: the kind's GetAttrs / ToSelectableFields (pkg/registry/core/pod/strategy.go,
  node/strategy.go, namespace/strategy.go, event/strategy.go, storage.DefaultNamespaceScopedAttr).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .discovery import Resource
from .errors import bad_request

JSON = dict[str, Any]
Requirement = tuple[str, str, tuple[str, ...]]  # key, operator, values

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SPECIAL = set("=!(),<>")


class SelectorError(ValueError):
    pass


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        raise SelectorError(f"invalid label key {key!r}: prefix part must be a DNS-1123 subdomain")
    if not name or len(name) > 63 or not _NAME.match(name):
        raise SelectorError(
            f"invalid label key {key!r}: name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character")


def _check_value(value: str) -> None:
    if value and (len(value) > 63 or not _NAME.match(value)):
        raise SelectorError(
            f"invalid label value: {value!r}: a valid label must be an empty string or consist of alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith(("==", "!="), i):
            out.append(text[i:i + 2])
            i += 2
        elif ch in _SPECIAL:
            out.append(ch)
            i += 1
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            out.append(text[i:j])
            i = j
    return out


def parse_labels(text: str) -> list[Requirement]:
    """labels.Parse. Raises SelectorError on bad syntax or invalid keys/values."""
    toks = _tokens(text)
    reqs: list[Requirement] = []
    pos = 0

    def take() -> str:
        nonlocal pos
        if pos >= len(toks):
            raise SelectorError(f"unable to parse requirement: found '', expected more in {text!r}")
        pos += 1
        return toks[pos - 1]

    while pos < len(toks):
        tok = take()
        if tok == "!":
            key = take()
            _check_key(key)
            reqs.append((key, "!", ()))
        else:
            key = tok
            if key in _SPECIAL or key in ("==", "!="):
                raise SelectorError(f"found '{key}', expected: !, identifier, or 'end of string'")
            _check_key(key)
            if pos >= len(toks) or toks[pos] == ",":
                reqs.append((key, "exists", ()))
            else:
                op = take()
                if op in ("in", "notin"):
                    if take() != "(":
                        raise SelectorError(f"found '{toks[pos - 1]}', expected: '('")
                    values: list[str] = []
                    while True:
                        nxt = take()
                        if nxt == ")":
                            break
                        if nxt == ",":
                            continue
                        _check_value(nxt)
                        values.append(nxt)
                    reqs.append((key, op, tuple(values)))
                elif op in ("=", "==", "!=", ">", "<"):
                    value = toks[pos] if pos < len(toks) and toks[pos] not in _SPECIAL else ""
                    if value:
                        pos += 1
                    if op in (">", "<"):
                        if not re.fullmatch(r"-?\d+", value):
                            raise SelectorError(f"for 'Gt', 'Lt' operators, the value must be an integer: {value!r}")
                    else:
                        _check_value(value)
                    reqs.append((key, "=" if op == "==" else op, (value,)))
                else:
                    raise SelectorError(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        if pos < len(toks):
            if toks[pos] != ",":
                raise SelectorError(f"found '{toks[pos]}', expected: ',' or 'end of string'")
            pos += 1
    return reqs


def labels_match(reqs: list[Requirement], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    for key, op, values in reqs:
        present = key in labels
        value = labels.get(key)
        if op == "exists":
            ok = present
        elif op == "!":
            ok = not present
        elif op in ("=", "in"):
            ok = present and value in values
        elif op in ("!=", "notin"):
            ok = not present or value not in values
        else:
            try:
                number = int(value) if value is not None else None
            except ValueError:
                number = None
            ok = number is not None and (number > int(values[0]) if op == ">" else number < int(values[0]))
        if not ok:
            return False
    return True


def label_selector_reqs(selector: JSON | None) -> list[Requirement] | None:
    """metav1.LabelSelectorAsSelector; None when the selector is invalid (callers skip it).

    A nil selector matches nothing, an empty one everything (the caller decides what nil means).
    """
    if selector is None:
        return None
    reqs: list[Requirement] = []
    try:
        for key, value in sorted((selector.get("matchLabels") or {}).items()):
            _check_key(key)
            _check_value(str(value))
            reqs.append((key, "=", (str(value),)))
        for expr in selector.get("matchExpressions") or []:
            key, op, values = expr.get("key", ""), expr.get("operator", ""), tuple(expr.get("values") or ())
            _check_key(key)
            mapping = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
            if op not in mapping:
                return None
            if op in ("In", "NotIn") and not values:
                return None
            if op in ("Exists", "DoesNotExist") and values:
                return None
            reqs.append((key, mapping[op], values))
    except (SelectorError, AttributeError, TypeError):
        return None
    return reqs


# ---- field selectors ----

FieldReq = tuple[str, str, str]  # field, "=" | "!=", value


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if text[i] == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(text[i])
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_fields(text: str) -> list[FieldReq]:
    """fields.ParseSelector; raises SelectorError (the list handler turns it into a 400)."""
    out: list[FieldReq] = []
    if not text:
        return out
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        i = 0
        while i < len(term):
            if term[i] == "\\":
                i += 2
                continue
            op = next((o for o in ("!=", "==", "=") if term.startswith(o, i)), None)
            if op:
                out.append((_unescape(term[:i]), "!=" if op == "!=" else "=", _unescape(term[i + len(op):])))
                break
            i += 1
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
    return out


def check_field_labels(res: Resource, reqs: list[FieldReq]) -> list[FieldReq]:
    """The scheme's ConvertFieldLabel; unknown labels are a 400 with the real message."""
    out: list[FieldReq] = []
    for field, op, value in reqs:
        if res.field_labels is None:
            if field not in ("metadata.name", "metadata.namespace"):
                raise bad_request(f'"{field}" is not a known field selector: only "metadata.name", '
                                  '"metadata.namespace"')
        elif field not in res.field_labels:
            raise bad_request(f"field label not supported: {field}")
        out.append(("spec.nodeName" if field == "spec.host" else field, op, value))
    return out


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _pod_fields(obj: JSON) -> dict[str, str]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ips = status.get("podIPs") or []
    return {"spec.nodeName": _s(spec.get("nodeName")), "spec.restartPolicy": _s(spec.get("restartPolicy")),
            "spec.schedulerName": _s(spec.get("schedulerName")),
            "spec.serviceAccountName": _s(spec.get("serviceAccountName")),
            "spec.hostNetwork": "true" if spec.get("hostNetwork") else "false",
            "status.phase": _s(status.get("phase")),
            "status.podIP": _s(ips[0].get("ip")) if ips and isinstance(ips[0], dict) else _s(status.get("podIP")),
            "status.nominatedNodeName": _s(status.get("nominatedNodeName"))}


def _event_fields(obj: JSON) -> dict[str, str]:
    inv = obj.get("involvedObject") or {}
    out = {f"involvedObject.{k}": _s(inv.get(k)) for k in
           ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")}
    out.update({"reason": _s(obj.get("reason")), "reportingComponent": _s(obj.get("reportingComponent")),
                "source": _s((obj.get("source") or {}).get("component")), "type": _s(obj.get("type"))})
    return out


_KIND_FIELDS: dict[str, Callable[[JSON], dict[str, str]]] = {
    "Pod": _pod_fields,
    "Node": lambda o: {"spec.unschedulable": "true" if (o.get("spec") or {}).get("unschedulable") else "false"},
    "Namespace": lambda o: {"status.phase": _s((o.get("status") or {}).get("phase"))},
    "Event": _event_fields,
}


def fields_match(res: Resource, reqs: list[FieldReq], obj: JSON) -> bool:
    if not reqs:
        return True
    meta = obj.get("metadata") or {}
    values = {"metadata.name": _s(meta.get("name"))}
    if res.namespaced:
        values["metadata.namespace"] = _s(meta.get("namespace"))
    extra = _KIND_FIELDS.get(res.kind)
    if extra is not None:
        values.update(extra(obj))
    for field, op, want in reqs:
        have = values.get(field, "")
        if (have == want) != (op == "="):
            return False
    return True


def single_name(reqs: list[FieldReq]) -> str | None:
    """SelectionPredicate.MatchesSingle: a ``metadata.name=x`` term narrows a list to one key."""
    for field, op, value in reqs:
        if field == "metadata.name" and op == "=":
            return value
    return None


def parse_list_selectors(res: Resource, label_text: str, field_text: str) -> tuple[list[Requirement],
                                                                                 list[FieldReq]]:
    """Both selectors of a list/watch request; parse errors are 400 BadRequest."""
    try:
        labels = parse_labels(label_text) if label_text else []
        fields = parse_fields(field_text)
    except SelectorError as exc:
        raise bad_request(str(exc)) from None
    return labels, check_field_labels(res, fields)
