"""Builders for suite files on disk: a small policy, objects, and suites around them."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.kit.policies import SSD_POLICY

APPLIED = "placement.novasphere.dev/applied"

WEB: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "prod"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        },
    },
}


def web_with_ssd() -> dict[str, Any]:
    """What the ssd policy makes of WEB."""
    result = copy.deepcopy(WEB)
    result["metadata"]["annotations"] = {APPLIED: "ssd"}
    result["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "ssd"}
    return result


SSD_PATCH = [
    {"op": "add", "path": "/metadata/annotations", "value": {APPLIED: "ssd"}},
    {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"disktype": "ssd"}},
]


def case(name: str, expect: dict[str, Any], **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": name, "object": copy.deepcopy(WEB)}
    data.update(extra)
    data["expect"] = expect
    return data


def write_suite(folder: Path, cases: list[dict[str, Any]], *, name: str = "ssd", file: str = "ssd.suite.yaml",
                policies: list[Any] | None = None, cluster: dict[str, Any] | None = None) -> Path:
    """A suite file next to ``ssd.yaml`` (written too), testing it with ``cases`` (on ``cluster``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ssd.yaml").write_text(SSD_POLICY)
    suite = {
        "apiVersion": "placement.novasphere.dev/v1alpha1",
        "kind": "PlacementTest",
        "metadata": {"name": name},
        "policies": policies if policies is not None else ["ssd.yaml"],
    }
    if cluster is not None:
        suite["cluster"] = cluster
    suite["cases"] = cases
    path = folder / file
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path
