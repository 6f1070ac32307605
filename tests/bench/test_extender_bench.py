"""The scheduler extender bench: it runs end to end at a tiny size and prints every figure."""
from __future__ import annotations

import json
import re
import time

from bench import extender_bench
from tests.bench.conftest import RunBench
from webhook.spot.nodes import Detector, capacity


def test_the_bench_answers_every_request_at_a_tiny_size_and_reports_every_figure(run_bench: RunBench) -> None:
    out = run_bench("extender_bench.py", "--nodes-cache", "60", "--nodes-objects", "20", "--duration", "1",
                    "--rate", "20", "--rate-objects", "20", "--check")
    assert re.search(r"extender at 127\.0\.0\.1:\d+ \(60 nodes in the view, \d+ about to be reclaimed\)", out), out
    names, objects = out.split("nodeCacheCapable, 60 node names at 20 requests/s")[1].split(
        "Nodes mode, 20 whole Node objects at 20 requests/s")
    for section, target in ((names, 20), (objects, 150)):
        assert re.search(r"\(\d+ KiB a filter request, \d+ nodes passed on average\)", section), section
        for verb in ("filter", "prioritize"):
            row = re.search(rf"{verb}\s+p50\s+([\d.]+) ms\s+p99\s+([\d.]+) ms\s+max\s+([\d.]+) ms\s+"
                            r"\((\d+) requests, 0 failed; ([\d.]+) ms mean in its handler\)", section)
            assert row, section
            p50, p99, top, inside = (float(row[i]) for i in (1, 2, 3, 5))
            assert 0 < p50 <= p99 <= top and int(row[4]) == 10
            assert 0 < inside < top  # the extender's own time is part of what the client waited
        assert re.search(r"achieved [\d.]+ requests/s \(asked 20/s: ok\)", section), section
        assert f"p99 target < {target} ms: ok" in section, section


def test_the_verdict_says_missed_for_a_slow_p99_a_failure_or_a_rate_not_reached() -> None:
    def phase(latency: float, failed: int = 0, elapsed: float = 1.0) -> extender_bench.Phase:
        made = extender_bench.Phase("names", 10, [])
        made.latencies = {"filter": [0.001] * 99 + [latency], "prioritize": [0.001] * 100}
        made.failed = {"filter": failed, "prioritize": 0}
        made.elapsed = elapsed
        return made

    assert extender_bench.report(phase(0.002), 200, "fine") is True
    assert extender_bench.report(phase(0.002, failed=1), 200, "a failure") is False
    assert extender_bench.report(phase(0.002, elapsed=2.0), 200, "half the rate") is False
    slow = phase(0.5)
    slow.latencies["filter"] = [0.5] * 100
    assert extender_bench.report(slow, 200, "slow") is False
    assert extender_bench.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert extender_bench.percentile([float(i) for i in range(1, 101)], 0.99) == 99.0


def test_the_fleet_mixes_capacities_and_reclaim_signals() -> None:
    config = extender_bench.spot_config()
    detector = Detector(config)
    nodes = [extender_bench.fleet_node(i) for i in range(1000)]
    kinds = [capacity(n, config) for n in nodes]
    assert kinds.count("on-demand") == 250 and kinds.count("spot") == 750
    reasons = [detector.reclaim(n, time.time()) for n in nodes]
    found = {r.split(" ")[0] + " " + r.split(" ")[1] for r in reasons if r}
    assert found == {"taint aws-node-termination-handler/spot-itn", "taint karpenter.sh/disrupted",
                     "spot node", "annotation example.com/reclaim-at", "label example.com/state"}, found
    view = extender_bench.StaticView(1000, config)
    assert view.reclaimed(detector, time.time()) == sum(1 for r in reasons if r)
    critical = view.priority_class(extender_bench.CRITICAL_CLASS)
    assert critical is not None and critical["value"] >= config.critical.priority_threshold
    for price in config.cost.prices:
        assert price.instance_type in extender_bench.INSTANCE_TYPES


def test_requests_are_marshalled_as_the_scheduler_marshals_extender_args() -> None:
    node = extender_bench.scheduler_node(3)
    assert "apiVersion" not in node and "kind" not in node  # informer objects carry no TypeMeta
    names = json.loads(extender_bench.args_body(extender_bench.pod(0), names=["a", "b"]))
    assert list(names) == ["Pod", "Nodes", "NodeNames"] and names["Nodes"] is None and names["NodeNames"] == ["a", "b"]
    objects = json.loads(extender_bench.args_body(extender_bench.pod(0), nodes={"metadata": {}, "items": [node]}))
    assert objects["NodeNames"] is None and objects["Nodes"] == {"metadata": {}, "items": [node]}
    kinds = {extender_bench.pod(i)["metadata"]["name"].split("-")[0] for i in range(6)}
    assert kinds == {"web", "batch", "platform", "spot", "ingest", "api"}
