"""Policies as the loader hands them to the engine: plain data with the loader's defaults."""
from __future__ import annotations

import copy
from typing import Any

from webhook.kube.kinds import BUILTIN
from webhook.policy.policyset import Policy, PolicySet


def policy(
    name: str = "p",
    *,
    order: int = 0,
    targets: tuple[str, ...] | None = None,
    on_conflict: str = "merge",
    **spec: Any,
) -> Policy:
    """A ``Policy`` with every default the loader fills in (``order``, ``onConflict``,
    ``enforcement``, spread and capacity defaults, rollout mode); ``targets`` names the
    kinds of ``match.kinds``."""
    spec = copy.deepcopy(spec)
    spec = {"order": order, "onConflict": on_conflict, "enforcement": "patch", **spec}
    placement = spec.get("placement") or {}
    anti = placement.get("podAntiAffinity")
    if anti and anti.get("spread"):
        anti.setdefault("topologyKey", "kubernetes.io/hostname")
        anti.setdefault("weight", 100)
    capacity = placement.get("capacity")
    if capacity:
        capacity.setdefault("weight", 50)
        capacity.setdefault("provider", "generic")
    if spec.get("rollout"):
        spec["rollout"].setdefault("mode", "safe")
    resolved = None
    if targets is not None:
        resolved = frozenset(t for ref in targets for t in BUILTIN.resolve(ref))
        spec.setdefault("match", {})["kinds"] = list(targets)
    return Policy(name=name, spec=spec, order=order, targets=resolved)


def policy_set(*policies: Policy) -> PolicySet:
    return PolicySet(tuple(policies))


# A policy that applies only in namespaces labelled env=prod: what the cluster view decides.
PROD_SSD_YAML = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: prod-ssd}
spec:
  match: {kinds: [Deployment], namespaceSelector: {matchLabels: {env: prod}}}
  placement: {nodeSelector: {disk: ssd}}
"""


# The smallest useful policy: every Deployment onto SSD nodes.
SSD_POLICY = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: ssd
spec:
  match:
    kinds: [Deployment]
  placement:
    nodeSelector:
      disktype: ssd
"""


# One cluster-side policy and its twin with a misspelt kind, as plain specs and as a file: the tests
# of policies read from the cluster, their status and the validating webhook share them.
GOLD_SPEC: dict[str, Any] = {"match": {"kinds": ["Deployment"]}, "scheduling": {"priorityClassName": "gold"}}
TYPO_SPEC: dict[str, Any] = {"match": {"kinds": ["Deploymnet"]}, "placement": {"nodeSelector": {"disk": "ssd"}}}
GOLD_FILE = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: gold
spec:
  match: {kinds: [Deployment]}
  scheduling: {priorityClassName: gold}
"""
