"""Fixtures of the server tests; the helpers they use live in ``serverkit``."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.policies import SSD_POLICY
from tests.kit.server import Pki, make_pki


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "ssd.yaml").write_text(SSD_POLICY)
    return folder
