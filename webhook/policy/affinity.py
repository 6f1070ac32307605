"""Kubernetes-shaped pieces of a policy: label selectors, node terms, pod affinity terms,
tolerations. Each follows the API server's own validation (pkg/apis/core/validation), so
whatever the engine writes from them is accepted by the API server.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator
from pydantic.alias_generators import to_camel

from webhook.kube import names
from webhook.kube.nodes import INT64_MAX, label_int
from webhook.policy.types import (
    DnsLabel,
    FieldValue,
    LabelKey,
    LabelValue,
    Weight,
    fail,
)

__all__ = [
    "LabelSelector",
    "Model",
    "NodeAffinity",
    "NodeAntiAffinity",
    "NodeTerm",
    "PodAffinity",
    "PodAffinityTerm",
    "Toleration",
]


class Model(BaseModel):
    """Base of every policy model: camelCase fields, unknown fields rejected."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=False)


_Key = TypeVar("_Key", bound=str)
_Value = TypeVar("_Value", bound=str)
_Required = TypeVar("_Required", bound=BaseModel)
_Preferred = TypeVar("_Preferred", bound=BaseModel)


def _check_values(operator: str, values: Sequence[str] | None) -> None:
    """The value-count rules Kubernetes applies to selector requirements (Gt and Lt: node ones only)."""
    count = len(values or ())
    if operator in ("In", "NotIn") and count == 0:
        fail(f"operator {operator} needs at least one value", at=["values"])
    if operator in ("Exists", "DoesNotExist") and values is not None:
        fail(f"operator {operator} takes no values; remove 'values'", at=["values"])
    if operator in ("Gt", "Lt"):
        if count != 1:
            fail(f"operator {operator} needs exactly one value, an integer", at=["values"])
        first = (values or [""])[0]
        # As the scheduler reads it (kube.nodes.label_int): "1_0", "+5", " 5" or a number
        # beyond int64 would pass validation and then never match any node.
        if label_int(first) is None:
            fail(f"operator {operator} compares integers; {first!r} is not one (digits only, at most {INT64_MAX})",
                 at=["values", 0])


class _Requirement(Model, Generic[_Key, _Value]):
    """A selector requirement: ``key``, ``operator`` and ``values``, as every Kubernetes selector
    writes one. Each kind types the key and the values and names its operators; ``_check`` holds
    its rules."""

    key: _Key
    operator: str
    values: list[_Value] | None = None

    @model_validator(mode="after")
    def _checked(self) -> Self:
        self._check()
        return self

    def _check(self) -> None:
        """The label selectors' rules: the values the operator takes."""
        _check_values(self.operator, self.values)


class Requirement(_Requirement[LabelKey, LabelValue]):
    """A label selector requirement (metav1.LabelSelectorRequirement)."""

    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelector(Model):
    """A Kubernetes label selector; an empty selector selects everything."""

    match_labels: dict[LabelKey, LabelValue] | None = None
    match_expressions: list[Requirement] | None = None

    def keys(self) -> set[str]:
        return set(self.match_labels or ()) | {r.key for r in self.match_expressions or ()}


class NodeRequirement(_Requirement[LabelKey, LabelValue]):
    """A node selector requirement on node labels (``matchExpressions``)."""

    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


class FieldRequirement(_Requirement[str, FieldValue]):
    """A node selector requirement on node fields (``matchFields``): the node name only."""

    def _check(self) -> None:
        # Kubernetes supports exactly this form for node field selectors.
        if self.key != "metadata.name":
            fail(f"matchFields supports only key 'metadata.name', not {self.key!r}", at=["key"])
        if self.operator not in ("In", "NotIn"):
            fail(f"matchFields supports only operators In and NotIn, not {self.operator!r}", at=["operator"])
        if len(self.values or ()) != 1:
            fail(f"matchFields with {self.operator} needs exactly one value, a node name", at=["values"])
        error = names.dns_subdomain_error((self.values or [""])[0])
        if error:
            fail(f"node name {error}", at=["values", 0])


class NodeTerm(Model):
    """A NodeSelectorTerm: its requirements are ANDed."""

    match_expressions: list[NodeRequirement] | None = None
    match_fields: list[FieldRequirement] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> NodeTerm:
        if not self.requirement_count():
            fail("a term needs matchExpressions or matchFields (an empty term matches no node)")
        return self

    def requirement_count(self) -> int:
        return len(self.match_expressions or ()) + len(self.match_fields or ())


class PreferredNodeTerm(Model):
    """A PreferredSchedulingTerm."""

    weight: Weight
    preference: NodeTerm


class _Affinity(Model, Generic[_Required, _Preferred]):
    """``required`` and ``preferred`` terms, as node and pod affinity both have them; one must be set."""

    required: list[_Required] | None = Field(None, min_length=1)
    preferred: list[_Preferred] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _something_set(self) -> Self:
        if not self.required and not self.preferred:
            fail("set 'required' or 'preferred'")
        return self


class NodeAffinity(_Affinity[NodeTerm, PreferredNodeTerm]):
    """Nodes to run on: ``required`` terms are ORed, ``preferred`` terms add score."""


class NodeAntiAffinity(NodeAffinity):
    """Nodes to avoid; compiled to node affinity by negating each expression."""

    @model_validator(mode="after")
    def _preferred_terms_are_single(self) -> NodeAntiAffinity:
        for i, term in enumerate(self.preferred or ()):
            if term.preference.requirement_count() != 1:
                fail(
                    "a preferred nodeAntiAffinity term must hold exactly one expression: avoiding "
                    "nodes that match A AND B means preferring NOT A OR NOT B, which one preferred "
                    "term cannot express; write one term per expression",
                    at=["preferred", i, "preference"],
                )
        return self


class PodAffinityTerm(Model):
    """Kubernetes' PodAffinityTerm."""

    label_selector: LabelSelector | None = None
    namespaces: list[DnsLabel] | None = None
    namespace_selector: LabelSelector | None = None
    topology_key: LabelKey
    match_label_keys: list[LabelKey] | None = None
    mismatch_label_keys: list[LabelKey] | None = None

    @model_validator(mode="after")
    def _label_keys_consistent(self) -> PodAffinityTerm:
        check_label_keys(self.label_selector, self.match_label_keys, self.mismatch_label_keys)
        return self


def check_label_keys(
    selector: LabelSelector | None, match: list[str] | None, mismatch: list[str] | None
) -> None:
    """The API server's rules for matchLabelKeys / mismatchLabelKeys."""
    if (match or mismatch) and selector is None:
        field = "matchLabelKeys" if match else "mismatchLabelKeys"
        fail(f"{field} needs a labelSelector to refine", at=[field])
    both = set(match or ()) & set(mismatch or ())
    if both:
        fail(f"{min(both)!r} is in both matchLabelKeys and mismatchLabelKeys", at=["mismatchLabelKeys"])
    in_selector = set(match or ()) & (selector.keys() if selector else set())
    if in_selector:
        fail(f"{min(in_selector)!r} is in both matchLabelKeys and labelSelector", at=["matchLabelKeys"])


class WeightedPodAffinityTerm(Model):
    """Kubernetes' WeightedPodAffinityTerm."""

    weight: Weight
    pod_affinity_term: PodAffinityTerm


class PodAffinity(_Affinity[PodAffinityTerm, WeightedPodAffinityTerm]):
    """Pod (anti-)affinity terms in Kubernetes' own shape."""


class Toleration(Model):
    """Kubernetes' Toleration, with the API server's rules (ValidateTolerations)."""

    key: LabelKey | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: StrictInt | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if not self.key and self.operator != "Exists":
            fail("a toleration without a key must use operator Exists (it tolerates every taint)", at=["operator"])
        if self.operator == "Exists" and self.value:
            fail("operator Exists takes no value; remove 'value' or use operator Equal", at=["value"])
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            fail("tolerationSeconds applies only to effect NoExecute", at=["tolerationSeconds"])
        return self
