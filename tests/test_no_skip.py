"""CI's guard against a tier that quietly skips: with PLACEMENT_NO_SKIP=1 a skip is a failure."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPING = '''
import pytest

def test_skipped_in_the_body():
    pytest.skip("no kube-apiserver")

@pytest.fixture
def plane():
    pytest.skip("no etcd")

def test_skipped_by_a_fixture(plane):
    pass

@pytest.mark.xfail(reason="known")
def test_expected_to_fail():
    assert False
'''


def _run(tmp_path: Path, no_skip: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    env = {k: v for k, v in os.environ.items() if k != "PLACEMENT_NO_SKIP"}
    if no_skip is not None:
        env["PLACEMENT_NO_SKIP"] = no_skip
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
               "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_skips_stay_skips_outside_ci(tmp_path: Path) -> None:
    run = _run(tmp_path, None)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 skipped, 1 xfailed" in run.stdout


def test_with_no_skip_a_skip_fails_and_says_why_but_an_xfail_stays(tmp_path: Path) -> None:
    run = _run(tmp_path, "1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "skipped where PLACEMENT_NO_SKIP=1 forbids it: Skipped: no kube-apiserver" in run.stdout
    assert "skipped where PLACEMENT_NO_SKIP=1 forbids it: Skipped: no etcd" in run.stdout
    assert "1 failed" in run.stdout and "1 error" in run.stdout and "1 xfailed" in run.stdout
