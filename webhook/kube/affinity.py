"""The field names of a pod's ``affinity``.

``nodeAffinity``, ``podAffinity`` and ``podAntiAffinity`` (k8s.io/api/core/v1) each hold their
hard rules under one name and their soft ones under another; the three share the two names.
"""
from __future__ import annotations

__all__ = ["PREFERRED", "REQUIRED"]

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
