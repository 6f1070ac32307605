"""Exit codes of every command: 0 success, 1 findings or failures, 2 usage errors."""
from __future__ import annotations

from enum import IntEnum

__all__ = ["Exit"]


class Exit(IntEnum):
    OK = 0
    FINDINGS = 1  # lint findings, failed suite cases, objects admission failed on, unschedulable pods
    USAGE = 2  # bad flags, missing paths, a policy set or suite that cannot load
