"""Pod and Node dicts for the scheduler tests, in the spirit of the kube-scheduler's own
``st.MakePod()`` / ``st.MakeNode()`` wrappers, so the Go test tables read over almost as is."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.scheduler import Cluster, Options
from webhook.scheduler.state import PlanState, plan_state

Obj = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"


def node(name: str, labels: Mapping[str, str] | None = None, *, capacity: Mapping[str, Any] | None = None,
         taints: Sequence[Mapping[str, Any]] = (), unschedulable: bool = False) -> Obj:
    """``st.MakeNode().Name(name).Label(...).Capacity(...)``: Capacity also sets allocatable,
    and pods to 32 unless given (as the Go wrapper does)."""
    status: Obj = {}
    if capacity is not None:
        status["allocatable"] = {"pods": "32", **{k: str(v) for k, v in capacity.items()}}
    spec: Obj = {"taints": list(taints)}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec, "status": status}


def pod(name: str = "p", *, ns: str = "default", labels: Mapping[str, str] | None = None, on: str | None = None,
        req: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        init: Sequence[Mapping[str, Any]] = (), sidecars: Sequence[Mapping[str, Any]] = (),
        priority: int | None = None, start: str | None = None, **spec: Any) -> Obj:
    """A pod; ``req`` is one container's requests (or a list, one per container; None: no
    container at all, as ``st.MakePod()``), ``init`` and ``sidecars`` requests of init
    containers (sidecars with restartPolicy Always)."""
    many = [] if req is None else [req] if isinstance(req, Mapping) else list(req)
    body: Obj = {"containers": [_container(f"c{i}", r) for i, r in enumerate(many)], **spec}
    inits = [_container(f"s{i}", r) | {"restartPolicy": "Always"} for i, r in enumerate(sidecars)]
    inits += [_container(f"i{i}", r) for i, r in enumerate(init)]
    if inits:
        body["initContainers"] = inits
    if on is not None:
        body["nodeName"] = on
    if priority is not None:
        body["priority"] = priority
    out: Obj = {"metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})}, "spec": body}
    if start is not None:
        out["status"] = {"startTime": start}
    return out


def _container(name: str, requests: Mapping[str, Any]) -> Obj:
    return {"name": name, "resources": {"requests": {k: str(v) for k, v in requests.items()}} if requests else {}}


def selector(match: Mapping[str, str] | None = None, **ops: Sequence[Any]) -> Obj:
    """A LabelSelector: ``selector({"a": "b"}, exists=["foo"], in_=[("k", ["v"])])``."""
    exprs: list[Obj] = [{"key": k, "operator": "Exists"} for k in ops.get("exists", ())]
    exprs += [{"key": k, "operator": "DoesNotExist"} for k in ops.get("absent", ())]
    exprs += [{"key": k, "operator": "In", "values": list(v)} for k, v in ops.get("in_", ())]
    exprs += [{"key": k, "operator": "NotIn", "values": list(v)} for k, v in ops.get("not_in", ())]
    out: Obj = {}
    if match:
        out["matchLabels"] = dict(match)
    if exprs:
        out["matchExpressions"] = exprs
    return out


def term(sel: Obj | None, key: str, *, namespaces: Sequence[str] | None = None, ns_selector: Any = ...,
         weight: int | None = None) -> Obj:
    """A PodAffinityTerm (a WeightedPodAffinityTerm with ``weight``)."""
    out: Obj = {"topologyKey": key}
    if sel is not None:
        out["labelSelector"] = sel
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if ns_selector is not ...:
        out["namespaceSelector"] = ns_selector
    return {"weight": weight, "podAffinityTerm": out} if weight is not None else out


def pod_affinity(required: Sequence[Obj] = (), preferred: Sequence[Obj] = (), anti: Sequence[Obj] = (),
                 anti_preferred: Sequence[Obj] = ()) -> Obj:
    out: Obj = {}
    if required or preferred:
        out["podAffinity"] = {k: list(v) for k, v in (("requiredDuringSchedulingIgnoredDuringExecution", required),
                                                       ("preferredDuringSchedulingIgnoredDuringExecution", preferred)) if v}
    if anti or anti_preferred:
        out["podAntiAffinity"] = {k: list(v) for k, v in (("requiredDuringSchedulingIgnoredDuringExecution", anti),
                                                           ("preferredDuringSchedulingIgnoredDuringExecution", anti_preferred)) if v}
    return out


def required_nodes(*terms: Obj) -> Obj:
    """``affinity`` with required node affinity made of these NodeSelectorTerms."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, op: str, *values: str) -> Obj:
    out: Obj = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def spread(max_skew: int, key: str, when: str, sel: Obj | None, *, min_domains: int | None = None,
           affinity_policy: str | None = None, taints_policy: str | None = None,
           match_label_keys: Sequence[str] = ()) -> Obj:
    """``SpreadConstraint(maxSkew, key, when, selector, minDomains, nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys)``."""
    out: Obj = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if sel is not None:
        out["labelSelector"] = sel
    for field, value in (("minDomains", min_domains), ("nodeAffinityPolicy", affinity_policy),
                         ("nodeTaintsPolicy", taints_policy)):
        if value is not None:
            out[field] = value
    if match_label_keys:
        out["matchLabelKeys"] = list(match_label_keys)
    return out


def state_for(incoming: Obj, nodes: Sequence[Obj], pods: Sequence[Obj] = (), *,
              namespaces: Mapping[str, Mapping[str, str]] | None = None,
              default_selector: Obj | None = None, options: Options | None = None) -> tuple[PlanState, Cluster]:
    """The PreFilter/PreScore state of ``incoming`` over a snapshot of ``nodes`` and ``pods``."""
    cluster = Cluster.from_objects(nodes, pods, namespaces)
    return plan_state(incoming, cluster, default_selector, options or Options()), cluster


# A Deployment being updated over its running pods, for the rollout simulation and its suggestions.
ONE_PER_NODE = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}]}}


def nodes(count: int) -> list[Obj]:
    return [node(f"n{i}", {HOSTNAME: f"n{i}"}, capacity={"cpu": "4", "memory": "8Gi"}) for i in range(count)]


def running(replicas: int, count_nodes: int) -> list[Obj]:
    """The old revision: one pod of app=web per node, without any anti-affinity."""
    return [{"metadata": {"name": f"web-old-{i}", "namespace": "default",
                          "labels": {"app": "web", "pod-template-hash": "old"}},
             "spec": {"nodeName": f"n{i % count_nodes}", "containers": [{"name": "c", "image": "i"}]}}
            for i in range(replicas)]


def deployment(replicas: int = 2, *, surge: Any = 1, unavailable: Any = 0, affinity: Obj | None = None,
               strategy: str = "RollingUpdate") -> Obj:
    pod_spec: Obj = {"containers": [{"name": "c", "image": "i:2"}]}
    if affinity is not None:
        pod_spec["affinity"] = affinity
    spec: Obj = {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec},
                 "strategy": {"type": strategy}}
    if strategy == "RollingUpdate":
        spec["strategy"]["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": spec}
