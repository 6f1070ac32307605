"""Fixtures for the admission, review, matching, patching and dry-run tests.

``fake_engine`` replaces ``engine.apply_policy`` with a tiny, predictable placement
(nodeSelector keys, set when absent) so admission's orchestration -- order, audit mode,
failures, the applied annotation -- is tested apart from the engine's semantics.
"""
from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from webhook.policyset import Policy
from webhook.targets import Target

try:
    import webhook.engine  # noqa: F401
except ImportError:  # until engine.py and its modules land
    _stub = types.ModuleType("webhook.engine")

    @dataclass
    class _Applied:
        changed: bool
        warnings: list[str] = field(default_factory=list)

    class _PlacementError(Exception):
        pass

    def _unavailable(obj: dict, *, policy: Policy, target: Target, cluster: Any) -> _Applied:
        raise RuntimeError("webhook.engine is not available yet")

    _stub.Applied = _Applied  # type: ignore[attr-defined]
    _stub.PlacementError = _PlacementError  # type: ignore[attr-defined]
    _stub.apply_policy = _unavailable  # type: ignore[attr-defined]
    sys.modules["webhook.engine"] = _stub

from webhook import engine

# The builders live in a plain module next to the tests (unique name: pytest runs with
# --import-mode=importlib, so test folders are not packages).
sys.path.insert(0, str(Path(__file__).resolve().parent))

import admission_helpers


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Replace ``engine.apply_policy`` with the helpers' fake for this test."""
    monkeypatch.setattr(engine, "apply_policy", admission_helpers.fake_apply)
    return admission_helpers.fake_apply
