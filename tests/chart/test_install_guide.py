"""The values the installation guide shows are real: every ``yaml`` snippet of docs/install.md
renders with the real Helm engine (the values schema included), each "smallest install" runs
exactly the components it is for, and the policies they carry pass ``placement-webhook lint``."""
from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import ROOT, Rendered
from webhook import cli

GUIDE = ROOT / "docs" / "install.md"
SMALLEST = "### The smallest install for each use"
# Each use the guide names, and the components (app.kubernetes.io/component) it must run.
USES = {
    "Placement only": {"admission-webhook"},
    "Resource-aware placement": {"admission-webhook", "label-nodes"},
    "Spot capacity, drained before reclaim": {"admission-webhook", "spot-controller"},
    "Spot decisions at scheduling time": {"admission-webhook", "scheduler-extender"},
}


def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading; empty when the guide lacks it."""
    return text.partition(heading)[2].split("\n#", 1)[0]


def _uses() -> dict[str, dict[str, Any]]:
    """The values of each "smallest install", by the bold name that introduces it."""
    section = _section(GUIDE.read_text(), SMALLEST)
    found = re.findall(r"^\*\*([^*]+)\*\*.*?^```yaml\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)
    return {name: yaml.safe_load(block) for name, block in found}


def _components(rendered: Rendered) -> set[str]:
    return {d["metadata"]["labels"]["app.kubernetes.io/component"] for d in rendered.of_kind("Deployment")}


@pytest.mark.parametrize("snippet", _yaml_blocks(GUIDE.read_text()), ids=lambda s: s.splitlines()[0])
def test_every_values_snippet_of_the_guide_renders(snippet: str, render: Callable[..., Rendered]) -> None:
    assert render(yaml.safe_load(snippet)).of_kind("Deployment")


def test_the_guide_shows_a_smallest_install_for_every_use() -> None:
    assert sorted(_uses()) == sorted(USES)


@pytest.mark.parametrize("use", sorted(USES))
def test_each_smallest_install_runs_exactly_the_components_of_its_use(use: str, render: Callable[..., Rendered]) -> None:
    assert _components(render(_uses()[use])) == USES[use]


@pytest.mark.parametrize("use", sorted(u for u, values in _uses().items() if "policies" in values))
def test_the_policies_of_each_smallest_install_pass_lint(use: str, tmp_path: Path) -> None:
    for index, policy in enumerate(_uses()[use]["policies"]["items"]):
        (tmp_path / f"policy-{index}.yaml").write_text(yaml.safe_dump(policy))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.main(["lint", str(tmp_path)])
    assert code == 0, out.getvalue()
