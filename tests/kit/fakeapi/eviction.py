"""POST .../pods/{name}/eviction, following pkg/registry/core/pod/storage/eviction.go
(EvictionREST.Create, checkAndDecrement, getPodDisruptionBudgets, addConditionAndDeletePod):

  1. name in the URL must equal the Eviction's name (400); dryRun in the query and in
     deleteOptions must agree (propagateDryRun, a plain error: 500).
  2. canIgnorePDB: a pod that is Succeeded, Failed, Pending or already terminating is deleted
     without looking at budgets (with a resourceVersion precondition unless it is terminal or
     terminating: shouldEnforceResourceVersion).
  3. the budgets of the pod's namespace whose selector matches its labels: more than one -> the
     handler *returns* Status{Failure, code 500, "This pod has more than one PodDisruptionBudget,
     which the eviction subresource does not support."}, which handlers/create.go writes with HTTP
     201 (it only fills Status.Code when it is 0, and always writes http.StatusCreated).
  4. a pod that is not Ready: AlwaysAllow (unhealthyPodEvictionPolicy, on by default from 1.27) or
     currentHealthy >= desiredHealthy > 0 (from 1.20) -> deleted without decrementing the budget.
  5. checkAndDecrement: observedGeneration < generation -> 429 "still being processed" (Retry-After
     10); disruptionsAllowed < 0 or more than 2000 disruptedPods -> 403; disruptionsAllowed == 0 ->
     429 TooManyRequests with a DisruptionBudget cause "The disruption budget %s needs %d healthy
     pods and has %d currently"; otherwise decrement, set the DisruptionAllowed condition when it
     reaches 0, record the pod in disruptedPods (not under dryRun) and write the budget's status.
  6. addConditionAndDeletePod: from 1.26 (PodDisruptionConditions) the pod first gets the
     DisruptionTarget=True condition (reason EvictionByEvictionAPI, "Eviction API: evicting"),
     then it is deleted with the Eviction's deleteOptions. Success is Status{Success} with 201.
"""
from __future__ import annotations

from typing import Any

from .discovery import PDBS, PODS
from .disruption import allowed_condition, set_condition
from .errors import JSON, ApiError, bad_request, conflict, forbidden, plain_error, too_many_requests
from .registry import Registry, clone, rfc3339
from .selectors import label_selector_reqs, labels_match
from .strategies import is_pod_ready, pod_phase

MAX_DISRUPTED_POD_SIZE = 2000
MULTIPLE_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def _too_many(pdb_name: str) -> ApiError:
    """createTooManyRequestsError."""
    return too_many_requests(VIOLATION, 10, [{"reason": "DisruptionBudget",
                                              "message": f"The disruption budget {pdb_name} is still being "
                                                         "processed by the server."}])


def evict(registry: Registry, ns: str, name: str, eviction: JSON, query_dry_run: list[str]) -> JSON:
    """Returns the Status body written with HTTP 201; raises ApiError for error answers."""
    meta = eviction.get("metadata") or {}
    if meta.get("name", "") != name:
        raise bad_request("name in URL does not match name in Eviction object")
    options: JSON = clone(eviction.get("deleteOptions") or {})
    body_dry = list(options.get("dryRun") or [])
    if not body_dry:
        options["dryRun"] = query_dry_run
    elif query_dry_run and query_dry_run != body_dry:
        raise plain_error(f"Non-matching dry-run options in request and content: {query_dry_run} and {body_dry}")
    dry_run = "All" in (options.get("dryRun") or [])
    minor = registry.api.minor
    user_rv = (options.get("preconditions") or {}).get("resourceVersion")
    with registry.store.lock:
        pod = registry.get(PODS, ns, name)
        terminating = bool(pod["metadata"].get("deletionTimestamp"))
        phase = pod_phase(pod)
        if phase in ("Succeeded", "Failed", "Pending") or terminating:  # canIgnorePDB
            opts = options
            if phase not in ("Succeeded", "Failed") and not terminating and user_rv is None:
                opts = _with_rv(options, pod["metadata"]["resourceVersion"])
            _delete_with_condition(registry, ns, name, opts, dry_run)
            return success()
        pdbs = matching_pdbs(registry, pod)
        if len(pdbs) > 1:
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": MULTIPLE_PDBS, "code": 500}
        skip_budget = False
        if pdbs and not is_pod_ready(pod):
            pdb = pdbs[0]
            status = pdb.get("status") or {}
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
            if minor >= 27 and policy == "AlwaysAllow":
                skip_budget = True
            elif minor >= 20 and status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0:
                skip_budget = True
        if pdbs and not skip_budget:
            _check_and_decrement(registry, pdbs[0], name, dry_run)
        opts = _with_rv(options, pod["metadata"]["resourceVersion"]) if skip_budget else options
        _delete_with_condition(registry, ns, name, opts, dry_run)
        return success()


def success() -> JSON:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _with_rv(options: JSON, rv: str) -> JSON:
    out = dict(options)
    out["preconditions"] = {**(options.get("preconditions") or {}), "resourceVersion": rv}
    return out


def matching_pdbs(registry: Registry, pod: JSON) -> list[JSON]:
    """getPodDisruptionBudgets: invalid selectors match nothing; an empty selector matches every pod."""
    ns = pod["metadata"].get("namespace", "")
    out = []
    for key, pdb in registry.store.table(PDBS.storage_key).objects.items():
        if not key.startswith(ns + "/"):
            continue
        reqs = label_selector_reqs((pdb.get("spec") or {}).get("selector"))
        if reqs is not None and labels_match(reqs, pod["metadata"].get("labels")):
            out.append(pdb)
    return out


def _check_and_decrement(registry: Registry, pdb: JSON, pod_name: str, dry_run: bool) -> None:
    meta, status = pdb["metadata"], dict(pdb.get("status") or {})
    name = meta["name"]
    if status.get("observedGeneration", 0) < meta.get("generation", 0):
        raise _too_many(name)
    allowed = status.get("disruptionsAllowed", 0)
    if allowed < 0:
        raise forbidden("policy", "poddisruptionbudget", name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        raise forbidden("policy", "poddisruptionbudget", name,
                        "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
    if allowed == 0:
        raise too_many_requests(VIOLATION, 0, [{
            "reason": "DisruptionBudget",
            "message": f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods "
                       f"and has {status.get('currentHealthy', 0)} currently"}])
    status["disruptionsAllowed"] = allowed - 1
    if status["disruptionsAllowed"] == 0 and registry.api.minor >= 21:
        status["conditions"] = set_condition(status.get("conditions") or [], allowed_condition(status))
    if dry_run:
        return
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: rfc3339()}
    new = clone(pdb)
    new["status"] = status
    registry._store(PDBS, registry.key(PDBS, meta.get("namespace"), name), new, pdb)


def _delete_with_condition(registry: Registry, ns: str, name: str, options: JSON, dry_run: bool) -> None:
    pod = registry.get(PODS, ns, name)
    if not dry_run and registry.api.minor >= 26:
        pre = options.get("preconditions") or {}
        for field, have in (("UID", pod["metadata"].get("uid")), ("ResourceVersion",
                                                                   pod["metadata"].get("resourceVersion"))):
            want = pre.get("uid" if field == "UID" else "resourceVersion")
            if want and want != have:
                what = ("The object might have been deleted and then recreated" if field == "UID"
                        else "The object might have been modified")
                raise conflict("", "Pod", name, f"the {field} in the precondition ({want}) does not match the "
                                                f"{field} in record ({have}). {what}")
        new = clone(pod)
        conds: list[Any] = (new.setdefault("status", {})).setdefault("conditions", [])
        target = {"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                  "lastTransitionTime": rfc3339(), "reason": "EvictionByEvictionAPI",
                  "message": "Eviction API: evicting"}
        existing = next((c for c in conds if isinstance(c, dict) and c.get("type") == "DisruptionTarget"), None)
        if existing is None:
            conds.append(target)
        elif (existing.get("status"), existing.get("reason"), existing.get("message")) != (
                "True", "EvictionByEvictionAPI", "Eviction API: evicting"):
            if existing.get("status") == "True":
                target["lastTransitionTime"] = existing.get("lastTransitionTime")
            existing.update(target)
        if new != pod:
            stored = registry._store(PODS, registry.key(PODS, ns, name), new, pod)
            if (options.get("preconditions") or {}).get("resourceVersion"):
                options = _with_rv(options, stored["metadata"]["resourceVersion"])
    registry.delete(PODS, ns, name, options, dry_run=dry_run)
