"""The cluster view bench: it runs end to end at a tiny size and prints every figure."""
from __future__ import annotations

import json
from pathlib import Path

from bench import cluster_bench
from tests.bench.conftest import RunBench

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_nodes_carry_what_the_projection_drops() -> None:
    node = cluster_bench.make_node(10)
    assert len(node["metadata"]["labels"]) >= 20 and node["spec"]["taints"]
    assert len(node["status"]["conditions"]) == 6 and len(node["status"]["images"]) == 10
    assert len(json.dumps(node)) > 5000  # most of it is what the cache leaves out


def test_the_bench_runs_at_a_tiny_size_and_reports_every_figure(run_bench: RunBench) -> None:
    out = run_bench("cluster_bench.py", "--nodes", "40", "--namespaces", "10", "--priority-classes", "3", "--check")
    assert "synced in " in out and "(target < 5 s): ok" in out, out
    # The fake API server seeds 4 namespaces and 2 system priority classes of its own.
    assert "objects: nodes 40, namespaces 14, priorityclasses 5" in out, out
    assert "memory the view added: RSS " in out and "(target < 150 MB): ok" in out, out
    assert "of which reading the kubeconfig +" in out and "the cache +" in out, out
    assert "tracemalloc (a second, traced sync): kept " in out and " peak " in out, out
    assert "nodes(): " in out and "us cached" in out and "right after a node changed" in out, out
