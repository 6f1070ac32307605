"""explain's suggestions, as a person and a script read them: likeliest wanted first, each
with the reason it ranks where it does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.commands.test_explain import ONE_PER_NODE, deployment, explain, node, running, write

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.fixture
def stuck_beside_a_gpu_node(tmp_path: Path) -> tuple[str, str]:
    """The walkthrough's shape: one web replica per node on two full workers, and a GPU node."""
    state = write(tmp_path / "c.yaml", node("node-a"), node("node-b"), node("gpu-1", taints=[GPU_TAINT]),
                  running("web-old-1", "node-a"), running("web-old-2", "node-b"),
                  {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}})
    return state, write(tmp_path / "web.yaml", deployment(affinity=ONE_PER_NODE))


def test_the_machine_form_gives_each_suggestion_its_reason_and_the_gpu_taint_comes_last(
        stuck_beside_a_gpu_node: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    state, manifest = stuck_beside_a_gpu_node
    _, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    found = json.loads(out)["workloads"][0]["suggestions"]
    assert [s["change"].split(" (")[0] for s in found] == [
        "set maxSurge: 0, maxUnavailable: 1", "add 1 node like node-a", "tolerate the taint nvidia.com/gpu=present:NoSchedule"]
    assert found[-1]["why"] == ("last resort: the 1 node(s) tainted nvidia.com/gpu are kept for dedicated hardware or "
                                "duties, which this workload does not ask for")
    assert all(s["why"] for s in found)


def test_the_text_says_why_under_each_suggestion(stuck_beside_a_gpu_node: tuple[str, str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    state, manifest = stuck_beside_a_gpu_node
    _, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state)
    lines = out.splitlines()
    start = lines.index("  suggestions (each verified by simulating again with the change), the likeliest wanted first:")
    shown = lines[start + 1:start + 7]
    assert [line.startswith("  - ") for line in shown] == [True, False] * 3
    assert all(line.startswith("    why: ") for line in shown[1::2])
    assert shown[4] == "  - tolerate the taint nvidia.com/gpu=present:NoSchedule  [/spec/template/spec/tolerations]"
