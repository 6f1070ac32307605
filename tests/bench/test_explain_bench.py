"""The scheduling-model bench: it runs end to end at a tiny size and prints every figure."""
from __future__ import annotations

from pathlib import Path

from bench import explain_bench
from tests.bench.conftest import RunBench

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_running_pods_mix_requests_and_spread_themselves() -> None:
    node = {"metadata": {"name": "n"}}
    pods = [explain_bench.running_pod(node, 3, j) for j in range(30)]
    assert len({p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in pods}) > 3
    spreading = [p for p in pods if "affinity" in p["spec"]]
    assert len(spreading) == 6 and any(explain_bench.REQUIRED in p["spec"]["affinity"]["podAntiAffinity"]
                                       for p in spreading)


def test_the_bench_places_every_replica_at_a_tiny_size_and_reports_every_figure(run_bench: RunBench) -> None:
    out = run_bench("explain_bench.py", "--nodes", "40", "--pods-per-node", "5", "--replicas", "12", "--check")
    assert "40 nodes:" in out and "replicas placed/s" in out, out
    assert "12/12 placed" in out, out  # 40 nodes, 3 zones: room for 12 one-per-node replicas within skew 1
    assert "snapshot built in " in out and "peak RSS " in out and "(target < 1,536 MB): ok" in out, out
