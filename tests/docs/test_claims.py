"""What the README and the guides say in prose, held to what the code does: the README's policy
example, explain's exit codes, the e2e tier's command, and the README's map of the folders."""
from __future__ import annotations

import contextlib
import functools
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _section(text: str, heading: str) -> str:
    return text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


# --- the README's policy example ------------------------------------------------------------


def _web_deployment() -> dict[str, Any]:
    labels = {"app": "web", "tier": "web"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "prod", "labels": labels},
            "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


@pytest.fixture(scope="module")
def readme_example_applied(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The README's policy example applied to a Deployment labelled ``tier: web`` in ``prod``."""
    folder = tmp_path_factory.mktemp("readme")
    (policy,) = re.findall(r"```yaml\n(.*?)```", _section(README, "## The policy language"), flags=re.DOTALL)
    (folder / "policies").mkdir()
    (folder / "policies" / "spread-web.yaml").write_text(policy)
    (folder / "web.yaml").write_text(yaml.safe_dump(_web_deployment()))
    code, out, err = _run(["mutate", "-f", str(folder / "web.yaml"), "--policies", str(folder / "policies"), "-o", "json"])
    assert code == 0, err
    applied: dict[str, Any] = json.loads(out)
    return applied


def test_the_readme_example_rolls_as_its_comment_and_text_say(readme_example_applied: dict[str, Any]) -> None:
    rolling = readme_example_applied["spec"]["strategy"]["rollingUpdate"]
    assert rolling == {"maxSurge": 0, "maxUnavailable": 1}
    comment = re.search(r"^\s*mode: safe\s*#(.*)$", README, flags=re.MULTILINE)
    assert comment is not None and "one replica down at a time" in comment.group(1)
    assert "it rolls with `maxSurge: 0, maxUnavailable: 1`" in " ".join(README.split())


def test_the_readme_example_adds_the_placement_its_text_lists(readme_example_applied: dict[str, Any]) -> None:
    affinity = readme_example_applied["spec"]["template"]["spec"]["affinity"]
    (spread,) = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"] == {"matchLabels": {"app": "web", "tier": "web"}}  # the Deployment's own selector
    node = affinity["nodeAffinity"]
    (term,) = node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "maintenance", "operator": "NotIn", "values": ["true"]} in term["matchExpressions"]
    preferred = [e for p in node["preferredDuringSchedulingIgnoredDuringExecution"] for e in p["preference"]["matchExpressions"]]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]} in preferred


# --- explain's exit codes -------------------------------------------------------------------


def _exit_codes_paragraph() -> dict[int, str]:
    text = " ".join((ROOT / "docs" / "explain.md").read_text().split())
    paragraph = text.split("Exit codes: ", 1)[1].split("A CI job", 1)[0]
    return {int(code): words for code, words in re.findall(r"\*\*(\d)\*\*(.*?)(?=\*\*\d\*\*|$)", paragraph)}


def test_explain_exits_2_for_a_cluster_state_it_cannot_read_as_its_guide_says(tmp_path: Path) -> None:
    code, _, err = _run(["explain", "-f", "examples/explain/checkout.yaml", "--cluster-state", str(tmp_path / "absent.yaml")])
    assert code == 2, err
    assert "a cluster state file that is missing" in _exit_codes_paragraph()[2]


def test_explain_exits_1_for_a_manifest_that_is_not_yaml_as_its_guide_says(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("spec: [\n")
    code, _, err = _run(["explain", "-f", "examples/explain/checkout.yaml", str(tmp_path / "broken.yaml"),
                         "--cluster-state", "examples/explain/cluster.yaml"])
    assert code == 1, err
    assert "not valid YAML or JSON" in _exit_codes_paragraph()[1]


# --- the e2e tier's command -----------------------------------------------------------------


@functools.cache
def _collected(*args: str) -> int:
    """How many tests ``pytest ARGS`` selects, from a collection in a fresh interpreter."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    found = re.search(r"^(\d+)(?:/\d+)? tests? collected", result.stdout, flags=re.MULTILINE)
    assert found is not None, result.stdout + result.stderr
    return int(found.group(1))


def _e2e_commands() -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for doc in ("README.md", "docs/install.md"):
        for block in re.findall(r"```sh\n(.*?)```", (ROOT / doc).read_text(), flags=re.DOTALL):
            for line in block.splitlines():
                if not line.startswith("python -m pytest"):
                    continue
                words = shlex.split(line, comments=True)
                if words[:3] == ["python", "-m", "pytest"] and "tests/e2e" in words:
                    args = [w for w in words[3:] if w != "-v"]
                    if (doc, args) not in found:
                        found.append((doc, args))
    return found


def test_the_docs_show_how_to_run_the_e2e_tier() -> None:
    assert {doc for doc, _ in _e2e_commands()} == {"README.md", "docs/install.md"}


@pytest.mark.parametrize(("doc", "args"), _e2e_commands(), ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_the_e2e_command_the_docs_show_selects_the_whole_tier(doc: str, args: list[str]) -> None:
    if args == ["tests/e2e"]:
        return  # the folder whole, nothing deselected: no collection needed to know
    assert _collected(*args) == _collected("tests/e2e"), f"{doc}: python -m pytest {shlex.join(args)}"


# --- the README's layout --------------------------------------------------------------------


def _tracked_folders() -> set[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30).stdout
    return {path.split("/", 1)[0] for path in listed.splitlines() if "/" in path}


def test_the_readme_layout_names_every_package_folder_and_every_top_level_folder() -> None:
    named = set(re.findall(r"`([^`/]+)/`", _section(README, "## Layout")))
    packages = {p.parent.name for p in (ROOT / "webhook").glob("*/__init__.py")}
    assert sorted(packages - named) == []
    assert sorted(_tracked_folders() - named) == []
