"""Shared fixtures: paths to the project's folders and the shared corpus."""
from __future__ import annotations

import os
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


# CI sets PLACEMENT_NO_SKIP=1: there every tier has what it needs (.ci/run provides the control
# plane), so a skip can only hide a missing binary or a broken fixture. It fails instead, with the
# reason the skip gave.
NO_SKIP = "PLACEMENT_NO_SKIP"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get(NO_SKIP) == "1" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where {NO_SKIP}=1 forbids it: {reason}"
