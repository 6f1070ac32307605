"""The chart ships the PlacementPolicy CRD in ``crds/``, exactly as ``placement-webhook schema --crd``
prints it. Helm installs ``crds/`` before the templates and never templates it, so the rendered
templates must not hold a second copy."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.policy import crd

helm = pytest.importorskip("helm_python")

REGENERATE = "placement-webhook schema --crd > charts/placement-webhook/crds/placementpolicies.yaml"


def test_the_chart_crd_is_what_the_code_generates(chart_dir: Path) -> None:
    shipped = (chart_dir / "crds" / "placementpolicies.yaml").read_text()
    assert shipped == crd.manifest(), f"the chart's CRD is stale; regenerate it: {REGENERATE}"


def test_helm_finds_the_crd_in_crds(chart_dir: Path) -> None:
    with helm.Chart.load(chart_dir) as chart:
        (found,) = chart.crds
    assert found["name"] == "crds/placementpolicies.yaml"
    assert yaml.safe_load(found["data"]) == crd.definition()


def test_no_template_renders_a_second_copy(each_mode: Any) -> None:
    _mode, rendered = each_mode
    assert rendered.of_kind("CustomResourceDefinition") == []


def test_the_crd_file_is_not_a_template(chart_dir: Path) -> None:
    # Helm never templates crds/; a template action there would reach the API server verbatim.
    assert "{{" not in (chart_dir / "crds" / "placementpolicies.yaml").read_text()
