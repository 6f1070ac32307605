"""Hypothesis strategies for workloads a real API server accepts as they are: Deployments,
StatefulSets, Jobs, DaemonSets and Pods, with the labels the shipped and heavy policies select,
and with placement of their own (node affinity, pod anti-affinity, nodeSelector, tolerations,
rollout strategies) that the policies then merge into.

Every field is built the way the API server's validation wants it (pkg/apis/core/validation,
pkg/apis/apps/validation): node-selector requirements with values for In/NotIn, none for
Exists/DoesNotExist, one integer for Gt/Lt; pod affinity terms with a topologyKey; a Job's pod
restartPolicy Never or OnFailure, and no selector of its own; RollingUpdate parameters only with
that strategy type. The fault tier still asks the API server first and counts what it refuses.
"""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

IMAGE = "registry.k8s.io/pause:3.9"
KINDS = ("Deployment", "StatefulSet", "Job", "DaemonSet", "Pod")
# kind -> (API path prefix, plural)
PATHS: dict[str, tuple[str, str]] = {
    "Deployment": ("/apis/apps/v1", "deployments"),
    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
    "DaemonSet": ("/apis/apps/v1", "daemonsets"),
    "Job": ("/apis/batch/v1", "jobs"),
    "Pod": ("/api/v1", "pods"),
}
API_VERSIONS = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Job": "batch/v1",
                "Pod": "v1"}
# Labels the shipped policies (policies/) and the heavy set (bench/heavy-policies.yaml) select on.
POLICY_LABELS: tuple[tuple[str, str], ...] = (
    ("tier", "web"), ("tier", "database"), ("placement.novasphere.dev/criticality", "critical"),
    ("placement.novasphere.dev/cost-tier", "spot"), ("workload-type", "training"),
    ("placement.novasphere.dev/accelerator", "gpu"),
)
NODE_KEYS = ("topology.kubernetes.io/zone", "disktype", "maintenance", "example.com/gpu-count",
             "karpenter.sh/capacity-type", "node.kubernetes.io/instance-type")
VALUES = ("a", "b", "true", "ssd", "eu-west-1a", "spot", "on-demand")
TOPOLOGY_KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone")


def requirement() -> st.SearchStrategy[dict[str, Any]]:
    key = st.sampled_from(NODE_KEYS)
    listed = st.builds(lambda k, op, vs: {"key": k, "operator": op, "values": sorted(set(vs))}, key,
                       st.sampled_from(("In", "NotIn")), st.lists(st.sampled_from(VALUES), min_size=1, max_size=3))
    bare = st.builds(lambda k, op: {"key": k, "operator": op}, key, st.sampled_from(("Exists", "DoesNotExist")))
    number = st.builds(lambda k, op, n: {"key": k, "operator": op, "values": [str(n)]}, key,
                       st.sampled_from(("Gt", "Lt")), st.integers(0, 64))
    return st.one_of(listed, bare, number)


def node_term() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda exprs: {"matchExpressions": exprs}, st.lists(requirement(), min_size=1, max_size=3))


def node_affinity() -> st.SearchStrategy[dict[str, Any]]:
    required = st.builds(lambda terms: {"nodeSelectorTerms": terms}, st.lists(node_term(), min_size=1, max_size=3))
    preferred = st.lists(st.builds(lambda w, t: {"weight": w, "preference": t}, st.integers(1, 100), node_term()),
                         max_size=2)
    return st.fixed_dictionaries({}, optional={"requiredDuringSchedulingIgnoredDuringExecution": required,
                                               "preferredDuringSchedulingIgnoredDuringExecution": preferred})


def pod_term(labels: dict[str, str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda topology: {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": topology},
                     st.sampled_from(TOPOLOGY_KEYS))


def pod_anti_affinity(labels: dict[str, str]) -> st.SearchStrategy[dict[str, Any]]:
    preferred = st.lists(st.builds(lambda w, t: {"weight": w, "podAffinityTerm": t}, st.integers(1, 100),
                                   pod_term(labels)), min_size=1, max_size=2)
    return st.fixed_dictionaries({}, optional={
        "requiredDuringSchedulingIgnoredDuringExecution": st.lists(pod_term(labels), min_size=1, max_size=2),
        "preferredDuringSchedulingIgnoredDuringExecution": preferred,
    })


def toleration() -> st.SearchStrategy[dict[str, Any]]:
    effect = st.sampled_from(("NoSchedule", "PreferNoSchedule", "NoExecute"))
    exists = st.builds(lambda k, e: {"key": k, "operator": "Exists", "effect": e},
                       st.sampled_from(("spot", "dedicated", "kubernetes.azure.com/scalesetpriority")), effect)
    equal = st.builds(lambda k, v, e: {"key": k, "operator": "Equal", "value": v, "effect": e},
                      st.sampled_from(("dedicated", "gpu")), st.sampled_from(VALUES), effect)
    return st.one_of(exists, equal)


@st.composite
def pod_spec(draw: st.DrawFn, labels: dict[str, str], *, restart: tuple[str, ...] = ("Always",)) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": IMAGE}],
                            "restartPolicy": draw(st.sampled_from(restart))}
    affinity = {}
    if draw(st.booleans()):
        affinity["nodeAffinity"] = draw(node_affinity())
    if draw(st.booleans()):
        affinity["podAntiAffinity"] = draw(pod_anti_affinity(labels))
    if affinity:
        spec["affinity"] = affinity
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(st.dictionaries(st.sampled_from(NODE_KEYS), st.sampled_from(VALUES), max_size=2))
    if draw(st.booleans()):
        spec["tolerations"] = draw(st.lists(toleration(), max_size=3))
    return spec


def labels() -> st.SearchStrategy[dict[str, str]]:
    return st.builds(lambda chosen: {"app": "w", **dict(chosen)},
                     st.lists(st.sampled_from(POLICY_LABELS), max_size=3, unique_by=lambda kv: kv[0]))


def _rolling(surge: int | str, unavailable: int | str) -> dict[str, Any]:
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}


def _zero(amount: int | str) -> bool:
    return amount in (0, "0%")


def deployment_strategy() -> st.SearchStrategy[dict[str, Any]]:
    """No strategy, Recreate, RollingUpdate bare or with parameters (not both zero: refused)."""
    amount: st.SearchStrategy[int | str] = st.one_of(st.integers(0, 3), st.sampled_from(("25%", "50%", "0%")))
    pairs = st.tuples(amount, amount).filter(lambda pair: not (_zero(pair[0]) and _zero(pair[1])))
    rolling = pairs.map(lambda pair: _rolling(*pair))
    return st.one_of(st.just({}), st.just({"type": "Recreate"}), st.just({"type": "RollingUpdate"}), rolling)


@st.composite
def workload(draw: st.DrawFn, kind: str | None = None) -> dict[str, Any]:
    """One object of ``kind`` (any of ``KINDS`` by default) named ``w``."""
    kind = kind or draw(st.sampled_from(KINDS))
    chosen = draw(labels())
    obj: dict[str, Any] = {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": {"name": "w", "labels": chosen}}
    if kind == "Pod":
        obj["spec"] = draw(pod_spec(chosen, restart=("Always", "OnFailure", "Never")))
        return obj
    restart = ("Never", "OnFailure") if kind == "Job" else ("Always",)
    template = {"metadata": {"labels": chosen}, "spec": draw(pod_spec(chosen, restart=restart))}
    spec: dict[str, Any] = {"template": template}
    if kind != "Job":
        spec["selector"] = {"matchLabels": {"app": "w"}}
    if kind in ("Deployment", "StatefulSet"):
        spec["replicas"] = draw(st.integers(0, 5))
    if kind == "Deployment":
        strategy = draw(deployment_strategy())
        if strategy:
            spec["strategy"] = strategy
    if kind == "StatefulSet":
        spec["serviceName"] = "w"
        spec["podManagementPolicy"] = draw(st.sampled_from(("OrderedReady", "Parallel")))
    if kind == "Job":
        spec["backoffLimit"] = draw(st.integers(0, 6))
    obj["spec"] = spec
    return obj
