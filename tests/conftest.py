"""Shared fixtures: paths to the project's folders and the shared corpus."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def shipped_policies_dir() -> Path:
    return POLICIES
