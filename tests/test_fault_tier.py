"""The fault tier is marked ``faults`` by its conftest: ``-m faults`` selects every test of
tests/faults and nothing else, and the README's plain ``python -m pytest`` deselects none of them."""
from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("tests/faults", "tests/test_no_skip.py")  # the tier, and a test outside it


def test_minus_m_faults_selects_the_whole_fault_tier_and_only_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PLACEMENT_NO_SKIP"}
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", "faults", *PATHS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    selected = [line for line in run.stdout.splitlines() if "::" in line]
    summary = re.search(r"(\d+)/(\d+) tests collected \((\d+) deselected\)", run.stdout)
    assert summary is not None, run.stdout
    # Every test outside the tier (test_no_skip's two) deselected, every test of the tier selected.
    assert int(summary[3]) == 2 and int(summary[1]) == len(selected) == int(summary[2]) - 2
    assert selected and all(line.startswith("tests/faults/") for line in selected)


def test_the_marker_is_registered_and_no_default_option_deselects_it() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    pytest_section = config["tool:pytest"]
    assert any(line.startswith("faults:") for line in pytest_section["markers"].strip().splitlines())
    assert "-m" not in pytest_section["addopts"].split()
