"""Test controls: direct reads and writes of the store, callable from the test's thread or from
the server's loop. Direct writes skip admission and strategies (they are the test playing
kubelet, controllers or etcd): the object is stored as given — status included — with uid,
creationTimestamp and a new resourceVersion, and watchers see the change."""
from __future__ import annotations

from typing import Any

import msgspec

from .app import ApiApp
from .discovery import ALL_STORED, NAMESPACES, PODS, Resource, ServedApi, from_storage, to_storage
from .disruption import DisruptionController
from .errors import JSON
from .patch import merge_patch
from .registry import Registry
from .store import Store


def _copy(obj: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(obj))


class Controls:
    api: ServedApi
    store: Store
    registry: Registry
    app: ApiApp
    controller: DisruptionController

    def _resolve(self, kind: str, api_version: str | None = None) -> tuple[Resource, str]:
        for gv in self.api.group_versions:
            for res in gv.resources:
                if res.kind == kind and (api_version is None or gv.api_version == api_version):
                    return res, gv.api_version
        for res in ALL_STORED:  # stored but not served at this version (e.g. PDB v1 on 1.20)
            if res.kind == kind:
                return res, api_version or self.api.storage_version(res.storage_key)
        raise KeyError(f"unknown kind {kind!r}")

    def _with_type(self, res: Resource, api_version: str, obj: JSON) -> JSON:
        return {"kind": res.kind, "apiVersion": api_version, **_copy(from_storage(res, obj))}

    @property
    def resource_version(self) -> int:
        """The store's current resourceVersion (etcd revision)."""
        return self.store.rv

    def apply_object(self, obj: JSON, *, create_namespace: bool = True) -> JSON:
        """Create or replace ``obj`` (kind/apiVersion required) as given; returns the stored object."""
        stored = self._apply(_copy(obj), create_namespace=create_namespace)
        res, av = self._resolve(obj.get("kind", ""), obj.get("apiVersion"))
        return self._with_type(res, av, stored)

    def _apply(self, obj: JSON, *, create_namespace: bool) -> JSON:
        res, av = self._resolve(obj.get("kind", ""), obj.get("apiVersion"))
        body = to_storage(res, obj)
        meta = body.setdefault("metadata", {})
        with self.store.lock:
            if res.namespaced:
                ns = meta.setdefault("namespace", "default")
                if create_namespace and self.registry.find(NAMESPACES, None, ns) is None:
                    self.registry.create(NAMESPACES, None, {"metadata": {"name": ns}}, api_version="v1",
                                         admission=False)
            return self.registry.force_put(res, body)

    def get_object(self, kind: str, name: str, namespace: str | None = None,
                   api_version: str | None = None) -> JSON | None:
        res, av = self._resolve(kind, api_version)
        with self.store.lock:
            obj = self.registry.find(res, namespace, name)
            return None if obj is None else self._with_type(res, av, obj)

    def list_objects(self, kind: str, namespace: str | None = None, api_version: str | None = None) -> list[JSON]:
        res, av = self._resolve(kind, api_version)
        with self.store.lock:
            table = self.store.table(res.storage_key)
            prefix = f"{namespace}/" if namespace and res.namespaced else ""
            return [self._with_type(res, av, table.objects[k]) for k in table.keys_from("", prefix)]

    def patch_object(self, kind: str, name: str, patch: JSON, namespace: str | None = None,
                     api_version: str | None = None) -> JSON:
        """A JSON merge patch written directly (status included), e.g. to make a pod Ready."""
        res, av = self._resolve(kind, api_version)
        with self.store.lock:
            current = self.registry.find(res, namespace, name)
            if current is None:
                raise KeyError(f"{kind} {namespace}/{name} not found")
            merged = merge_patch(_copy(current), _copy(patch))
            merged["metadata"]["name"] = name
            if res.namespaced:
                merged["metadata"]["namespace"] = namespace or current["metadata"].get("namespace")
            return self._with_type(res, av, self.registry.force_put(res, merged))

    def delete_object(self, kind: str, name: str, namespace: str | None = None,
                      api_version: str | None = None) -> JSON:
        """Remove an object at once, finalizers and grace periods notwithstanding."""
        res, av = self._resolve(kind, api_version)
        return self._with_type(res, av, self.registry.force_remove(res, namespace, name))

    def finish_pod_termination(self, namespace: str, name: str) -> None:
        """What the kubelet does after a graceful delete: remove the terminating pod."""
        with self.store.lock:
            pod = self.registry.find(PODS, namespace, name)
            if pod is None or not pod["metadata"].get("deletionTimestamp"):
                raise ValueError(f"pod {namespace}/{name} is not terminating")
            self.registry.force_remove(PODS, namespace, name)

    def terminating_pods(self) -> list[tuple[str, str]]:
        with self.store.lock:
            pods = self.store.table(PODS.storage_key).objects.values()
            return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods
                    if p["metadata"].get("deletionTimestamp")]

    def finalize_namespace(self, name: str) -> None:
        """Run the namespace controller for a Terminating namespace (with ``namespace_controller=False``)."""
        self.registry.finalize_namespace(name)

    def compact(self) -> int:
        """Drop all history: older resourceVersions and continue tokens expire (410)."""
        return self.store.compact()

    def sync_pdbs(self) -> None:
        """Run the disruption controller over every budget now."""
        enabled = self.controller.enabled
        self.controller.enabled = True
        try:
            self.controller.sync_all()
        finally:
            self.controller.enabled = enabled

    def set_expected_pods(self, namespace: str, pdb_name: str, count: int) -> None:
        """Declare the controllers' scale for a budget (getExpectedScale) and resync it."""
        self.controller.expected[(namespace, pdb_name)] = count
        with self.store.lock:
            pdb = self.registry.find(self._resolve("PodDisruptionBudget")[0], namespace, pdb_name)
            if pdb is not None and self.controller.enabled:
                self.controller.sync(pdb)

    def set_node_metrics(self, name: str, cpu: str, memory: str, labels: dict[str, str] | None = None) -> None:
        self.app.metrics.set_node(name, cpu, memory, labels)

    def set_pod_metrics(self, namespace: str, name: str, containers: dict[str, tuple[str, str]],
                        labels: dict[str, str] | None = None) -> None:
        self.app.metrics.set_pod(namespace, name, containers, labels)
