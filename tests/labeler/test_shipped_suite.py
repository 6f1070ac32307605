"""The shipped GPU suite places its VM by the labels the labeler writes: they are the labeler's
own for those nodes and pods, and the placement depends on them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook import cli
from webhook.labeler.values import LABELS, compute

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "policies" / "gpu-vms.suite.yaml"
CASE = "places the GPU VM on the GPU node the labeler marked as having a free GPU"


def placement_case(suite: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in suite["cases"] if c["name"] == CASE)


def test_the_suites_node_labels_are_what_the_labeler_computes() -> None:
    cluster = placement_case(yaml.safe_load(SUITE.read_text()))["cluster"]
    for node in cluster["nodes"]:
        pods = [p for p in cluster["pods"] if p["spec"]["nodeName"] == node["metadata"]["name"]]
        computed = compute(node, pods).labels
        written = {k: v for k, v in node["metadata"]["labels"].items() if k in LABELS}
        assert written and written == {k: computed[k] for k in written}, node["metadata"]["name"]


def test_the_placement_follows_the_label_not_the_node_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = yaml.safe_load(SUITE.read_text())
    case = placement_case(suite)
    for node in case["cluster"]["nodes"]:  # the labels swapped: gpu-a said free, gpu-b said full
        swapped = {"gpu-a": "1", "gpu-b": "0"}.get(node["metadata"]["name"])
        if swapped is not None:
            node["metadata"]["labels"]["placement.novasphere.dev/gpu-available"] = swapped
    suite["cases"] = [case]
    suite["policies"] = [str(ROOT / "policies" / "gpu-vms.yaml")]
    (tmp_path / "flipped.suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    code = cli.main(["test", str(tmp_path / "flipped.suite.yaml")])
    out = capsys.readouterr().out
    assert code == 1 and "placement.nodes" in out and "gpu-a" in out
