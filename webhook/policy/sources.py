"""PlacementPolicy objects of the cluster beside policy files: each object validated exactly as a
policy file is, named ``cluster:PlacementPolicy/<name>`` in messages, and the one set both make.

An object the API server accepted can still fail the loader (an unknown kind in ``match.kinds``,
a pattern only the loader checks): it never half-loads. It is left out of the set with its
errors, and every other policy serves. Two ways of meeting a name twice:

* the server (``on_duplicate="error"``): a name defined by a file and by an object is an error
  for that name only; neither definition serves, both are reported, the other policies serve.
  Files (a ConfigMap) and objects are two sources of truth, and which one was meant cannot be
  told.
* the commands (``on_duplicate="replace"``): the files are the change the user proposes and the
  objects what is in force, so a file replaces the object of its name, as ``kubectl apply``
  would replace it.

The file set comes in whole (``loader.Loaded``): a broken file change is the file loader's to
refuse, and the caller keeps the files' last good set.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook import API_VERSION, POLICY_KIND
from webhook.files.documents import Document
from webhook.kube.kinds import BUILTIN, Targets
from webhook.policy import loader
from webhook.policy.errors import LoadError, format_path, located
from webhook.policy.loader import Loaded
from webhook.policy.policyset import Policy, PolicySet

__all__ = [
    "NAME_PATH",
    "OBJECT_PREFIX",
    "REASON_DUPLICATE",
    "REASON_INVALID",
    "Assembled",
    "LeftOut",
    "Memo",
    "assemble",
    "document",
    "generation",
    "object_file",
]

OBJECT_PREFIX = f"cluster:{POLICY_KIND}/"
# Why a definition is not in force (the Ready condition's reason, CamelCase as metav1.Condition wants).
REASON_INVALID = "Invalid"
REASON_DUPLICATE = "Duplicate"
NAME_PATH = ("metadata", "name")

Duplicates = Literal["error", "replace"]


def object_file(name: str) -> str:
    """What messages call the object ``name``: ``cluster:PlacementPolicy/<name>``."""
    return f"{OBJECT_PREFIX}{name}"


def document(obj: Mapping[str, Any]) -> Document:
    """The object as the loader reads a policy file: apiVersion, kind, the name and the spec.

    The rest of the metadata is the API server's (uid, resourceVersion, managedFields, ...) and
    already validated by it; the status is the webhook's own. Objects listed from the
    placementpolicies resource are PlacementPolicies, so a missing apiVersion or kind (a List's
    items may carry none) is filled in."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    data: dict[str, Any] = {"apiVersion": obj.get("apiVersion") or API_VERSION, "kind": obj.get("kind") or POLICY_KIND,
                            "metadata": {"name": name}}
    if "spec" in obj:
        data["spec"] = obj["spec"]
    return Document(data=data, file=object_file(name), line=0)


def generation(obj: Mapping[str, Any]) -> int:
    """``metadata.generation`` (0 when the object has none)."""
    meta = obj.get("metadata")
    value = meta.get("generation") if isinstance(meta, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class LeftOut:
    """A definition that is not in force: why (``REASON_*``) and its errors, each at its field."""

    reason: str
    errors: tuple[LoadError, ...]


@dataclass(frozen=True)
class Assembled:
    """The set in force (``loaded``: its policies and where each came from, as lint reads them),
    the objects left out by name, and the generation of every object read."""

    loaded: Loaded
    left_out: Mapping[str, LeftOut] = field(default_factory=dict)
    generations: Mapping[str, int] = field(default_factory=dict)
    # Where the files define each of their names ("file:line"), in the set or not.
    files: Mapping[str, str] = field(default_factory=dict)

    @property
    def policies(self) -> PolicySet:
        return self.loaded.policies

    def errors(self) -> list[LoadError]:
        """Every error of the definitions left out, in file order."""
        found = {e for left in self.left_out.values() for e in left.errors}
        return sorted(found, key=lambda e: (e.file, e.line, e.field, e.message))


class Memo:
    """Objects already validated, by content: an object that did not change is not validated
    again on the next assembly, and keeps its ``Policy`` (and what the engine compiled into it)."""

    def __init__(self) -> None:
        self._entries: dict[str, Policy | tuple[LoadError, ...]] = {}
        self._used: set[str] = set()

    def validate(self, doc: Document, *, targets: Targets) -> Policy | tuple[LoadError, ...]:
        key = json.dumps(doc.data, sort_keys=True, default=str)
        self._used.add(key)
        found = self._entries.get(key)
        if found is None:
            found = self._entries[key] = _validate(doc, targets=targets)
        return found

    def forget_unused(self) -> None:
        """Drop what the last assembly did not ask about (deleted and edited objects)."""
        self._entries = {k: v for k, v in self._entries.items() if k in self._used}
        self._used = set()

    def __len__(self) -> int:
        return len(self._entries)


def _validate(doc: Document, *, targets: Targets) -> Policy | tuple[LoadError, ...]:
    try:
        (policy,) = loader.load_documents([doc], targets=targets)
    except loader.PolicyLoadError as exc:
        return tuple(exc.errors)
    return policy


def assemble(
    files: Loaded | None,
    objects: Iterable[Mapping[str, Any]],
    *,
    targets: Targets = BUILTIN,
    on_duplicate: Duplicates = "error",
    memo: Memo | None = None,
) -> Assembled:
    """The set of ``files`` (loaded whole) and ``objects`` (each on its own), each name once."""
    memo = memo if memo is not None else Memo()
    file_policies = {p.name: p for p in files.policies} if files is not None else {}
    sources = dict(files.sources) if files is not None else {}
    bases = dict(files.bases) if files is not None else {}
    chosen: dict[str, Policy] = dict(file_policies)
    left_out: dict[str, LeftOut] = {}
    generations: dict[str, int] = {}
    for obj in objects:
        doc = document(obj)
        name = doc.data["metadata"]["name"]
        if name in file_policies and on_duplicate == "replace":
            continue  # the file is the user's change to this object
        generations[name] = generation(obj)
        validated = memo.validate(doc, targets=targets)
        if name in file_policies:
            chosen.pop(name, None)
            left_out[name] = LeftOut(REASON_DUPLICATE, _duplicate(name, doc, files))
        elif isinstance(validated, Policy):
            chosen[name] = validated
            sources[name], bases[name] = doc, ()
        else:
            left_out[name] = LeftOut(REASON_INVALID, validated)
    memo.forget_unused()
    policies = PolicySet(tuple(chosen.values()), targets=targets)
    loaded = Loaded(policies, {n: sources[n] for n in chosen}, {n: bases[n] for n in chosen})
    defined = {n: located(sources[n].file, sources[n].line_of(bases[n] + NAME_PATH)) for n in file_policies}
    return Assembled(loaded, left_out, generations, defined)


def _duplicate(name: str, doc: Document, files: Loaded | None) -> tuple[LoadError, ...]:
    """The error for a name both a file and an object define, at both places."""
    assert files is not None
    first, base = files.sources[name], files.bases[name]
    file_line = first.line_of(base + NAME_PATH)

    def said(elsewhere: str) -> str:
        return (f"policy name {name!r} is also defined at {elsewhere}; a name defined twice is in force "
                "nowhere until one of the two goes")

    return (LoadError(doc.file, 0, format_path(NAME_PATH), said(located(first.file, file_line))),
            LoadError(first.file, file_line, format_path(base + NAME_PATH), said(doc.file)))
