"""Pydantic models of a PlacementPolicy (docs/policies.md) and its JSON Schema; no I/O.

Unknown fields are rejected at every level, fields use the camelCase names of the YAML,
and every loading rule (docs/policies.md) is checked here so the engine can trust ``Policy.spec``.
Kubernetes-shaped building blocks live in :mod:`webhook.policy.affinity`, scalar types in
:mod:`webhook.policy.types`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, StrictBool, StrictInt, StrictStr, Tag, model_validator

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
    "rewrite_objects",
    "schema",
]

DEFAULT_TOPOLOGY_KEY = "kubernetes.io/hostname"
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
CapacityType = Literal["spot", "on-demand"]


class PodAntiAffinity(Model):
    """Self anti-affinity (``spread``) and/or explicit pod anti-affinity ``terms``."""

    spread: Literal["required", "preferred"] | None = Field(None, description=(
        "Keep the workload's own replicas on distinct topology domains: required (the scheduler must) "
        "or preferred (it tries). A DaemonSet already runs one pod per node, so spread does nothing for it."))
    topology_key: LabelKey | None = Field(None, description=(
        "The node label whose values are the domains spread apart; default kubernetes.io/hostname "
        "(one replica per node)."))
    weight: Weight | None = Field(None, description="The weight of a preferred spread, 1 to 100 (default 100).")
    label_selector: LabelSelector | None = Field(None, description=(
        "The pods to spread apart; default: the workload's own pods (its selector, or its pod-template "
        "labels without the ones that change per revision)."))
    match_label_keys: list[LabelKey] | None = Field(None, description=(
        "Pod label keys whose values are added to the selector from each incoming pod, as Kubernetes' "
        "matchLabelKeys does."))
    terms: PodAffinity | None = Field(None, description=(
        "Pod anti-affinity terms written as Kubernetes writes them (required and preferred), "
        "instead of or besides spread."))

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

    label: LabelKey = Field(description="The node label that tells spot nodes from on-demand ones.")
    spot: list[LabelValue] = Field(min_length=1, description="The label's values on spot nodes.")
    # [] means "nodes without the label" (as gke/aks)
    on_demand: list[LabelValue] = Field(description=(
        "The label's values on on-demand nodes; [] means the nodes without the label."))
    toleration: Toleration | None = Field(None, description=(
        "The toleration a pod needs to run on spot nodes, when the provider taints them."))


def _provider_kind(value: Any) -> str:
    return "explicit" if isinstance(value, (dict, ExplicitProvider)) else "name"


Provider = Annotated[
    Annotated[Literal["generic", "karpenter", "eks", "gke", "aks"], Tag("name")]
    | Annotated[ExplicitProvider, Tag("explicit")],
    Discriminator(_provider_kind),
]


class Capacity(Model):
    """Spot / on-demand capacity (docs/policies.md, "capacity")."""

    prefer: CapacityType | None = Field(None, description=(
        "spot or on-demand: a preferred node-affinity term for that capacity (set prefer or require)."))
    require: CapacityType | None = Field(None, description=(
        "spot or on-demand: a required node-affinity term for that capacity (set prefer or require)."))
    weight: Weight | None = Field(None, description="The weight of the preferred term, 1 to 100 (default 50).")
    provider: Provider | None = Field(None, description=(
        "How nodes say their capacity: generic, karpenter, eks, gke or aks (default generic), or an "
        "explicit provider {label, spot, onDemand, toleration}."))

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

    weight: Weight = Field(description="The weight of the preference, 1 to 100.")
    threshold: Percent = Field(description="Prefer nodes whose usage is below this percentage, '0%' to '100%'.")


class RequiredResource(Model):
    """Require nodes with at least ``minAvailable`` of a resource free."""

    resource_type: Literal["cpu", "memory", "storage", "gpu"] = Field(description=(
        "The resource: cpu, memory, storage or gpu; each may be listed once."))
    min_available: Quantity = Field(description=(
        "The least that must be free on the node, a Kubernetes quantity greater than zero "
        "(500m, 4Gi); GPUs in whole devices."))

    @model_validator(mode="after")
    def _whole_gpus(self) -> RequiredResource:
        if self.resource_type == "gpu" and not self.min_available.isdigit():
            fail("GPUs are counted in whole devices; use an integer like '1'", at=["minAvailable"])
        return self


class Resources(Model):
    """Resource affinity served by node labels (docs/policies.md, "resources")."""

    preferred_cpu: Threshold | None = Field(None, alias="preferredCPU", description=(
        "Prefer nodes whose requested CPU is below a threshold of their allocatable CPU."))
    preferred_memory: Threshold | None = Field(None, description=(
        "Prefer nodes whose requested memory is below a threshold of their allocatable memory."))
    preferred_storage: Threshold | None = Field(None, description=(
        "Prefer nodes whose requested ephemeral storage is below a threshold of their allocatable storage."))
    required_resources: list[RequiredResource] | None = Field(None, min_length=1, description=(
        "Require nodes with at least this much of a resource free."))

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

    node_selector: dict[LabelKey, LabelValue] | None = Field(None, description=(
        "Labels the node must carry, {key: value}. Under merge a key is added when the object lacks "
        "it; a different existing value is kept, with a warning."))
    node_affinity: NodeAffinity | None = Field(None, description=(
        "Nodes to run on: required terms are ORed (each is ANDed into the object's own terms under "
        "merge), preferred terms add score."))
    node_anti_affinity: NodeAntiAffinity | None = Field(None, description=(
        "Nodes to avoid, shaped as nodeAffinity; each expression is negated into node affinity. A "
        "preferred term holds exactly one expression."))
    pod_anti_affinity: PodAntiAffinity | None = Field(None, description=(
        "Keep pods apart: spread the workload's own replicas, and/or explicit pod anti-affinity terms."))
    pod_affinity: PodAffinity | None = Field(None, description="Run near other pods: Kubernetes pod affinity terms.")
    tolerations: list[Toleration] | None = Field(None, description=(
        "Kubernetes tolerations, appended unless an equal one is already there."))
    capacity: Capacity | None = Field(None, description=(
        "Spot or on-demand nodes, preferred or required, through the labels of a capacity provider."))
    resources: Resources | None = Field(None, description=(
        "Resource-aware placement through the node labels that placement-webhook label-nodes keeps "
        "current (usage and free capacity)."))


class Scheduling(Model):
    """Scalar scheduling fields of the pod spec."""

    priority_class_name: DnsSubdomain | None = Field(None, description=(
        "The pod's PriorityClass; setting it removes a stale integer priority from the pod spec."))
    preemption_policy: Literal["Never", "PreemptLowerPriority"] | None = Field(None, description=(
        "Never or PreemptLowerPriority; written only when the PriorityClass is known to carry the same value."))
    scheduler_name: DnsSubdomain | None = Field(None, description="The scheduler that places the pods.")


class Rollout(Model):
    """Rolling-update settings for Deployments (docs/policies.md, "rollout")."""

    mode: Literal["safe", "explicit"] | None = Field(None, description=(
        "safe (default): maxSurge and maxUnavailable chosen so the rollout keeps capacity and never "
        "deadlocks; explicit: the values below written as they are."))
    max_unavailable: IntOrPercent | None = Field(None, description=(
        "An integer of at least 0 or a percentage up to 100%; not zero together with maxSurge."))
    max_surge: IntOrPercent | None = Field(None, description=(
        "An integer of at least 0 or a percentage; not zero together with maxUnavailable."))
    min_ready_seconds: NonNegativeInt | None = Field(None, description=(
        "Seconds a new pod must be ready before it counts as available."))

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

    eviction_strategy: Literal["LiveMigrate", "LiveMigrateIfPossible", "External", "None"] = Field(
        description="What KubeVirt does with the VM when its node is drained.")


class Match(Model):
    """Objects a policy selects: every listed criterion must hold; an omitted one matches all."""

    kinds: list[Annotated[StrictStr, Field(min_length=1)]] | None = Field(None, min_length=1, description=(
        "Kinds as Kind, group/Kind, group/version/Kind or v1/Pod; any version of a group and kind matches."))
    operations: list[Operation] | None = Field(None, min_length=1, description=(
        "Admission operations; default CREATE and UPDATE (DELETE and CONNECT are never mutated)."))
    namespaces: list[Glob] | None = Field(None, min_length=1, description=(
        "Namespace globs (team-*, app-?, [ab]-prod), case-sensitive."))
    exclude_namespaces: list[Glob] | None = Field(None, min_length=1, description="Namespace globs left out.")
    names: list[Glob] | None = Field(None, min_length=1, description="Globs on the object's name.")
    selector: LabelSelector | None = Field(None, description="A label selector on the object's own labels.")
    pod_selector: LabelSelector | None = Field(None, description="A label selector on the pod template's labels.")
    namespace_selector: LabelSelector | None = Field(None, description=(
        "A label selector on the namespace's labels; needs the webhook's cluster view."))
    annotations: dict[LabelKey, Text] | None = Field(None, description=(
        "{key: glob}: the object has the annotation and its value matches the glob."))


class Exclude(Match):
    """Objects a policy skips even when ``match`` selects them."""

    @model_validator(mode="after")
    def _not_empty(self) -> Exclude:
        if not self.model_fields_set:
            fail("an empty exclude would exclude every object; remove it or add a criterion")
        return self


class Spec(Model):
    """What a policy selects and what it does to the selected objects."""

    description: StrictStr | None = Field(None, description="Free text: what the policy is for.")
    order: StrictInt = Field(0, description=(
        "Policies run by ascending order, ties by name; each sees the object as the previous one left it."))
    match: Match | None = Field(None, description=(
        "The objects the policy selects: every listed criterion must hold; an omitted one matches all."))
    exclude: Exclude | None = Field(None, description=(
        "Objects the policy skips even when match selects them; same shape as match, at least one criterion."))
    on_conflict: Literal["merge", "keep", "replace"] = Field("merge", description=(
        "What happens to what the object already has: merge (additive), keep (a field group the object "
        "sets is left alone) or replace (the policy's value replaces it)."))
    enforcement: Literal["patch", "audit"] = Field("patch", description=(
        "patch changes the objects; audit computes, warns and counts, but changes nothing."))
    allow_skip: StrictBool = Field(True, description=(
        'Whether an object annotated placement.novasphere.dev/skip: "true" opts out of this policy. '
        "false keeps the policy in force on such objects (data residency, say), with a warning that "
        "the skip was refused."))
    placement: Placement | None = Field(None, description=(
        "Where the pods may and should run: node and pod (anti-)affinity, tolerations, capacity, resources."))
    scheduling: Scheduling | None = Field(None, description="Priority class, preemption policy and scheduler.")
    rollout: Rollout | None = Field(None, description="Rolling-update settings (Deployments).")
    vm: VM | None = Field(None, description="KubeVirt settings (KubeVirt kinds).")


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
    result = rewrite_objects(raw, _simpler)
    result["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    result["$id"] = f"https://{API_VERSION}/{POLICY_KIND}.json"
    result["title"] = POLICY_KIND
    return result


def rewrite_objects(node: Any, rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """``node`` (JSON data: a schema, or part of one) with every object replaced by ``rewrite(object)``,
    top down: an object's members are rewritten after the object, in what ``rewrite`` returned.
    Built anew: ``node`` is left as it was."""
    if isinstance(node, list):
        return [rewrite_objects(item, rewrite) for item in node]
    if not isinstance(node, dict):
        return node
    return {key: rewrite_objects(value, rewrite) for key, value in rewrite(node).items()}


def _simpler(node: dict[str, Any]) -> dict[str, Any]:
    """Without pydantic's noise: ``null`` branches of optional fields, titles, ``default: null``."""
    branches = node.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        node = {k: v for k, v in node.items() if k != "anyOf"}
        node.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
    return {key: value for key, value in node.items() if key != "title" and not (key == "default" and value is None)}
