"""An UPDATE starts a rollout only when its author changed the pod template.

A Deployment rolls every pod when its pod template changes (a new ``pod-template-hash``);
a StatefulSet or DaemonSet likewise, a VirtualMachine asks for a restart (kinds whose
template only stamps their next pods, a Job, a CronJob, a ReplicaSet, are placed on UPDATE
as before: ``Target.template_rolls``). An UPDATE that leaves the template as the stored
object had it, apart from what the engine writes there (a GitOps re-sync, ``kubectl
annotate``, a scale), must not have admission change it: after a policy change, re-placing
the template would roll every pod of every workload touched for any reason. So the template leaves such an UPDATE exactly as the old object had
it; what the engine wrote there is written back when the request dropped it (``kubectl
replace`` or a server-side apply of the original manifest drops the fields admission added).

"Apart from what the engine writes" cannot be decided field by field from ownership: the
engine and the author share ``affinity``, ``nodeSelector`` and ``tolerations``. What the
request adds or changes in them is the author's (admission's own output is in the old
object), so it starts a rollout; what the request only removes from them may be the engine's
output dropped by a replace, and is written back.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook import ANNOTATION_APPLIED
from webhook.engine import placement
from webhook.engine.review import Request
from webhook.kube.kinds import Path_, Target
from webhook.kube.pointers import get_path

# A trie of engine-owned paths below the template: key -> sub-trie, or None for a field the
# engine writes.
_Trie = dict[str, Any]


def template_path(target: Target) -> Path_ | None:
    """Where the kind keeps the pod template whose change rolls its pods (``spec.template``),
    or None for a kind whose own spec is the pod's (a Pod, a VMI), that has no pod spec, or
    that only stamps its next pods from the template (``Target.template_rolls``)."""
    if target.pod_spec is None or not target.template_rolls:
        return None
    path = target.pod_metadata[:-1]
    if not path or target.pod_spec[: len(path)] != path:
        return None
    return path


def kept_template(request: Request, target: Target) -> dict[str, Any] | None:
    """The old object's template when this UPDATE leaves it as it was apart from removals in
    the fields the engine writes; None when the request changes anything else of it (a new
    image, a label, a nodeSelector of the author's own), or is no UPDATE of a templated kind.

    When nothing was removed, the request's own template (equal to the old one) is the
    answer: sharing it keeps the working copy and the differ as cheap as on CREATE."""
    if request.operation != "UPDATE":  # asked first: every CREATE asks
        return None
    path = template_path(target)
    if path is None:
        return None
    old, new = get_path(request.old_object, path), get_path(request.object, path)
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    if old == new:  # the usual re-sync, annotate or scale
        return new
    owned = _owned_trie(target, path)
    if not _same_apart_from(old, new, owned) or not _only_removed(old, new, owned):
        return None
    return old


def with_template(request: Request, target: Target, template: dict[str, Any]) -> dict[str, Any]:
    """The request's object with ``template`` in place of its own and the old object's
    applied names kept in its annotation: the object the policies then see. Containers on
    the way are copied, everything else is shared; the request's object is not modified
    (and is the answer itself when there is nothing to write back)."""
    path = template_path(target)
    assert path is not None and request.object is not None
    if get_path(request.object, path) is template and _names_kept(request.old_object, request.object):
        return request.object
    obj = dict(request.object)
    container = obj
    for key in path[:-1]:
        container[key] = dict(container.get(key) or {})
        container = container[key]
    container[path[-1]] = template
    _keep_applied(obj, request.old_object)
    return obj


def _keep_applied(obj: dict[str, Any], old: Mapping[str, Any] | None) -> None:
    """The old object's applied names stay named: the placement they wrote is kept with the
    template. The union with the request's own, as ``working.record_applied`` writes it."""
    if _names_kept(old, obj):
        return
    meta = obj["metadata"] = dict(obj.get("metadata") or {})
    annotations = meta["annotations"] = dict(meta.get("annotations") or {})
    annotations[ANNOTATION_APPLIED] = ",".join(sorted(_applied(old) | _applied(obj)))


def _names_kept(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether ``new`` names every policy ``old`` names as applied."""
    before = _applied_value(old)
    return before == _applied_value(new) or _applied(old) <= _applied(new)


def _applied_value(obj: Mapping[str, Any] | None) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(ANNOTATION_APPLIED) if isinstance(annotations, Mapping) else None
    return str(value or "")


def _applied(obj: Mapping[str, Any] | None) -> set[str]:
    return {n.strip() for n in _applied_value(obj).split(",") if n.strip()}


def _owned_trie(target: Target, path: Path_) -> _Trie:
    trie: _Trie = {}
    for field in placement.template_fields(target):
        node = trie
        for key in field[len(path) : -1]:
            node = node.setdefault(key, {})
        node[field[-1]] = None
    return trie


def _same_apart_from(old: Any, new: Any, owned: _Trie) -> bool:
    """Whether ``old`` and ``new`` are equal once the owned fields are left out; a container
    holding only owned fields equals an absent one."""
    old, new = {} if old is None else old, {} if new is None else new
    if not isinstance(old, dict) or not isinstance(new, dict):
        return bool(old == new)
    for key in old.keys() | new.keys():
        if key not in owned:
            if key not in old or key not in new or old[key] != new[key]:
                return False
        elif owned[key] is not None and not _same_apart_from(old.get(key), new.get(key), owned[key]):
            return False
    return True


def _only_removed(old: Any, new: Any, owned: _Trie) -> bool:
    """Whether every owned field of ``new`` holds only what the same field of ``old`` holds."""
    for key, sub in owned.items():
        mine = new.get(key) if isinstance(new, dict) else None
        if mine is None:
            continue
        theirs = old.get(key) if isinstance(old, dict) else None
        if sub is None:
            if not _within(mine, theirs):
                return False
        elif not _only_removed(theirs, mine, sub):
            return False
    return True


def _within(part: Any, whole: Any) -> bool:
    """Whether ``part`` is ``whole`` with entries left out: a mapping's keys (recursively), a
    list's entries (each within some entry of the other list); other values are equal."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and _within(v, whole[k]) for k, v in part.items())
    if isinstance(part, list):
        return isinstance(whole, list) and all(any(_within(p, w) for w in whole) for p in part)
    return bool(part == whole)
