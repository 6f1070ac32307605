"""What an audit finds, as plain data: one ``Result`` per (workload, policy, rule).

The shape follows the PolicyReport API (``wgpolicyk8s.io/v1alpha2``) that Kyverno writes and
Policy Reporter reads: a result names its policy and rule, says pass, fail, warn, skip or error,
names the resource it is about and carries a message. ``reports`` turns results into report
objects; the command prints them; nothing here does I/O.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

# The checks made with the scheduler model are reported under this policy name. A colon can
# never appear in an object's name (a DNS subdomain), so it never collides with a PlacementPolicy.
SCHEDULING_POLICY = "placement-webhook:scheduling"
RULE_REPLICAS = "replicas-placed"  # every replica the workload asks for is (or would be) placed
RULE_ROLLOUT = "rollout-completes"  # the next rolling update finishes on this cluster
# A workload the engine or the model could not read: the rule of its ``error`` result.
RULE_READ = "read"
# A pass or skip is about the policy as a whole, not one field group: its rule is this.
RULE_POLICY = "placement"
# Admission itself failed on an object (policies that never settle, an engine error) and no
# policy selected it: its error result is reported under this name.
ADMISSION_POLICY = "placement-webhook:admission"

SOURCE = "placement-webhook"  # results[].source, as the tools that read Kyverno's filter by it


class Status(str, Enum):
    """``results[].result``: the PolicyReport API's five values."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Resource:
    """The object a result is about, as ``results[].resources[]`` names it (an ObjectReference)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None  # None: cluster-scoped (its results go to a ClusterPolicyReport)
    uid: str = ""

    def ref(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.uid:
            ref["uid"] = self.uid
        return ref

    def shown(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class Result:
    """One verdict: ``policy`` (a PlacementPolicy's name, or ``SCHEDULING_POLICY``), ``rule``
    (the field group the policy would write, e.g. ``affinity``, ``tolerations``, ``priority``,
    ``strategy``; or one of the scheduling rules above), the status, a one-line message, and for
    a fail the JSON patch the policy would make (RFC 6902, as admission would answer)."""

    resource: Resource
    policy: str
    rule: str
    status: Status
    message: str
    patch: tuple[Mapping[str, Any], ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)  # results[].properties: strings only
