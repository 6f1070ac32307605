"""The node labeler bench: it runs end to end at a tiny size and prints every figure."""
from __future__ import annotations

from tests.bench.conftest import RunBench


def test_the_bench_labels_every_node_at_a_tiny_size_and_reports_every_figure(run_bench: RunBench) -> None:
    out = run_bench("labeler_bench.py", "--nodes", "40", "--pods-per-node", "5", "--check")
    assert out.startswith("40 nodes, 200 pods: one pass in "), out
    assert "the first with every pod" in out and "projection of the pods took" in out, out
    assert "(target < 2 s): ok" in out and "40 node(s) to write" in out and "(target < 500 MB): ok" in out, out
