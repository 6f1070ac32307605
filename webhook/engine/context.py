"""What every writer of one policy application shares: the policy's conflict mode, the
cluster view, where in the object it is writing (for messages), and the report of what it did.

A ``Context`` is made per policy and object; ``at`` gives a writer a context for a deeper
container that reports into the same ``Report``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webhook.cluster.view import ClusterView

__all__ = ["KEEP", "MERGE", "REPLACE", "Context", "PlacementError", "Report"]

MERGE, KEEP, REPLACE = "merge", "keep", "replace"


class PlacementError(Exception):
    """The policy cannot be applied to this object; the object is left as it was."""


@dataclass(slots=True)
class Report:
    """What applying one policy did: whether anything changed, and what to tell the user.
    ``placement.apply_policy`` returns it (as ``placement.Applied``)."""

    changed: bool = False
    warnings: list[str] = field(default_factory=list)
    # The topology key of a required spread the policy holds the object to: admission counts
    # its eligible domains in the object it answers with (``placement.spread_warning``).
    spread_key: str | None = None


@dataclass(slots=True)
class Context:
    """One policy's application to one object, as its writers see it. Nothing assigns to
    its fields (``at`` makes another); it is not a frozen dataclass only because one is
    made per policy and object, and a frozen one's ``__init__`` costs three times as much."""

    mode: str  # onConflict: merge | keep | replace
    cluster: ClusterView | None = None  # None: no view of the cluster (checks are skipped)
    report: Report = field(default_factory=Report)
    where: str = ""  # dotted location of the container being written, for messages
    # The object as the request carried it: what its author (or an earlier admission) wrote,
    # as opposed to what policies wrote during this one. None: the object itself.
    original: Mapping[str, Any] | None = None

    def at(self, where: str) -> Context:
        """The same application, writing at ``where``."""
        return Context(self.mode, self.cluster, self.report, where, self.original)

    def warn(self, message: str) -> None:
        self.report.warnings.append(message)

    def changed(self) -> None:
        self.report.changed = True
