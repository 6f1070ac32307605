"""Policy files and folders -> a validated, immutable :class:`PolicySet`.

Every error in every file is collected and reported at once as
``file:line: field.path: message``; a set with any error is rejected as a whole, so a
broken change never half-loads (the caller keeps the previous good set).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from webhook import API_VERSION, POLICY_KIND
from webhook.files import documents, walk
from webhook.files.documents import Document
from webhook.kube.kinds import BUILTIN, Target, Targets
from webhook.policy.errors import LoadError, did_you_mean, format_path, from_validation, located
from webhook.policy.model import PlacementPolicy
from webhook.policy.policyset import Policy, PolicySet

__all__ = [
    "LoadError",
    "Loaded",
    "NoPolicies",
    "PolicyLoadError",
    "format_path",
    "load",
    "load_documents",
    "load_documents_with_sources",
    "load_with_sources",
    "policy_files",
]

POLICY_SUFFIXES = (".yaml", ".yml", ".json")
SUITE_SUFFIXES = (".suite.yaml", ".suite.yml")


class PolicyLoadError(Exception):
    """The policy set is invalid; ``errors`` lists every problem found, in file order."""

    def __init__(self, errors: list[LoadError]) -> None:
        self.errors = sorted(set(errors), key=lambda e: (e.file, e.line, e.field, e.message))
        super().__init__("\n".join(str(e) for e in self.errors))


class NoPolicies(Exception):
    """Paths named on a command line that hold no policy: nothing to act on, a mistake in the
    command (kubectl refuses the same: "error: no objects passed to apply")."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Loaded:
    """A loaded set plus, per policy name, the document it came from (for line numbers)."""

    policies: PolicySet
    sources: dict[str, Document]
    bases: dict[str, tuple[str | int, ...]]  # path of the policy inside its document ("items", i)


def policy_files(paths: Iterable[str | Path]) -> list[Path]:
    """Policy files named by ``paths`` (``files.walk``): in folders ``*.yaml``, ``*.yml`` and
    ``*.json``, but not policy test suites (``*.suite.yaml``). Raises ``walk.MissingPath``."""
    return walk.find(paths, accept=_is_policy_file)


def _is_policy_file(name: str) -> bool:
    lower = name.lower()
    return lower.endswith(POLICY_SUFFIXES) and not lower.endswith(SUITE_SUFFIXES)


def load(paths: Iterable[str | Path], *, targets: Targets = BUILTIN) -> PolicySet:
    """Load and validate every policy under ``paths``; raises :class:`PolicyLoadError`."""
    return load_with_sources(paths, targets=targets).policies


def load_with_sources(paths: Iterable[str | Path], *, targets: Targets = BUILTIN, each: bool = False) -> Loaded:
    """Like :func:`load`, also returning where each policy came from.

    ``each``: every path must hold a policy, or :class:`NoPolicies` is raised before anything
    is validated; a path whose files cannot be read is left to their errors. For commands,
    whose paths are the user's: the server's policy folder may hold none.
    """
    docs: list[Document] = []
    errors: list[LoadError] = []
    held: dict[str, int | None] = {}  # real path of each file read -> policies in it; None: unreadable

    def missing(exc: walk.MissingPath) -> None:
        errors.append(LoadError(str(exc.path), 0, "", "no such file or directory"))

    found = walk.find_each(paths, accept=_is_policy_file, on_missing=missing)
    for file in dict.fromkeys(f for _, files in found for f in files):  # each once, in order
        key = os.path.realpath(file)
        if key in held:
            continue
        try:
            read = documents.load_file(file, strict=True)
        except documents.YamlError as exc:
            errors.append(LoadError(exc.file, exc.line, "", exc.message))
            held[key] = None
            continue
        docs.extend(read)
        held[key] = sum(len(_policy_items(doc)) for doc in read)
    if each:
        _require_policies(found, held)
    return _build(docs, targets=targets, errors=errors)


def _require_policies(found: list[tuple[Path, list[Path]]], held: dict[str, int | None]) -> None:
    problems: list[str] = []
    for path, files in found:
        counts = [held[os.path.realpath(f)] for f in files]
        if not files:
            problems.append(f"no policy files under {path}")
        elif not any(counts) and None not in counts:
            problems.append(f"no {POLICY_KIND} in {path}")
    if problems:
        raise NoPolicies(problems)


def load_documents(docs: Iterable[Document], *, targets: Targets = BUILTIN) -> PolicySet:
    """Validate already-parsed documents (suites, inline policies, benchmarks)."""
    return _build(docs, targets=targets, errors=[]).policies


def load_documents_with_sources(docs: Iterable[Document], *, targets: Targets = BUILTIN) -> Loaded:
    """Like :func:`load_documents`, also returning where each policy came from."""
    return _build(docs, targets=targets, errors=[])


def _build(docs: Iterable[Document], *, targets: Targets, errors: list[LoadError]) -> Loaded:
    policies: list[Policy] = []
    sources: dict[str, Document] = {}
    bases: dict[str, tuple[str | int, ...]] = {}
    known_kinds = _kind_names(targets)
    for doc in docs:
        for base, data in _policy_items(doc):
            header = _header_error(doc, base, data)
            if header:
                errors.append(header)
                continue
            # Names and kinds are checked on the raw data too, so a policy with other
            # errors still gets its duplicate-name and unknown-kind errors in the same run.
            name = _raw_name(data)
            if name in sources:
                errors.append(_duplicate(name, doc, base, sources[name], bases[name]))
            elif name is not None:
                sources[name], bases[name] = doc, base
            kind_errors, resolved = _resolve_kinds(data, doc, base, targets=targets, known=known_kinds)
            errors.extend(kind_errors)
            policy = _validate(doc, base, data, resolved, errors=errors)
            if policy is not None and not kind_errors:
                policies.append(policy)
    if errors:
        raise PolicyLoadError(errors)
    return Loaded(PolicySet(tuple(policies), targets=targets), sources, bases)


def _raw_name(data: dict[str, Any]) -> str | None:
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else None


def _policy_items(doc: Document) -> list[tuple[tuple[str | int, ...], Any]]:
    """The policies a document holds: itself, or the items of a ``v1`` ``List``."""
    data = doc.data
    if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
        return [(("items", i), item) for i, item in enumerate(data["items"])]
    return [((), data)]


def _validate(
    doc: Document,
    base: tuple[str | int, ...],
    data: dict[str, Any],
    targets: frozenset[Target] | None,
    *,
    errors: list[LoadError],
) -> Policy | None:
    try:
        model = PlacementPolicy.model_validate(data)
    except ValidationError as exc:
        errors.extend(from_validation(exc, doc=doc, base=base, data=data))
        return None
    spec = model.spec_data()
    return Policy(
        name=model.metadata.name,
        spec=spec,
        source=located(doc.file, doc.line_of(base)),
        order=int(spec.get("order", 0)),
        targets=targets,
    )


def _header_error(doc: Document, base: tuple[str | int, ...], data: Any) -> LoadError | None:
    """A clear error for a document that is not a PlacementPolicy at all."""
    where = format_path(base)
    if not isinstance(data, dict):
        got = "a list" if isinstance(data, list) else type(data).__name__
        return LoadError(doc.file, doc.line_of(base), where, f"expected a {POLICY_KIND} mapping, got {got}")
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if api_version == API_VERSION and kind == POLICY_KIND:
        return None
    if kind == POLICY_KIND:
        path = base + ("apiVersion",)
        message = f"unsupported apiVersion {api_version!r}; this version reads {API_VERSION}"
        return LoadError(doc.file, doc.line_of(path), format_path(path), message)
    path = base + ("kind",)
    what = f"{kind or '(no kind)'} ({api_version or 'no apiVersion'})"
    message = f"not a {POLICY_KIND}: this document is {what}; expected apiVersion {API_VERSION}"
    if kind == "PlacementTest":
        message += " (policy test suites belong in *.suite.yaml files)"
    return LoadError(doc.file, doc.line_of(path), format_path(path), message)


def _resolve_kinds(
    data: dict[str, Any],
    doc: Document,
    base: tuple[str | int, ...],
    *,
    targets: Targets,
    known: list[str],
) -> tuple[list[LoadError], frozenset[Target] | None]:
    """Resolve ``match.kinds`` / ``exclude.kinds``; unknown kinds are errors.

    Works on the raw data (malformed entries are left to the model's own errors).
    """
    errors: list[LoadError] = []
    matched: set[Target] = set()
    raw_spec = data.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    for section in ("match", "exclude"):
        block = spec.get(section)
        kinds = block.get("kinds") if isinstance(block, dict) else None
        for i, ref in enumerate(kinds if isinstance(kinds, list) else ()):
            if not isinstance(ref, str) or not ref:
                continue
            resolved = targets.resolve(ref)
            if section == "match":
                matched.update(resolved)
            if not resolved:
                path = base + ("spec", section, "kinds", i)
                message = f"unknown kind {ref!r}" + did_you_mean(ref, known)
                errors.append(LoadError(doc.file, doc.line_of(path), format_path(path), message))
    match = spec.get("match")
    has_kinds = isinstance(match, dict) and isinstance(match.get("kinds"), list)
    return errors, frozenset(matched) if has_kinds else None


def _kind_names(targets: Targets) -> list[str]:
    """Every spelling of every known kind, for "did you mean"."""
    names: list[str] = []
    for t in targets:
        names += [t.kind, f"{t.group or t.version}/{t.kind}", f"{t.api_version}/{t.kind}"]
    return sorted(set(names))


def _duplicate(
    name: str, doc: Document, base: tuple[str | int, ...], first: Document, first_base: tuple[str | int, ...]
) -> LoadError:
    path = base + ("metadata", "name")
    where = located(first.file, first.line_of(first_base + ("metadata", "name")))
    return LoadError(
        doc.file, doc.line_of(path), format_path(path), f"duplicate policy name {name!r}; also defined at {where}"
    )
