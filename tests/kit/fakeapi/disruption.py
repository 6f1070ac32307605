"""An in-process stand-in for the disruption controller (pkg/controller/disruption/disruption.go),
switched on with ``pdb_controller=True``. It recomputes a PodDisruptionBudget's status whenever a
pod it selects, the budget itself, or a ReplicaSet/Deployment changes, with the controller's
arithmetic:

  * getExpectedPodCount: minAvailable as an integer -> expected = len(pods), desired = minAvailable;
    maxUnavailable or a percentage minAvailable -> expected = the scale of the pods' controllers
    (getExpectedScale: ReplicaSet, or the Deployment owning it; unmanaged pods are skipped; a pod
    whose controller cannot be found is an error), or a scale the test declared with
    ``set_expected_pods``; percentages use intstr.GetScaledValueFromIntOrPercent(roundUp=true);
    desired = max(expected - maxUnavailable, 0).
  * countHealthyPods: pods not being deleted, not in disruptedPods (younger than DeletionTimeout,
    2 minutes) and Ready.
  * buildDisruptedPodMap: entries of live, non-terminating pods younger than DeletionTimeout.
  * updatePdbStatus: disruptionsAllowed = currentHealthy - desiredHealthy, 0 when negative or when
    expectedCount <= 0; observedGeneration = generation; no write when nothing changed
    (ConditionsAreUpToDate); pdbhelper.UpdateDisruptionAllowedCondition sets the DisruptionAllowed
    condition (SufficientPods / InsufficientPods).
  * failSafe: on an error, disruptionsAllowed = 0 and DisruptionAllowed=False reason SyncFailed.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from .discovery import DEPLOYMENTS, PDBS, PODS, REPLICASETS, Resource
from .errors import JSON
from .registry import Registry, clone, rfc3339
from .selectors import label_selector_reqs, labels_match
from .strategies import is_pod_ready

DELETION_TIMEOUT = 120.0


class SyncError(Exception):
    pass


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SyncError(f"invalid value for IntOrString: invalid type: {type(value).__name__}")
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise SyncError("invalid value for IntOrString: invalid type: string is not a percentage")
    try:
        percent = int(value[:-1])
    except ValueError:
        raise SyncError(f'invalid value "{value}": {value[:-1]!r} is not an integer') from None
    return math.ceil(percent * total / 100)


def set_condition(conditions: list[JSON], cond: JSON) -> list[JSON]:
    """apimeta.SetStatusCondition."""
    out = [dict(c) for c in conditions]
    for existing in out:
        if existing.get("type") == cond["type"]:
            if existing.get("status") != cond["status"]:
                existing["status"] = cond["status"]
                existing["lastTransitionTime"] = rfc3339()
            existing.update({k: cond[k] for k in ("reason", "message", "observedGeneration")})
            return out
    out.append({"type": cond["type"], "status": cond["status"], "observedGeneration": cond["observedGeneration"],
                "lastTransitionTime": rfc3339(), "reason": cond["reason"], "message": cond["message"]})
    return out


def allowed_condition(status: JSON, message: str = "", reason: str | None = None) -> JSON:
    ok = status.get("disruptionsAllowed", 0) > 0 and reason is None
    return {"type": "DisruptionAllowed", "status": "True" if ok else "False",
            "reason": reason or ("SufficientPods" if ok else "InsufficientPods"), "message": message,
            "observedGeneration": status.get("observedGeneration", 0)}


class DisruptionController:
    def __init__(self, registry: Registry, *, enabled: bool, deletion_timeout: float = DELETION_TIMEOUT) -> None:
        self.registry = registry
        self.enabled = enabled
        self.deletion_timeout = deletion_timeout
        self.expected: dict[tuple[str, str], int] = {}
        self._busy = False
        registry.after_write.append(self._on_write)

    def _on_write(self, res: Resource, prev: JSON | None, new: JSON | None) -> None:
        if not self.enabled or self._busy:
            return
        obj = new if new is not None else prev
        assert obj is not None
        ns = obj["metadata"].get("namespace", "")
        if res is PDBS:
            if new is not None and (prev is None or prev.get("spec") != new.get("spec")
                                    or prev["metadata"].get("generation") != new["metadata"].get("generation")):
                self.sync(new)
        elif res is PODS:
            labels = [(o["metadata"].get("labels") or {}) for o in (prev, new) if o is not None]
            for pdb in self._pdbs(ns):
                reqs = label_selector_reqs((pdb.get("spec") or {}).get("selector"))
                if reqs is not None and any(labels_match(reqs, lab) for lab in labels):
                    self.sync(pdb)
        elif res in (REPLICASETS, DEPLOYMENTS):
            for pdb in self._pdbs(ns):
                self.sync(pdb)

    def _pdbs(self, ns: str) -> list[JSON]:
        table = self.registry.store.table(PDBS.storage_key).objects
        return [p for k, p in table.items() if k.startswith(ns + "/")]

    def sync_all(self) -> None:
        with self.registry.store.lock:
            for pdb in list(self.registry.store.table(PDBS.storage_key).objects.values()):
                self.sync(pdb)

    def sync(self, pdb: JSON) -> None:
        with self.registry.store.lock:
            self._busy = True
            try:
                try:
                    status, recheck = self._compute(pdb)
                except SyncError as exc:
                    status = dict(pdb.get("status") or {})
                    status["disruptionsAllowed"] = 0
                    status["conditions"] = set_condition(status.get("conditions") or [], allowed_condition(
                        status, str(exc), "SyncFailed"))
                    recheck = None
                self._write(pdb, status)
            finally:
                self._busy = False
        if recheck is not None:
            self._schedule(pdb, recheck)

    def _compute(self, pdb: JSON) -> tuple[JSON, float | None]:
        meta, spec, old = pdb["metadata"], pdb.get("spec") or {}, pdb.get("status") or {}
        ns = meta.get("namespace", "")
        reqs = label_selector_reqs(spec.get("selector"))
        if reqs is None and spec.get("selector") is not None:
            raise SyncError("invalid label selector")
        pods = [] if reqs is None else [
            p for k, p in self.registry.store.table(PODS.storage_key).objects.items()
            if k.startswith(ns + "/") and labels_match(reqs, p["metadata"].get("labels"))]
        expected, desired = self._expected(pdb, pods)
        now = datetime.now(timezone.utc)
        disrupted: dict[str, str] = {}
        recheck: float | None = None
        names = {p["metadata"]["name"]: p for p in pods}
        for name, when in (old.get("disruptedPods") or {}).items():
            pod = names.get(name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            left = (parse_time(when) - now).total_seconds() + self.deletion_timeout
            if left > 0:
                disrupted[name] = when
                recheck = left if recheck is None else min(recheck, left)
        healthy = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")
                      and p["metadata"]["name"] not in disrupted and is_pod_ready(p))
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        status: JSON = {"observedGeneration": meta.get("generation", 0)}
        if disrupted:
            status["disruptedPods"] = disrupted
        status.update({"disruptionsAllowed": allowed, "currentHealthy": healthy, "desiredHealthy": desired,
                       "expectedPods": expected})
        status["conditions"] = set_condition(old.get("conditions") or [], allowed_condition(status))
        return status, recheck

    def _expected(self, pdb: JSON, pods: list[JSON]) -> tuple[int, int]:
        spec = pdb.get("spec") or {}
        key = (pdb["metadata"].get("namespace", ""), pdb["metadata"]["name"])
        if spec.get("maxUnavailable") is not None:
            expected = self._scale(key, pods)
            return expected, max(expected - scaled(spec["maxUnavailable"], expected), 0)
        minimum = spec.get("minAvailable")
        if minimum is None:
            return 0, 0
        if isinstance(minimum, int) and not isinstance(minimum, bool):
            return len(pods), minimum
        expected = self._scale(key, pods)
        return expected, scaled(minimum, expected)

    def _scale(self, key: tuple[str, str], pods: list[JSON]) -> int:
        """getExpectedScale: the sum of the scales of the pods' controllers."""
        if key in self.expected:
            return self.expected[key]
        scales: dict[str, int] = {}
        for pod in pods:
            ref = next((r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
            if ref is None or ref.get("uid") in scales:
                continue
            found = self._controller_scale(pod["metadata"].get("namespace", ""), ref)
            if found is None:
                raise SyncError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            scales[found[0]] = found[1]
        return sum(scales.values())

    def _controller_scale(self, ns: str, ref: JSON) -> tuple[str, int] | None:
        if ref.get("kind") != "ReplicaSet":
            return None
        rs = self.registry.find(REPLICASETS, ns, ref.get("name", ""))
        if rs is None or rs["metadata"].get("uid") != ref.get("uid"):
            return None
        owner = next((r for r in rs["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
        if owner is not None and owner.get("kind") == "Deployment":
            dep = self.registry.find(DEPLOYMENTS, ns, owner.get("name", ""))
            if dep is not None and dep["metadata"].get("uid") == owner.get("uid"):
                return dep["metadata"]["uid"], int((dep.get("spec") or {}).get("replicas", 1))
        return rs["metadata"]["uid"], int((rs.get("spec") or {}).get("replicas", 1))

    def _write(self, pdb: JSON, status: JSON) -> None:
        if pdb.get("status") == status:
            return
        new = clone(pdb)
        new["status"] = status
        meta = pdb["metadata"]
        self.registry._store(PDBS, self.registry.key(PDBS, meta.get("namespace"), meta["name"]), new, pdb)

    def _schedule(self, pdb: JSON, delay: float) -> None:
        loop = self.registry.store.loop
        if loop is None:
            return
        ns, name = pdb["metadata"].get("namespace", ""), pdb["metadata"]["name"]

        def recheck() -> None:
            current = self.registry.find(PDBS, ns, name)
            if current is not None and self.enabled:
                self.sync(current)

        loop.call_soon_threadsafe(loop.call_later, delay + 0.05, recheck)
