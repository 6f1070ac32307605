"""NodeResourcesFit and NodeResourcesBalancedAllocation, re-expressed from
noderesources/fit_test.go (TestEnoughRequests, TestNotEnoughRequests, TestStorageRequests,
TestRestartableInitContainers, TestFitScore), least_allocated_test.go
(TestLeastAllocatedScoringStrategy) and balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation)."""
from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.builders import node, pod, state_for
from webhook.scheduler import Cluster, Options, prioritize
from webhook.scheduler.filters import node_resources_fit

A, B = "example.com/aaa", "example.com/bbb"
K8S_A, K8S_B = "kubernetes.io/something", "subdomain.kubernetes.io/something"
HUGE = "hugepages-2Mi"
U, UU = "Unschedulable", "UnschedulableAndUnresolvable"
# makeAllocatableResources(10, 20, 32, 5, 20, 5): cpu 10m, memory 20, pods 32, A 5, storage 20, hugepages 5.
ALLOCATABLE = {"cpu": "10m", "memory": 20, "pods": 32, A: 5, "ephemeral-storage": 20, HUGE: 5}


def r(cpu: int = 0, mem: int = 0, eph: int = 0, **scalars: int) -> dict[str, Any]:
    """``framework.Resource{MilliCPU, Memory, EphemeralStorage, ScalarResources}`` as requests."""
    names = {"A": A, "B": B, "K8S_A": K8S_A, "K8S_B": K8S_B, "HUGE": HUGE}
    return {"cpu": f"{cpu}m", "memory": mem, "ephemeral-storage": eph, **{names[k]: v for k, v in scalars.items()}}


def insufficient(*names: str) -> tuple[str, ...]:
    return tuple(f"Insufficient {n}" for n in names)


ENOUGH: list[Any] = [
    pytest.param({}, r(10, 20), None, id="TestEnoughRequests: no resources requested always fits"),
    pytest.param({"req": r(1, 1)}, r(10, 20), (U, insufficient("cpu", "memory")),
                 id="TestEnoughRequests: too many resources fails"),
    pytest.param({"req": r(1, 1), "init": [r(3, 1)]}, r(8, 19), (U, insufficient("cpu")),
                 id="TestEnoughRequests: too many resources fails due to init container cpu"),
    pytest.param({"req": r(1, 1), "init": [r(3, 1), r(2, 1)]}, r(8, 19), (U, insufficient("cpu")),
                 id="TestEnoughRequests: too many resources fails due to highest init container cpu"),
    pytest.param({"req": r(1, 1), "init": [r(1, 3)]}, r(9, 19), (U, insufficient("memory")),
                 id="TestEnoughRequests: too many resources fails due to init container memory"),
    pytest.param({"req": r(1, 1), "init": [r(1, 1), r(1, 1)]}, r(9, 19), None,
                 id="TestEnoughRequests: multiple init containers fit because it's the max, not sum"),
    pytest.param({"req": r(5, 1)}, r(5, 19), None, id="TestEnoughRequests: equal edge case"),
    pytest.param({"req": r(4, 1), "init": [r(5, 1)]}, r(5, 19), None,
                 id="TestEnoughRequests: equal edge case for init container"),
    pytest.param({"req": r(1, 1, A=10)}, r(0, 0, A=0), (UU, insufficient(A)),
                 id="TestEnoughRequests: extended resource capacity enforced"),
    pytest.param({"req": r(1, 1, A=1)}, r(0, 0, A=5), (U, insufficient(A)),
                 id="TestEnoughRequests: extended resource allocatable enforced"),
    pytest.param({"req": [r(1, 1, A=3), r(1, 1, A=3)]}, r(0, 0, A=2), (UU, insufficient(A)),
                 id="TestEnoughRequests: extended resource allocatable enforced for multiple containers"),
    pytest.param({"init": [r(1, 1, A=3), r(1, 1, A=3)]}, r(0, 0, A=2), None,
                 id="TestEnoughRequests: extended resource allocatable admits multiple init containers"),
    pytest.param({"req": r(1, 1, B=1)}, r(0, 0), (UU, insufficient(B)),
                 id="TestEnoughRequests: extended resource allocatable enforced for unknown resource"),
    pytest.param({"init": [r(1, 1, K8S_B=10)]}, r(0, 0), (UU, insufficient(K8S_B)),
                 id="TestEnoughRequests: kubernetes.io resource capacity enforced for init container"),
    pytest.param({"req": [r(1, 1, HUGE=3), r(1, 1, HUGE=3)]}, r(0, 0, HUGE=2), (UU, insufficient(HUGE)),
                 id="TestEnoughRequests: hugepages resource allocatable enforced for multiple containers"),
    pytest.param({"req": r(1, 1), "overhead": {"cpu": "3m", "memory": "13"}}, r(5, 5), None,
                 id="TestEnoughRequests: resources + pod overhead fits"),
    pytest.param({"req": r(1, 1), "overhead": {"cpu": "1m", "memory": "15"}}, r(5, 5), (U, insufficient("memory")),
                 id="TestEnoughRequests: requests + overhead does not fit for memory"),
    pytest.param({"req": r(1, 1, A=0)}, r(0, 0, A=6), None,
                 id="TestEnoughRequests: skip checking extended resource request with quantity zero"),
    pytest.param({"req": r(1, 1), "resources": {"requests": {"cpu": "7m", "memory": "2"}}}, r(5, 5),
                 (U, insufficient("cpu")), id="TestEnoughRequests: pod-level cpu resource not fit"),
    pytest.param({"resources": {"requests": {"cpu": "3m", "memory": "2", HUGE: "10"}}}, None,
                 (UU, insufficient(HUGE)), id="TestEnoughRequests: pod-level hugepages resource not fit"),
    pytest.param({"req": r(1, 1), "init": [r(1, 1)], "resources": {"requests": {"cpu": "3m", "memory": "2"}}}, r(5, 19),
                 (U, insufficient("memory")),
                 id="TestEnoughRequests: one pod-level cpu resource fits and all init and non-init containers fit"),
]


@pytest.mark.parametrize(("spec", "existing", "want"), ENOUGH)
def test_the_fit_filter_matches_the_upstream_table(spec: dict[str, Any], existing: dict[str, Any] | None,
                                                   want: tuple[str, tuple[str, ...]] | None) -> None:
    pods = [] if existing is None else [pod("existing", on="n", req=existing)]
    state, cluster = state_for(pod(**spec), [node("n", capacity=ALLOCATABLE)], pods)
    got = node_resources_fit(state.plan, cluster.nodes["n"], Options())
    assert (None if got is None else (got.code, got.reasons)) == want


@pytest.mark.parametrize(("spec", "existing"), [
    pytest.param({}, r(10, 20), id="TestNotEnoughRequests: even without specified resources there is no space for a pod"),
    pytest.param({"req": r(5, 1), "init": [r(5, 1)]}, r(5, 19),
                 id="TestNotEnoughRequests: equal edge case fails when there's no space for an additional pod"),
])
def test_a_node_at_its_pod_count_is_too_full_and_preemption_can_help(spec: dict[str, Any], existing: dict[str, Any]) -> None:
    allocatable = {"cpu": "10m", "memory": 20, "pods": 1}
    state, cluster = state_for(pod(**spec), [node("n", capacity=allocatable)], [pod("e", on="n", req=existing)])
    got = node_resources_fit(state.plan, cluster.nodes["n"], Options())
    assert got is not None and (got.code, got.reasons) == (U, ("Too many pods",))


@pytest.mark.parametrize(("spec", "existing", "want"), [
    pytest.param({"req": r(eph=25)}, r(2, 2), (UU, insufficient("ephemeral-storage")),
                 id="TestStorageRequests: ephemeral local storage request exceeds allocatable"),
    pytest.param({"req": r(eph=10)}, r(2, 2), None, id="TestStorageRequests: pod fits"),
    pytest.param({"init": [r(eph=5)]}, r(2, 2, eph=10), None,
                 id="TestStorageRequests: ephemeral local storage is sufficient"),
])
def test_ephemeral_storage_is_checked_like_cpu_and_memory(spec: dict[str, Any], existing: dict[str, Any], want: Any) -> None:
    state, cluster = state_for(pod(**spec), [node("n", capacity=ALLOCATABLE)], [pod("e", on="n", req=existing)])
    got = node_resources_fit(state.plan, cluster.nodes["n"], Options())
    assert (None if got is None else (got.code, got.reasons)) == want


@pytest.mark.parametrize(("regular", "sidecar", "want"), [
    pytest.param("1m", "1m", None, id="TestRestartableInitContainers: allow a pod whose total does not exceed allocatable"),
    pytest.param("1m", "2m", (UU, insufficient("cpu")),
                 id="TestRestartableInitContainers: not allow a pod whose total does exceed allocatable"),
])
def test_sidecars_add_to_the_pods_requests(regular: str, sidecar: str, want: Any) -> None:
    incoming = pod(req={"cpu": regular}, sidecars=[{"cpu": sidecar}])
    state, cluster = state_for(incoming, [node("n", capacity={"cpu": "2m", "memory": 0, "pods": 1})])
    got = node_resources_fit(state.plan, cluster.nodes["n"], Options())
    assert (None if got is None else (got.code, got.reasons)) == want


def _scores(plugin: str, incoming: dict[str, Any], nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, int]:
    cluster = Cluster.from_objects(nodes, pods)
    names = [n["metadata"]["name"] for n in nodes]
    result = prioritize(incoming, cluster, names)
    return {n: result.breakdown(n)[plugin].normalized for n in names}


def _cap(cpu: str, mem: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": mem}


LEAST: list[Any] = [
    pytest.param({}, [("node1", _cap("4000", "10000")), ("node2", _cap("4000", "10000"))], [], {"node1": 100, "node2": 100},
                 id="TestLeastAllocatedScoringStrategy: nothing scheduled, nothing requested"),
    pytest.param({"req": [_cap("1000", "2000"), _cap("2000", "3000")]},
                 [("node1", _cap("4000", "10000")), ("node2", _cap("6000", "10000"))], [], {"node1": 37, "node2": 50},
                 id="TestLeastAllocatedScoringStrategy: nothing scheduled, resources requested, differently sized nodes"),
    pytest.param({}, [("node1", _cap("10000", "20000")), ("node2", _cap("10000", "20000"))],
                 [("node1", _cap("3000", "0")), ("node1", _cap("3000", "0")), ("node2", _cap("3000", "0")),
                  ("node2", _cap("3000", "5000"))], {"node1": 70, "node2": 57},
                 id="TestLeastAllocatedScoringStrategy: no resources requested, pods scheduled with resources"),
    pytest.param({"req": [_cap("1000", "2000"), _cap("2000", "3000")]},
                 [("node1", _cap("10000", "20000")), ("node2", _cap("10000", "50000"))],
                 [("node1", _cap("3000", "0")), ("node2", _cap("3000", "5000"))], {"node1": 57, "node2": 60},
                 id="TestLeastAllocatedScoringStrategy: resources requested, pods scheduled, differently sized nodes"),
    pytest.param({"req": _cap("3000", "0")}, [("node1", _cap("4000", "10000")), ("node2", _cap("4000", "10000"))],
                 [("node1", _cap("3000", "0")), ("node2", _cap("3000", "5000"))], {"node1": 50, "node2": 25},
                 id="TestLeastAllocatedScoringStrategy: requested resources exceed node capacity"),
    pytest.param({}, [("node1", None), ("node2", None)], [("node1", _cap("3000", "0")), ("node2", _cap("3000", "5000"))],
                 {"node1": 0, "node2": 0}, id="TestLeastAllocatedScoringStrategy: zero node resources"),
    pytest.param({"req": _cap("1000", "2000")}, [("node1", _cap("4000", "10000")), ("node2", _cap("6000", "10000"))],
                 [("node1", _cap("2000", "4000")), ("node2", _cap("1000", "2000"))], {"node1": 32, "node2": 63},
                 id="TestFitScore: ScoringStrategy LeastAllocated"),
]


@pytest.mark.parametrize(("spec", "nodes", "existing", "want"), LEAST)
def test_least_allocated_matches_the_upstream_table(spec: dict[str, Any], nodes: list[Any], existing: list[Any],
                                                     want: dict[str, int]) -> None:
    built = [node(n, capacity=c) if c else node(n) for n, c in nodes]
    pods = [pod(f"e{i}", on=n, req=req) for i, (n, req) in enumerate(existing)]
    assert _scores("NodeResourcesFit", pod(**spec), built, pods) == want


def test_a_sidecar_of_an_existing_pod_counts_in_least_allocated() -> None:
    # TestFitScore: "test case for ScoringStrategy LeastAllocated with sidecar container"
    nodes = [node("node1", capacity=_cap("4000", "10000")), node("node2", capacity=_cap("4000", "10000"))]
    pods = [pod("e1", on="node1", req=_cap("1000", "2000"), sidecars=[_cap("1000", "2000")]),
            pod("e2", on="node2", req=_cap("1000", "2000"))]
    assert _scores("NodeResourcesFit", pod(req=_cap("1000", "2000")), nodes, pods) == {"node1": 32, "node2": 55}


CPU_AND_MEMORY = [{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}]
CPU_ONLY = [{"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"}]


def _alloc(cpu_milli: int, memory: int) -> dict[str, Any]:
    return {"cpu": f"{cpu_milli}m", "memory": memory}


BALANCED: list[Any] = [
    pytest.param({}, [("node1", 4000, 10000), ("node2", 4000, 10000)], [], {"node1": 0, "node2": 0},
                 id="TestNodeResourcesBalancedAllocation: nothing requested, skip in PreScore"),
    pytest.param({"req": CPU_AND_MEMORY}, [("node1", 4000, 10000), ("node2", 6000, 10000)], [], {"node1": 87, "node2": 100},
                 id="TestNodeResourcesBalancedAllocation: nothing scheduled, resources requested, differently sized nodes"),
    pytest.param({"req": CPU_AND_MEMORY}, [("node1", 10000, 20000), ("node2", 10000, 20000)],
                 [("node1", CPU_ONLY), ("node2", CPU_AND_MEMORY)], {"node1": 82, "node2": 95},
                 id="TestNodeResourcesBalancedAllocation: resources requested, pods scheduled with resources"),
    pytest.param({"req": CPU_AND_MEMORY}, [("node1", 10000, 20000), ("node2", 10000, 50000)],
                 [("node1", CPU_ONLY), ("node2", CPU_AND_MEMORY)], {"node1": 82, "node2": 80},
                 id="TestNodeResourcesBalancedAllocation: pods scheduled with resources, differently sized nodes"),
    pytest.param({"req": CPU_ONLY}, [("node1", 6000, 10000), ("node2", 6000, 10000)],
                 [("node1", CPU_ONLY), ("node2", CPU_AND_MEMORY)], {"node1": 50, "node2": 75},
                 id="TestNodeResourcesBalancedAllocation: requested resources at node capacity"),
    pytest.param({"req": CPU_AND_MEMORY}, [("node1", 3500, 40000), ("node2", 3500, 40000)], [], {"node1": 63, "node2": 63},
                 id="TestNodeResourcesBalancedAllocation: node without the scalar resource skips it"),
]


@pytest.mark.parametrize(("spec", "nodes", "existing", "want"), BALANCED)
def test_balanced_allocation_matches_the_upstream_table(spec: dict[str, Any], nodes: list[Any], existing: list[Any],
                                                         want: dict[str, int]) -> None:
    built = [node(n, capacity=_alloc(c, m)) for n, c, m in nodes]
    pods = [pod(f"e{i}", on=n, req=req) for i, (n, req) in enumerate(existing)]
    assert _scores("NodeResourcesBalancedAllocation", pod(**spec), built, pods) == want
