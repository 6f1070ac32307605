"""Fixtures for the admission, review, matching, patching and dry-run tests.

``fake_engine`` replaces ``admission.apply_policy`` (admission's call into the engine) with
a tiny, predictable placement (nodeSelector keys, set when absent) so admission's
orchestration -- order, audit mode, failures, the applied annotation -- is tested apart
from the engine's semantics.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from webhook.engine import admission

# The builders live in a plain module next to the tests (unique name: pytest runs with
# --import-mode=importlib, so test folders are not packages).
sys.path.insert(0, str(Path(__file__).resolve().parent))

import admission_helpers


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Replace admission's ``apply_policy`` with the helpers' fake for this test."""
    monkeypatch.setattr(admission, "apply_policy", admission_helpers.fake_apply)
    return admission_helpers.fake_apply
