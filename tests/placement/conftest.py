"""The placement tests import their builders from ``placement_kit`` (a plain module next to
them: pytest runs with --import-mode=importlib, so test folders are not packages)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
