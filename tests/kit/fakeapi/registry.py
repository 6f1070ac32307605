"""Create / update / patch / delete with the generic registry's rules
(staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go, registry/rest/create.go and
update.go, handlers/create.go, update.go, patch.go, delete.go).

  * create: WipeObjectMetaSystemFields, name or generateName (names.SimpleNameGenerator: 5 chars of
    "bcdfghjklmnpqrstvwxz2456789", base cut to 58), NamespaceLifecycle admission (missing
    namespace -> 404 ``namespaces "x" not found``, terminating -> 403 with a NamespaceTerminating
    cause), strategy, uid/creationTimestamp, AlreadyExists.
  * update: name/namespace must match the URL (400), a non-empty stale resourceVersion is a 409
    Conflict, uid/creationTimestamp/deletionTimestamp are kept, no-op writes are not stored
    (etcd3 GuaranteedUpdate short-circuit), and an object whose last finalizer goes away while
    deletionGracePeriodSeconds is 0 is deleted (Store.shouldDeleteDuringUpdate).
  * delete: preconditions (409 with storage.Preconditions.Check's message), finalizers ->
    deletionTimestamp instead of removal, graceful pod deletion (podStrategy.CheckGracefulDelete),
    ReturnDeletedObject for pods, a success Status {name, group, kind: <resource>, uid} otherwise.
"""
from __future__ import annotations

import copy
import random
import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from . import managed, strategies
from .discovery import ALL_STORED, NAMESPACES, PODS, PRIORITY_CLASSES, Resource, ServedApi, from_storage, to_storage
from .errors import (
    JSON,
    FieldError,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    generate_name_conflict,
    invalid,
    modified,
    not_found,
    plain_error,
)
from .patch import apply as apply_patch
from .store import Store, object_key

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
ALLOW_CREATE_ON_UPDATE = ("Event",)


_clock: list[Any] = [0, ""]


def rfc3339(moment: datetime | None = None) -> str:
    if moment is not None:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    now = int(time.time())
    if _clock[0] != now:  # one strftime per second is plenty
        _clock[0], _clock[1] = now, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return str(_clock[1])


def new_uid() -> str:
    """A random (version 4) UUID string."""
    h = f"{random.getrandbits(128) & ~(0xF << 76) & ~(0x3 << 62) | (0x4 << 76) | (0x2 << 62):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def clone(obj: Any) -> Any:
    return copy.deepcopy(obj)


class Registry:
    def __init__(self, store: Store, api: ServedApi, *, graceful_pod_deletion: bool = False,
                 namespace_controller: bool = True) -> None:
        self.store = store
        self.api = api
        self.graceful_pod_deletion = graceful_pod_deletion
        self.namespace_controller = namespace_controller
        self.after_write: list[Callable[[Resource, JSON | None, JSON | None], None]] = []

    # -- helpers --
    def key(self, res: Resource, ns: str | None, name: str) -> str:
        return object_key(ns if res.namespaced else None, name)

    def get(self, res: Resource, ns: str | None, name: str) -> JSON:
        with self.store.lock:
            obj = self.store.table(res.storage_key).objects.get(self.key(res, ns, name))
        if obj is None:
            raise not_found(res.group, res.plural, name)
        return obj

    def find(self, res: Resource, ns: str | None, name: str) -> JSON | None:
        return self.store.table(res.storage_key).objects.get(self.key(res, ns, name))

    def _store(self, res: Resource, key: str, obj: JSON, prev: JSON | None) -> JSON:
        out = self.store.put(res.storage_key, key, obj, prev)
        for hook in self.after_write:
            hook(res, prev, out)
        return out

    def _remove(self, res: Resource, key: str) -> JSON:
        prev = self.store.remove(res.storage_key, key)
        for hook in self.after_write:
            hook(res, prev, None)
        return prev

    # -- create --
    def create(self, res: Resource, ns: str | None, body: JSON, *, api_version: str, dry_run: bool = False,
               manager: str | None = None, admission: bool = True) -> JSON:
        obj = body
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        self._ensure_namespace(res, ns, meta)
        for key in ("creationTimestamp", "uid", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink",
                    "managedFields"):
            meta.pop(key, None)
        if meta.get("resourceVersion") not in (None, ""):
            raise plain_error("resourceVersion should not be set on objects to be created")
        meta.pop("resourceVersion", None)
        generate = not meta.get("name") and bool(meta.get("generateName"))
        if not meta.get("name") and not generate:
            raise invalid(res.group, res.kind, "", [FieldError("FieldValueRequired", "metadata.name",
                                                               "name or generateName is required")])
        with self.store.lock:
            if admission and res.namespaced:
                self._admit_namespace(res, ns or "", meta.get("name", ""))
            strategies.prepare_for_create(res.kind, obj, self.api.minor,
                                          self._priority_lookup if admission and res is PODS else None)
            meta["uid"] = new_uid()
            meta["creationTimestamp"] = rfc3339()
            for attempt in range(8):  # generic registry retries generated-name conflicts
                if generate:
                    meta["name"] = meta["generateName"][:58] + "".join(random.choices(_ALPHABET, k=5))
                self._validate_name(res, meta["name"])
                key = self.key(res, ns, meta["name"])
                if key not in self.store.table(res.storage_key).objects:
                    break
                if not generate:
                    raise already_exists(res.group, res.plural, meta["name"])
            else:
                raise generate_name_conflict(res.group, res.plural, meta["name"])
            if manager is not None:
                managed.update(None, obj, manager, api_version)
            if dry_run:
                return obj
            return self._store(res, key, obj, None)

    def _ensure_namespace(self, res: Resource, ns: str | None, meta: JSON) -> None:
        # rest.EnsureObjectNamespaceMatchesRequestNamespace
        have = meta.get("namespace") or ""
        want = ns or "" if res.namespaced else ""
        if have == want:
            return
        if not have:
            meta["namespace"] = want
        elif not want:
            meta.pop("namespace", None)
        else:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")

    def _validate_name(self, res: Resource, name: str) -> None:
        pattern, what, regex = ((_LABEL, "RFC 1123 label", "[a-z0-9]([-a-z0-9]*[a-z0-9])?") if res is NAMESPACES else
                                (_SUBDOMAIN, "RFC 1123 subdomain",
                                 "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"))
        limit = 63 if res is NAMESPACES else 253
        if not pattern.match(name) or len(name) > limit:
            detail = (f"a lowercase {what} must consist of lower case alphanumeric characters, '-'"
                      f"{'' if res is NAMESPACES else ' or ' + chr(39) + '.' + chr(39)}, and must start and end "
                      f"with an alphanumeric character (regex used for validation is '{regex}')")
            raise invalid(res.group, res.kind, name, [FieldError("FieldValueInvalid", "metadata.name", detail, name)])

    def _admit_namespace(self, res: Resource, ns: str, name: str) -> None:
        """plugin/namespace/lifecycle Lifecycle.Admit for creates."""
        namespace = self.find(NAMESPACES, None, ns)
        if namespace is None:
            raise not_found("", "namespaces", ns)
        if (namespace.get("status") or {}).get("phase") == "Terminating":
            raise forbidden(res.group, res.plural, name,
                            f"unable to create new content in namespace {ns} because it is being terminated",
                            [{"reason": "NamespaceTerminating", "message": f"namespace {ns} is being terminated",
                              "field": "metadata.namespace"}])

    def _priority_lookup(self, name: str | None) -> JSON | None:
        table = self.store.table(PRIORITY_CLASSES.storage_key).objects
        if name is not None:
            return table.get(name)
        return next((pc for pc in table.values() if pc.get("globalDefault")), None)

    # -- update / patch --
    def update(self, res: Resource, ns: str | None, name: str, body: JSON, *, api_version: str,
               subresource: str = "", dry_run: bool = False, manager: str | None = None) -> tuple[JSON, bool]:
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            meta = body["metadata"] = {}
        if (meta.get("name") or "") != name:
            raise bad_request(f"the name of the object ({meta.get('name') or ''}) does not match the name on the "
                              f"URL ({name})")
        self._ensure_namespace(res, ns, meta)
        with self.store.lock:
            old = self.find(res, ns, name)
            if old is None:
                if res.kind in ALLOW_CREATE_ON_UPDATE and not subresource:
                    meta.pop("resourceVersion", None)
                    return self.create(res, ns, body, api_version=api_version, dry_run=dry_run, manager=manager), True
                raise not_found(res.group, res.plural, name)
            rv = meta.get("resourceVersion") or ""
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise modified(res.group, res.plural, name)
            return self._finish_update(res, ns, name, body, old, api_version, subresource, dry_run, manager), False

    def patch(self, res: Resource, ns: str | None, name: str, patch_type: str, data: bytes, *, api_version: str,
              subresource: str = "", dry_run: bool = False, manager: str | None = None) -> JSON:
        with self.store.lock:
            old = self.find(res, ns, name)
            if old is None:
                raise not_found(res.group, res.plural, name)
            versioned = {"kind": res.kind, "apiVersion": api_version, **clone(from_storage(res, old))}
            patched = apply_patch(patch_type, versioned, data, res.kind)
            new = to_storage(res, patched)
            meta = new.get("metadata")
            if not isinstance(meta, dict):
                meta = new["metadata"] = {}
            rv = meta.get("resourceVersion") or ""
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise modified(res.group, res.plural, name)
            meta["name"] = name
            if res.namespaced:
                meta["namespace"] = ns
            return self._finish_update(res, ns, name, new, old, api_version, subresource, dry_run, manager)

    def _finish_update(self, res: Resource, ns: str | None, name: str, new: JSON, old: JSON, api_version: str,
                       subresource: str, dry_run: bool, manager: str | None) -> JSON:
        meta, old_meta = new["metadata"], old["metadata"]
        uid = meta.get("uid")
        if uid and uid != old_meta.get("uid"):
            raise invalid(res.group, res.kind, name, [FieldError("FieldValueInvalid", "metadata.uid",
                                                                 "field is immutable", uid)])
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        meta["managedFields"] = clone(old_meta.get("managedFields")) if old_meta.get("managedFields") else None
        if meta["managedFields"] is None:
            del meta["managedFields"]
        if subresource == "status":
            strategies.prepare_for_status_update(res.kind, new, old)
        else:
            strategies.prepare_for_update(res.kind, new, old, self.api.minor)
        if manager is not None:
            managed.update(old, new, manager, api_version, subresource)
        if new == old:
            return old
        if dry_run:
            return new
        key = self.key(res, ns, name)
        if (not meta.get("finalizers") and old_meta.get("deletionTimestamp")
                and old_meta.get("deletionGracePeriodSeconds") == 0):
            self._remove(res, key)
            return new
        return self._store(res, key, new, old)

    # -- delete --
    def delete(self, res: Resource, ns: str | None, name: str, options: JSON, *,
               dry_run: bool = False) -> tuple[JSON | None, JSON, bool]:
        """Returns (object or None for a Status answer, the last state, deleted)."""
        with self.store.lock:
            obj = self.find(res, ns, name)
            if obj is None:
                raise not_found(res.group, res.plural, name)
            self._check_preconditions(res, ns, name, obj, options.get("preconditions") or {})
            if res is NAMESPACES:
                return self._delete_namespace(obj, dry_run)
            meta = obj["metadata"]
            key = self.key(res, ns, name)
            grace = self._grace_period(res, obj, options)
            if meta.get("deletionTimestamp") and (grace is None or grace > 0 or meta.get("finalizers")):
                return obj, obj, False  # deletion already pending
            if meta.get("finalizers") or (grace or 0) > 0:
                new = clone(obj)
                now = datetime.now(timezone.utc)
                new["metadata"]["deletionTimestamp"] = rfc3339(now + timedelta(seconds=grace or 0))
                new["metadata"]["deletionGracePeriodSeconds"] = grace or 0
                if int(meta.get("generation") or 0) > 0:  # markAsDeleting / rest.BeforeDelete bump it
                    new["metadata"]["generation"] = int(meta["generation"]) + 1
                if dry_run:
                    return new, new, False
                stored = self._store(res, key, new, obj)
                return stored, stored, False
            if dry_run:
                return (obj if res is PODS else None), obj, True
            prev = self._remove(res, key)
            return (prev if res is PODS else None), prev, True

    def _grace_period(self, res: Resource, obj: JSON, options: JSON) -> int | None:
        """podStrategy.CheckGracefulDelete; None for kinds without graceful deletion."""
        if res is not PODS:
            return None
        if not self.graceful_pod_deletion:
            return 0
        spec = obj.get("spec") or {}
        period = options.get("gracePeriodSeconds")
        if period is None:  # the API default of terminationGracePeriodSeconds is 30
            period = spec.get("terminationGracePeriodSeconds", 30)
        period = int(period or 0)
        if not spec.get("nodeName") or strategies.pod_phase(obj) in ("Succeeded", "Failed"):
            period = 0
        return 1 if period < 0 else period

    def _check_preconditions(self, res: Resource, ns: str | None, name: str, obj: JSON, pre: JSON) -> None:
        """storage.Preconditions.Check, as InterpretDeleteError turns it into a Conflict."""
        # the etcd key: nodes live under "minions" (pkg/registry/core/node/storage)
        meta = obj["metadata"]
        prefix = "minions" if res.plural == "nodes" and not res.group else res.plural
        key = f"/registry/{prefix}/{self.key(res, ns, name)}"
        for field, have in (("UID", meta.get("uid")), ("ResourceVersion", meta.get("resourceVersion"))):
            want = pre.get("uid" if field == "UID" else "resourceVersion")
            if want is not None and want != have:
                raise conflict(res.group, res.plural, name,
                               f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
                               f"AdditionalErrorMsg: Precondition failed: {field} in precondition: {want}, "
                               f"{field} in object meta: {have}")

    def _delete_namespace(self, ns_obj: JSON, dry_run: bool) -> tuple[JSON | None, JSON, bool]:
        name = ns_obj["metadata"]["name"]
        if name in IMMORTAL_NAMESPACES:
            raise forbidden("", "namespaces", name, "this namespace may not be deleted")
        new = clone(ns_obj)
        if not new["metadata"].get("deletionTimestamp"):
            new["metadata"]["deletionTimestamp"] = rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
        new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}
        if dry_run:
            return new, new, False
        stored = new if new == ns_obj else self._store(NAMESPACES, name, new, ns_obj)
        if self.namespace_controller:
            self.finalize_namespace(name)
        return stored, stored, False

    def finalize_namespace(self, name: str) -> None:
        """What the namespace controller does: delete the content, then the namespace."""
        with self.store.lock:
            for storage, table in list(self.store.tables.items()):
                prefix = name + "/"
                for key in [k for k in table.objects if k.startswith(prefix)]:
                    res = next(r for r in ALL_STORED if r.storage_key == storage)
                    self._remove(res, key)
            if name in self.store.table(NAMESPACES.storage_key).objects:
                self._remove(NAMESPACES, name)

    # -- test controls: direct writes without admission or strategies --
    def force_put(self, res: Resource, obj: JSON) -> JSON:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            raise ValueError("apply_object needs metadata.name")
        ns = meta.get("namespace") if res.namespaced else None
        if res.namespaced and not ns:
            ns = meta["namespace"] = "default"
        with self.store.lock:
            key = self.key(res, ns, meta["name"])
            old = self.store.table(res.storage_key).objects.get(key)
            if old is not None:
                for field in ("uid", "creationTimestamp"):
                    meta.setdefault(field, old["metadata"].get(field))
            else:
                meta.setdefault("uid", new_uid())
                meta.setdefault("creationTimestamp", rfc3339())
                if strategies.has_generation(res.kind, self.api.minor):
                    meta.setdefault("generation", 1)
            meta.pop("resourceVersion", None)
            return self._store(res, key, obj, old)

    def force_remove(self, res: Resource, ns: str | None, name: str) -> JSON:
        with self.store.lock:
            key = self.key(res, ns, name)
            if key not in self.store.table(res.storage_key).objects:
                raise not_found(res.group, res.plural, name)
            return self._remove(res, key)

