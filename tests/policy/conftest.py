"""Fixtures for the policy-language tests: writing policy files and running the CLI."""
from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

HEADER = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: {name}
spec:
"""


def policy_text(spec: str, *, name: str = "example") -> str:
    """A policy document whose spec body (indented by the caller's YAML) starts on line 6."""
    return HEADER.format(name=name) + textwrap.indent(textwrap.dedent(spec).strip("\n") + "\n", "  ")


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write ``text`` to ``tmp_path/name`` (folders created) and return the path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return _write


@pytest.fixture
def policy_file(write: Callable[[str, str], Path]) -> Callable[..., Path]:
    """Write a policy whose spec body starts on line 6; returns its path."""

    def _policy_file(spec: str, *, name: str = "example", file: str = "policy.yaml") -> Path:
        return write(file, policy_text(spec, name=name))

    return _policy_file
