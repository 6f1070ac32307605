"""The rebalancer bench: one decision pass at a tiny size, every figure printed."""
from __future__ import annotations

import re

from bench import rebalance_bench
from tests.bench.conftest import RunBench


def test_the_fleet_places_candidates_of_both_kinds_on_nodes_they_tolerate() -> None:
    world, pods = rebalance_bench.build(40, 1200, 30)
    assert pods == len(world.pods) == 1200
    tainted = {n["metadata"]["name"] for n in world.nodes if n["spec"]["taints"] or n["spec"]["unschedulable"]}
    owned = [p for p in world.pods if p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"]
    assert owned and not any(p["spec"]["nodeName"] in tainted for p in owned)
    assert len(world.deployments) == len(world.replicasets) == 30
    assert any(b["status"]["disruptionsAllowed"] == 0 for b in world.pdbs)


def test_the_bench_runs_a_pass_at_a_tiny_size_and_reports_every_figure(run_bench: RunBench) -> None:
    out = run_bench("rebalance_bench.py", "--nodes", "40", "--pods", "1200", "--owners", "30", "--check")
    assert out.startswith("40 nodes, 1,200 pods of 30 Deployments and 2 DaemonSets, "), out
    assert re.search(r"\d+ candidates \(.*interruptible pod on on-demand while spot nodes exist.*\)", out), out
    assert re.search(r"default settings \(at most 5 moves, 30 simulations\): \d+ move, \d+ stay, \d+ skip; "
                     r"wall [\d.]+ s, CPU [\d.]+ s", out), out
    assert re.search(r"no limit on moves \(30 simulations, the slowest pass\): .*\(target < 10 s of CPU\): ok", out), out
    assert re.search(r"memory of a pass: [\d,]+ MB of Python allocations at its peak \(tracemalloc\); "
                     r"peak RSS grew [\d,]+ MB", out), out
