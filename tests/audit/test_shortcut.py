"""The rollout shortcut says only what the simulation says: on random small clusters, whenever
``rollout_completes`` answers, ``rolling_update`` finds the rollout completes too, and whenever
``ordered_update_completes`` answers, so does the StatefulSet's ``ordered_update``."""
from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from webhook.audit.shortcut import ordered_update_completes, rollout_completes
from webhook.audit.state import AuditState
from webhook.explain.simulate import statefulset_update
from webhook.explain.workloads import build
from webhook.kube.kinds import BUILTIN
from webhook.scheduler.rollouts import rolling_update

HOSTNAME = "kubernetes.io/hostname"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
TAINT = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}


def node(name: str, *, cpu: int = 2000, pods: int = 10, cordoned: bool = False, tainted: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"unschedulable": cordoned}
    if tainted:
        spec["taints"] = [TAINT]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {HOSTNAME: name}},
            "spec": spec, "status": {"allocatable": {"cpu": f"{cpu}m", "memory": "8Gi", "pods": str(pods)}}}


def deployment(replicas: int, *, cpu: int = 500, strategy: dict[str, Any] | None = None, spread: bool = False,
               tolerates: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "web", "resources": {"requests": {"cpu": f"{cpu}m"}}}]}
    if spread:
        spec["affinity"] = {"podAntiAffinity": {REQUIRED: [{"labelSelector": {"matchLabels": {"app": "web"}},
                                                            "topologyKey": HOSTNAME}]}}
    if tolerates:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    body: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}
    if strategy is not None:
        body["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
            "spec": body}


def pod(name: str, on: str, *, cpu: int, labels: dict[str, str], anti: str | None = None,
        spec: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {**(spec or {}), "nodeName": on,
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu}m"}}}]}
    if anti is not None:
        body["affinity"] = {"podAntiAffinity": {REQUIRED: [{"labelSelector": {"matchLabels": {"app": anti}},
                                                            "topologyKey": HOSTNAME}]}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop", "labels": labels},
            "spec": body, "status": {"phase": "Running"}}


def replicas_of(dep: dict[str, Any], nodes: list[str], *, cpu: int | None = None) -> list[dict[str, Any]]:
    """The Deployment's running pods, one per entry of ``nodes``, of its template (another
    ``cpu`` makes them an older revision asking for something else)."""
    template = dep["spec"]["template"]
    asked = cpu if cpu is not None else int(template["spec"]["containers"][0]["resources"]["requests"]["cpu"][:-1])
    labels = {**template["metadata"]["labels"], "pod-template-hash": "old"}
    return [pod(f"web-old-{i}", on, cpu=asked, labels=labels, spec=template["spec"]) for i, on in enumerate(nodes)]


def verdicts(objects: list[dict[str, Any]], dep: dict[str, Any]) -> tuple[Any, bool]:
    state = AuditState.from_objects([*objects, dep], targets=BUILTIN)
    running = state.pods.selected("shop", dep["spec"]["selector"])
    return rollout_completes(dep, running, state), rolling_update(dep, state.cluster.cluster).completes


strategies = st.one_of(
    st.none(),
    st.just({"type": "Recreate"}),
    st.builds(lambda s, u: {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": s, "maxUnavailable": u}},
              st.one_of(st.integers(0, 2), st.sampled_from(["25%", "50%"])),
              st.one_of(st.integers(0, 2), st.sampled_from(["0%", "25%"]))),
)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    count = draw(st.integers(1, 3))
    nodes = [node(f"n{i}", cpu=draw(st.sampled_from([1000, 2000])), pods=draw(st.sampled_from([2, 3, 10])),
                  cordoned=draw(st.booleans()) and draw(st.booleans()), tainted=draw(st.booleans()) and draw(st.booleans()))
             for i in range(count)]
    names = [n["metadata"]["name"] for n in nodes]
    replicas = draw(st.integers(0, 4))
    dep = deployment(replicas, cpu=draw(st.sampled_from([250, 500, 1000])), strategy=draw(strategies),
                     spread=draw(st.booleans()) and draw(st.booleans()), tolerates=draw(st.booleans()))
    running = draw(st.integers(max(0, replicas - 1), replicas + 1))
    where = [draw(st.sampled_from(names)) for _ in range(running)]
    other_cpu = draw(st.none() | st.sampled_from([250, 750]))
    objects: list[dict[str, Any]] = [*nodes, *replicas_of(dep, where, cpu=other_cpu)]
    for i in range(draw(st.integers(0, 2))):
        anti = draw(st.sampled_from([None, None, "web"]))
        objects.append(pod(f"other-{i}", draw(st.sampled_from(names)), cpu=draw(st.sampled_from([250, 500, 1000])),
                           labels={"app": f"other-{i}"}, anti=anti))
    return objects, dep


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_whenever_the_shortcut_answers_the_simulation_finds_the_rollout_completes(
        case: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    objects, dep = case
    shortcut, simulated = verdicts(objects, dep)
    event("decided by the shortcut" if shortcut is not None else "left to the simulation")
    if shortcut is not None:
        assert simulated, "the shortcut said the rollout completes; the simulation found it stuck"


def test_a_plain_deployment_whose_nodes_take_its_replacements_is_decided_without_simulating() -> None:
    dep = deployment(2, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    shortcut, simulated = verdicts([node("a"), node("b"), *replicas_of(dep, ["a", "b"])], dep)
    assert shortcut is not None and shortcut.completes and simulated
    assert (shortcut.replicas, shortcut.strategy, shortcut.max_surge, shortcut.max_unavailable) == (
        2, "RollingUpdate", 1, 0)


def test_required_hostname_anti_affinity_is_left_to_the_simulation_which_finds_it_stuck() -> None:
    dep = deployment(2, spread=True, strategy={"type": "RollingUpdate",
                                               "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    shortcut, simulated = verdicts([node("a"), node("b"), *replicas_of(dep, ["a", "b"])], dep)
    assert shortcut is None and not simulated


def test_with_max_unavailable_0_a_full_cluster_is_left_to_the_simulation_which_finds_it_stuck() -> None:
    dep = deployment(2, cpu=1000, strategy={"type": "RollingUpdate",
                                            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    full = [node("a", cpu=1000), node("b", cpu=1000), *replicas_of(dep, ["a", "b"])]
    shortcut, simulated = verdicts(full, dep)
    assert shortcut is None and not simulated


def test_a_node_cordoned_since_its_pod_was_bound_is_left_to_the_simulation() -> None:
    dep = deployment(1, strategy={"type": "Recreate"})
    shortcut, simulated = verdicts([node("a", cordoned=True), *replicas_of(dep, ["a"])], dep)
    assert shortcut is None and not simulated


def test_a_running_pod_whose_anti_affinity_repels_the_new_pods_is_left_to_the_simulation() -> None:
    dep = deployment(1)
    repelling = pod("guard", "a", cpu=100, labels={"app": "guard"}, anti="web")
    shortcut, _ = verdicts([node("a"), node("b"), repelling, *replicas_of(dep, ["b"])], dep)
    assert shortcut is None


def test_old_pods_asking_for_other_resources_are_left_to_the_simulation() -> None:
    dep = deployment(1, cpu=500)
    shortcut, _ = verdicts([node("a"), *replicas_of(dep, ["a"], cpu=250)], dep)
    assert shortcut is None


# --- StatefulSets -------------------------------------------------------------------------------

STATEFULSET = BUILTIN.lookup("apps", "StatefulSet")


def statefulset(replicas: int, *, strategy: dict[str, Any] | None, **template: Any) -> dict[str, Any]:
    sts = deployment(replicas, **template)
    sts["kind"], sts["metadata"]["name"] = "StatefulSet", "db"
    if strategy is not None:
        sts["spec"]["updateStrategy"] = strategy
    return sts


def ordinals(sts: dict[str, Any], where: dict[int, str], *, cpu: int | None = None) -> list[dict[str, Any]]:
    """The StatefulSet's running pods: ordinal -> node."""
    spec = sts["spec"]["template"]["spec"]
    asked = cpu if cpu is not None else int(spec["containers"][0]["resources"]["requests"]["cpu"][:-1])
    return [pod(f"db-{i}", on, cpu=asked, labels={"app": "web"}, spec=spec) for i, on in sorted(where.items())]


def sts_verdicts(objects: list[dict[str, Any]], sts: dict[str, Any]) -> tuple[Any, bool]:
    state = AuditState.from_objects([*objects, sts], targets=BUILTIN)
    assert STATEFULSET is not None
    workload = build(sts, STATEFULSET, namespace="shop", priority_classes=state.cluster.priority_classes,
                     nodes=state.cluster.nodes)
    running = state.pods.selected("shop", sts["spec"]["selector"])
    shortcut = ordered_update_completes(sts, workload.pods, running, state)
    return shortcut, statefulset_update(sts, workload, state.cluster.cluster).completes


sts_strategies = st.one_of(
    st.none(), st.just({"type": "OnDelete"}),
    st.builds(lambda p: {"type": "RollingUpdate", "rollingUpdate": {"partition": p}}, st.integers(0, 2)))


@st.composite
def sts_clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    count = draw(st.integers(1, 3))
    nodes = [node(f"n{i}", cpu=draw(st.sampled_from([1000, 2000])), pods=draw(st.sampled_from([2, 3, 10])),
                  cordoned=draw(st.booleans()) and draw(st.booleans()), tainted=draw(st.booleans()) and draw(st.booleans()))
             for i in range(count)]
    names = [n["metadata"]["name"] for n in nodes]
    replicas = draw(st.integers(0, 4))
    sts = statefulset(replicas, strategy=draw(sts_strategies), cpu=draw(st.sampled_from([250, 500, 1000])),
                      spread=draw(st.booleans()) and draw(st.booleans()), tolerates=draw(st.booleans()))
    present = draw(st.sets(st.integers(0, replicas), max_size=replicas + 1))
    where = {i: draw(st.sampled_from(names)) for i in present}
    objects: list[dict[str, Any]] = [*nodes, *ordinals(sts, where, cpu=draw(st.none() | st.sampled_from([250, 750])))]
    for i in range(draw(st.integers(0, 2))):
        objects.append(pod(f"other-{i}", draw(st.sampled_from(names)), cpu=draw(st.sampled_from([250, 500, 1000])),
                           labels={"app": f"other-{i}"}, anti=draw(st.sampled_from([None, None, "web"]))))
    return objects, sts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sts_clusters())
def test_whenever_the_statefulset_shortcut_answers_its_ordered_update_completes(
        case: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    objects, sts = case
    shortcut, simulated = sts_verdicts(objects, sts)
    event("decided by the shortcut" if shortcut is not None else "left to the simulation")
    if shortcut is not None:
        assert simulated, "the shortcut said the rollout completes; the simulation found it stuck"


def test_a_statefulset_whose_nodes_take_each_replacement_is_decided_without_simulating() -> None:
    sts = statefulset(2, strategy=None)
    shortcut, simulated = sts_verdicts([node("a"), node("b"), *ordinals(sts, {0: "a", 1: "b"})], sts)
    assert shortcut is not None and simulated
    assert (shortcut.replicas, shortcut.strategy, shortcut.max_surge, shortcut.max_unavailable) == (
        2, "RollingUpdate", 0, 1)


def test_a_statefulset_missing_an_ordinal_is_left_to_the_simulation() -> None:
    sts = statefulset(2, strategy=None)
    shortcut, _ = sts_verdicts([node("a"), *ordinals(sts, {0: "a"})], sts)
    assert shortcut is None


def test_a_statefulset_on_a_node_cordoned_since_is_left_to_the_simulation_which_finds_it_stuck() -> None:
    sts = statefulset(1, strategy=None)
    shortcut, simulated = sts_verdicts([node("a", cordoned=True), *ordinals(sts, {0: "a"})], sts)
    assert shortcut is None and not simulated
