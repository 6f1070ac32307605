"""The spot controller bench: it drains a node end to end at a tiny size and prints every figure."""
from __future__ import annotations

import re
from collections import Counter

from bench import spot_bench
from tests.bench.conftest import RunBench


def test_the_groups_hold_every_pod_under_each_kind_of_budget() -> None:
    found = spot_bench.groups(105)
    assert sum(g.size for g in found) == 105
    kinds = Counter(g.kind for g in found)
    assert kinds[spot_bench.NEVER] == 1 and kinds[spot_bench.NONE] and kinds[spot_bench.MAX1] and kinds[spot_bench.MIN_N2]
    never = next(g for g in found if g.kind == spot_bench.NEVER)
    assert never.budget()["spec"]["minAvailable"] == never.size  # type: ignore[index]
    assert all(g.budget() is None for g in found if g.kind == spot_bench.NONE)
    assert all(g.budget()["spec"] == {"selector": {"matchLabels": {"app": g.name}}, "maxUnavailable": 1}  # type: ignore[index]
               for g in found if g.kind == spot_bench.MAX1)
    assert all(g.budget()["spec"]["minAvailable"] == max(0, g.size - 2)  # type: ignore[index]
               for g in found if g.kind == spot_bench.MIN_N2)
    assert len({g.name for g in found}) == len(found)
    assert sum(g.size for g in spot_bench.groups(2)) == 2 and spot_bench.groups(0) == []


def test_the_spot_node_is_full_and_its_pods_are_owned_as_the_controller_expects() -> None:
    objects, found = spot_bench.cluster_objects(110, 5)
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 110 and all(p["spec"]["nodeName"] == spot_bench.SPOT_NODE for p in pods)
    owners = Counter(p["metadata"]["ownerReferences"][0]["kind"] for p in pods)
    assert owners == {"DaemonSet": 5, "ReplicaSet": 105}
    replicasets = {o["metadata"]["name"]: o["metadata"]["uid"] for o in objects if o["kind"] == "ReplicaSet"}
    assert all(replicasets[p["metadata"]["ownerReferences"][0]["name"]] == p["metadata"]["ownerReferences"][0]["uid"]
               for p in pods if p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet")
    assert len([o for o in objects if o["kind"] == "PodDisruptionBudget"]) == len(found) - sum(
        g.kind == spot_bench.NONE for g in found)


def test_the_bench_drains_a_tiny_node_and_reports_every_figure(run_bench: RunBench) -> None:
    # 20 pods: 2 DaemonSet pods, 3 kept by the budget that allows no eviction, 15 to evict.
    out = run_bench("spot_bench.py", "--pods", "20", "--daemonsets", "2", "--drain-timeout", "3",
                    "--backoff", "0.05", "--max-backoff", "0.2", "--replace-delay", "0.05")
    assert out.startswith("spot node with 20 pods: 2 DaemonSet pods and "), out
    first = re.search(r"taint to first eviction request: ([\d.]+) ms at the API server .*\(target < 100 ms\): "
                      r"(ok|MISSED)", out)
    assert first and float(first.group(1)) < 1000, out  # the target is for a full node; a second at most here
    assert re.search(r"drained where budgets allow: 15 of the 15 pods a budget allows evicted, the last [\d.]+ s "
                     r"after the taint \(target: all, < 3 s; 5 ms per API call, at most 10 evictions in flight\): ok",
                     out), out
    assert re.search(r"controller CPU per evicted pod: [\d.]+ ms \(target < 1 ms\): (ok|MISSED); \d+ ms of CPU over "
                     r"the [\d.]+ s drain, 15 pods evicted", out), out
    assert "evictions by result: evicted 15, gone 0, blocked " in out and "the API server answered 15 x 201" in out, out
    assert "Events written: " in out and "Evicted 15" in out and "DrainTimeout 1" in out, out
    assert "3 pod(s) kept by a budget at the deadline" in out and "15 replacements" in out, out
    assert "(not counted)" in out, out
