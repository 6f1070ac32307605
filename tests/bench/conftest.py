"""Running a bench script as a user would: its own process, the repository on the path."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
RunBench = Callable[..., str]


@pytest.fixture
def run_bench() -> RunBench:
    """``run_bench("cluster_bench.py", "--nodes", "40")``: the script's stdout; a non-zero
    exit fails the test with its output."""

    def run(script: str, *args: str, timeout: float = 120) -> str:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args],
                              capture_output=True, text=True, timeout=timeout, env=env, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    return run
