"""Pydantic models of a PlacementPolicy (docs/policies.md) and its JSON Schema; no I/O.

Unknown fields are rejected at every level, fields use the camelCase names of the YAML,
and every loading rule (docs/policies.md) is checked here so the engine can trust ``Policy.spec``.
Kubernetes-shaped building blocks live in :mod:`webhook.policy_affinity`, scalar types in
:mod:`webhook.policy_types`.
"""
from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, StrictInt, StrictStr, Tag, model_validator

from webhook import API_VERSION, POLICY_KIND
from webhook.policy.affinity import (
    LabelSelector,
    Model,
    NodeAffinity,
    NodeAntiAffinity,
    PodAffinity,
    Toleration,
    check_label_keys,
)
from webhook.policy.types import (
    DnsSubdomain,
    Glob,
    IntOrPercent,
    LabelKey,
    LabelValue,
    NonNegativeInt,
    Percent,
    Quantity,
    Text,
    Weight,
    fail,
)

__all__ = [
    "Capacity",
    "Match",
    "Placement",
    "PlacementPolicy",
    "Rollout",
    "Scheduling",
    "Spec",
    "schema",
]

DEFAULT_TOPOLOGY_KEY = "kubernetes.io/hostname"
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
CapacityType = Literal["spot", "on-demand"]


class PodAntiAffinity(Model):
    """Self anti-affinity (``spread``) and/or explicit pod anti-affinity ``terms``."""

    spread: Literal["required", "preferred"] | None = None
    topology_key: LabelKey | None = None
    weight: Weight | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: list[LabelKey] | None = None
    terms: PodAffinity | None = None

    @model_validator(mode="after")
    def _spread_fields(self) -> PodAntiAffinity:
        if self.spread is None:
            if self.terms is None:
                fail("set 'spread' (required or preferred) or 'terms'")
            for name in ("topologyKey", "weight", "labelSelector", "matchLabelKeys"):
                if getattr(self, _snake(name)) is not None:
                    fail(f"{name} applies to 'spread'; set spread or move it into terms", at=[name])
            return self
        if self.spread == "required" and self.weight is not None:
            fail("weight applies only to spread: preferred", at=["weight"])
        if self.label_selector is not None:
            check_label_keys(self.label_selector, self.match_label_keys, None)
        self.topology_key = self.topology_key or DEFAULT_TOPOLOGY_KEY
        self.weight = self.weight or 100
        return self


class ExplicitProvider(Model):
    """A capacity provider spelt out: the node label and its spot / on-demand values."""

    label: LabelKey
    spot: list[LabelValue] = Field(min_length=1)
    on_demand: list[LabelValue]  # [] means "nodes without the label" (as gke/aks)
    toleration: Toleration | None = None


def _provider_kind(value: Any) -> str:
    return "explicit" if isinstance(value, (dict, ExplicitProvider)) else "name"


Provider = Annotated[
    Annotated[Literal["generic", "karpenter", "eks", "gke", "aks"], Tag("name")]
    | Annotated[ExplicitProvider, Tag("explicit")],
    Discriminator(_provider_kind),
]


class Capacity(Model):
    """Spot / on-demand capacity (docs/policies.md, "capacity")."""

    prefer: CapacityType | None = None
    require: CapacityType | None = None
    weight: Weight | None = None
    provider: Provider | None = None

    @model_validator(mode="after")
    def _prefer_or_require(self) -> Capacity:
        if self.prefer is None and self.require is None:
            fail("set 'prefer' or 'require' (spot or on-demand)")
        if self.prefer and self.require:
            relation = "repeats" if self.prefer == self.require else "contradicts"
            fail(f"prefer: {self.prefer} {relation} require: {self.require}; keep one", at=["prefer"])
        if self.require and self.weight is not None:
            fail("weight applies only to 'prefer'", at=["weight"])
        self.weight = self.weight or 50
        self.provider = self.provider or "generic"
        return self


class Threshold(Model):
    """Prefer nodes whose usage of a resource is below ``threshold``."""

    weight: Weight
    threshold: Percent


class RequiredResource(Model):
    """Require nodes with at least ``minAvailable`` of a resource free."""

    resource_type: Literal["cpu", "memory", "storage", "gpu"]
    min_available: Quantity

    @model_validator(mode="after")
    def _whole_gpus(self) -> RequiredResource:
        if self.resource_type == "gpu" and not self.min_available.isdigit():
            fail("GPUs are counted in whole devices; use an integer like '1'", at=["minAvailable"])
        return self


class Resources(Model):
    """Resource affinity served by node labels (docs/policies.md, "resources")."""

    preferred_cpu: Threshold | None = Field(None, alias="preferredCPU")
    preferred_memory: Threshold | None = None
    preferred_storage: Threshold | None = None
    required_resources: list[RequiredResource] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Resources:
        seen: set[str] = set()
        for i, item in enumerate(self.required_resources or ()):
            if item.resource_type in seen:
                fail(f"resourceType {item.resource_type} is listed twice", at=["requiredResources", i])
            seen.add(item.resource_type)
        if not any((self.preferred_cpu, self.preferred_memory, self.preferred_storage, self.required_resources)):
            fail("set preferredCPU, preferredMemory, preferredStorage or requiredResources")
        return self


class Placement(Model):
    """Where the workload's pods may and should run."""

    node_selector: dict[LabelKey, LabelValue] | None = None
    node_affinity: NodeAffinity | None = None
    node_anti_affinity: NodeAntiAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None
    pod_affinity: PodAffinity | None = None
    tolerations: list[Toleration] | None = None
    capacity: Capacity | None = None
    resources: Resources | None = None


class Scheduling(Model):
    """Scalar scheduling fields of the pod spec."""

    priority_class_name: DnsSubdomain | None = None
    preemption_policy: Literal["Never", "PreemptLowerPriority"] | None = None
    scheduler_name: DnsSubdomain | None = None


class Rollout(Model):
    """Rolling-update settings for Deployments (docs/policies.md, "rollout")."""

    mode: Literal["safe", "explicit"] | None = None
    max_unavailable: IntOrPercent | None = None
    max_surge: IntOrPercent | None = None
    min_ready_seconds: NonNegativeInt | None = None

    @model_validator(mode="after")
    def _mode_rules(self) -> Rollout:
        self.mode = self.mode or "safe"
        if _is_zero(self.max_surge) and _is_zero(self.max_unavailable):
            fail("maxSurge and maxUnavailable may not both be zero (the rollout could never progress)",
                 at=["maxUnavailable"])
        if isinstance(self.max_unavailable, str) and int(self.max_unavailable[:-1]) > 100:
            fail("maxUnavailable may not be more than 100%", at=["maxUnavailable"])
        if self.mode == "explicit" and (
            self.max_surge is None and self.max_unavailable is None and self.min_ready_seconds is None
        ):
            fail("explicit mode needs maxSurge, maxUnavailable or minReadySeconds")
        return self


def _is_zero(value: int | str | None) -> bool:
    return value in (0, "0%")


class VM(Model):
    """KubeVirt settings."""

    eviction_strategy: Literal["LiveMigrate", "LiveMigrateIfPossible", "External", "None"]


class Match(Model):
    """Objects a policy selects: every listed criterion must hold; an omitted one matches all."""

    kinds: list[Annotated[StrictStr, Field(min_length=1)]] | None = Field(None, min_length=1)
    operations: list[Operation] | None = Field(None, min_length=1)
    namespaces: list[Glob] | None = Field(None, min_length=1)
    exclude_namespaces: list[Glob] | None = Field(None, min_length=1)
    names: list[Glob] | None = Field(None, min_length=1)
    selector: LabelSelector | None = None
    pod_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    annotations: dict[LabelKey, Text] | None = None


class Exclude(Match):
    """Objects a policy skips even when ``match`` selects them."""

    @model_validator(mode="after")
    def _not_empty(self) -> Exclude:
        if not self.model_fields_set:
            fail("an empty exclude would exclude every object; remove it or add a criterion")
        return self


class Spec(Model):
    """What a policy selects and what it does to the selected objects."""

    description: StrictStr | None = None
    order: StrictInt = 0
    match: Match | None = None
    exclude: Exclude | None = None
    on_conflict: Literal["merge", "keep", "replace"] = "merge"
    enforcement: Literal["patch", "audit"] = "patch"
    placement: Placement | None = None
    scheduling: Scheduling | None = None
    rollout: Rollout | None = None
    vm: VM | None = None


class Metadata(Model):
    """Object metadata of a policy; the name is unique across the loaded set."""

    name: DnsSubdomain
    labels: dict[LabelKey, LabelValue] | None = None
    annotations: dict[LabelKey, StrictStr] | None = None


class PlacementPolicy(Model):
    """A ``placement.novasphere.dev/v1alpha1`` ``PlacementPolicy`` document."""

    api_version: Literal["placement.novasphere.dev/v1alpha1"]
    kind: Literal["PlacementPolicy"]
    metadata: Metadata
    spec: Spec

    def spec_data(self) -> dict[str, Any]:
        """The spec as plain data: camelCase keys, unset fields dropped, defaults filled."""
        return self.spec.model_dump(by_alias=True, exclude_none=True)


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


def schema() -> dict[str, Any]:
    """The JSON Schema of a PlacementPolicy document, for editors (YAML language servers)."""
    raw = PlacementPolicy.model_json_schema(by_alias=True, mode="validation")
    result = _simplify(copy.deepcopy(raw))
    result["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    result["$id"] = f"https://{API_VERSION}/{POLICY_KIND}.json"
    result["title"] = POLICY_KIND
    return result


def _simplify(node: Any) -> Any:
    """Drop pydantic's noise: ``null`` branches of optional fields, titles, ``default: null``."""
    if isinstance(node, list):
        return [_simplify(item) for item in node]
    if not isinstance(node, dict):
        return node
    branches = node.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        node = {k: v for k, v in node.items() if k != "anyOf"}
        node.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
    return {
        key: _simplify(value)
        for key, value in node.items()
        if key != "title" and not (key == "default" and value is None)
    }
