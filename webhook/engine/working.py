"""The working copy admission hands the engine, and the one field admission writes itself.

The engine edits only the placement fields it owns, so the copy duplicates
only those and the dicts on the way to them; everything else stays shared with the
original, which keeps the copy cheap and lets the differ skip it by identity.

Within what it owns, the engine edits mappings in place and adds, replaces or drops the
entries of lists, but never edits an entry itself (a node selector term, a toleration, a
preference): it builds a new one (``kube.nodeterms.conjoin``, ``merge.append_missing``). So the
copy duplicates the owned mappings and lists and shares their entries with the original, and
a policy's compiled entries go into every object it places as they are (``engine.fragments``):
an admission's output shares structure with its request and with the policy set, and whoever
edits it copies it first.
"""
from __future__ import annotations

from typing import Any

from webhook import ANNOTATION_APPLIED
from webhook.engine import placement
from webhook.kube.kinds import Target

APPLIED_PATH = ("metadata", "annotations")  # where ``record_applied`` writes

# Subtrees the engine never writes. A whole-object copy (no target) shares them with the
# original. These are the bulk of a typical workload.
SHARED_KEYS = frozenset(
    {
        "containers",
        "initContainers",
        "ephemeralContainers",
        "volumes",
        "volumeClaimTemplates",
        "dataVolumeTemplates",
        "domain",
        "managedFields",
        "ownerReferences",
        "status",
    }
)


def working_copy(value: Any, target: Target | None = None) -> Any:
    """A private copy of a JSON object for the engine to mutate.

    With a ``target``, only what the engine may write for that kind is copied
    (``placement.written_paths``, the applied annotation, and the containers on the way),
    list entries excepted. Without one, the whole object is copied except ``SHARED_KEYS``.
    """
    if target is None:
        return _deep_copy(value)
    return _copy_along(value, _write_trie(target))


def _deep_copy(value: Any) -> Any:
    if type(value) is dict:
        return {k: (v if k in SHARED_KEYS else _deep_copy(v)) for k, v in value.items()}
    if type(value) is list:
        return [_deep_copy(v) for v in value]
    return value


# A trie of written paths: key -> sub-trie, or None for a subtree the engine owns outright.
_tries: dict[tuple[str, str], tuple[Target, dict[str, Any] | None]] = {}


def _write_trie(target: Target) -> dict[str, Any] | None:
    entry = _tries.get((target.group, target.kind))
    if entry is not None and entry[0] is target:
        return entry[1]
    paths = (*placement.written_paths(target), APPLIED_PATH)
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        if not path:
            continue
        for key in path[:-1]:
            if node.get(key, {}) is None:  # an enclosing subtree is owned already
                break
            node = node.setdefault(key, {})
        else:
            node[path[-1]] = None
    root = None if () in paths else tree  # () is the whole object
    _tries[(target.group, target.kind)] = (target, root)
    return root


def _copy_along(value: Any, trie: dict[str, Any] | None) -> Any:
    """Copy the dicts on the trie's paths (shallow) and its owned subtrees (``_owned_copy``)."""
    if trie is None or type(value) is not dict:  # owned, or an odd shape: copy what may be edited
        return _owned_copy(value)
    out = dict(value)
    for key, sub in trie.items():
        child = out.get(key)
        if child is not None:  # absent: the engine creates it in this (copied) dict
            out[key] = _copy_along(child, sub)
    return out


def _owned_copy(value: Any) -> Any:
    """Mappings copied all the way down, lists copied without their entries (see above)."""
    if type(value) is list:
        return list(value)
    if type(value) is not dict:
        return value
    out = dict(value)  # the scalars at C speed: most values of an owned mapping are
    for key, child in value.items():
        if type(child) is dict or type(child) is list:
            out[key] = _owned_copy(child)
    return out


def record_applied(obj: dict[str, Any], names: list[str]) -> None:
    """Write the sorted union of old and new names to the object's own annotation.

    Object metadata, never the pod template: changing the template would start a rollout.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    existing = str(annotations.get(ANNOTATION_APPLIED) or "")
    union = set(names)
    if existing:  # not on the object's first admission
        union.update(n.strip() for n in existing.split(",") if n.strip())
    value = ",".join(sorted(union))
    if annotations.get(ANNOTATION_APPLIED) != value:
        annotations[ANNOTATION_APPLIED] = value
