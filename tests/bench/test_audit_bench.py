"""The audit bench: it runs end to end at a tiny size and prints every figure."""
from __future__ import annotations

from bench import audit_bench
from tests.bench.conftest import RunBench


def test_the_synthetic_workloads_mix_kinds_spreading_opting_out_and_critical_ones() -> None:
    workloads = [audit_bench.workload(i, 3) for i in range(2000)]
    kinds = {w["kind"] for w in workloads}
    assert kinds == {"Deployment", "StatefulSet", "DaemonSet"}
    assert sum("affinity" in w["spec"]["template"]["spec"] for w in workloads) == 10
    assert sum("annotations" in w["metadata"] for w in workloads) == 100


def test_the_bench_audits_a_tiny_cluster_and_reports_every_figure(run_bench: RunBench) -> None:
    out = run_bench("audit_bench.py", "--nodes", "60", "--workloads", "220", "--pods", "660", "--check")
    assert "220 workloads, 60 nodes" in out and "220 workloads audited" in out, out
    assert "full audit: " in out and "(target < 60 s): ok" in out, out
    assert "decided by the shortcut" in out and "simulated" in out, out
    assert "incremental pass after one Deployment changed: " in out and "(target < 1000 ms): ok" in out, out
    assert "peak RSS " in out and "(target < 1,024 MB): ok" in out, out
