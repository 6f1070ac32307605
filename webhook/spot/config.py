"""The spot configuration (``SpotConfig``) shared by the extender and the spot controller.

Validated like policies: unknown fields are errors with a "did you mean", every error is
reported at once as ``file:line: field: message`` (``policy.errors``).

```yaml
apiVersion: placement.novasphere.dev/v1alpha1
kind: SpotConfig
provider: karpenter                 # or {label, spot, onDemand} (docs/policies.md, "capacity")
reclaim:                            # what says a spot node is about to be reclaimed
  taints: [example.com/reclaim]     # more taint keys, besides the built-in ones
  labels: {example.com/state: draining}        # a label (value "" = any value)
  annotations: {example.com/reclaim-at: ""}    # an annotation (value "" = any value)
  notReadySeconds: 120              # a spot node NotReady (or Unknown) for longer than this
critical:
  priorityThreshold: 1000000        # pods whose priority is at least this are critical
  annotation: placement.novasphere.dev/critical   # or annotated "true"
  requireOnDemand: false            # filter spot nodes out for critical pods
interruptible:
  annotation: placement.novasphere.dev/interruptible  # pods annotated "true" tolerate interruption
interruptions:
  windowSeconds: 3600               # reclaims remembered this long, per pool
  penalty: 2                        # score points off a spot node per reclaim in its pool
  poolLabels: [node.kubernetes.io/instance-type, topology.kubernetes.io/zone]
cost:
  factor: 0.3                       # share of the score that comes from price (0..1)
  prices:
  - {instanceType: m5.large, capacity: spot, hourly: 0.035}
  - {instanceType: m5.large, capacity: on-demand, hourly: 0.096}
```
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, StrictFloat, StrictInt, ValidationError, model_validator

from webhook import PREFIX
from webhook.files import documents
from webhook.kube import capacity as capacity_providers
from webhook.policy.affinity import Model
from webhook.policy.errors import LoadError, from_validation
from webhook.policy.model import CapacityType, Provider
from webhook.policy.types import LabelKey, LabelValue, NonNegativeInt, fail

__all__ = ["KIND", "SpotConfig", "SpotConfigError", "load"]

KIND = "SpotConfig"
Number = StrictInt | StrictFloat
PositiveInt = Annotated[int, Field(strict=True, gt=0)]


class Reclaim(Model):
    taints: list[LabelKey] = Field(default_factory=list)
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    annotations: dict[LabelKey, str] = Field(default_factory=dict)
    not_ready_seconds: NonNegativeInt | None = 120


class Critical(Model):
    priority_threshold: StrictInt = 1_000_000
    annotation: LabelKey = f"{PREFIX}critical"
    require_on_demand: bool = False


class Interruptible(Model):
    annotation: LabelKey = f"{PREFIX}interruptible"


class Interruptions(Model):
    window_seconds: PositiveInt = 3600
    penalty: NonNegativeInt = 2
    pool_labels: list[LabelKey] = Field(default_factory=lambda: ["node.kubernetes.io/instance-type",
                                                                 "topology.kubernetes.io/zone"])


class Price(Model):
    instance_type: LabelValue
    capacity: CapacityType
    hourly: Number = Field(ge=0)


class Cost(Model):
    factor: Number = Field(default=0.0, ge=0, le=1)
    prices: list[Price] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_price_each(self) -> Cost:
        seen: dict[tuple[str, str], int] = {}
        for i, price in enumerate(self.prices):
            key = (price.instance_type, price.capacity)
            if key in seen:
                fail(f"{price.instance_type} {price.capacity} is priced twice (also prices[{seen[key]}])",
                     at=["prices", i])
            seen[key] = i
        return self


class SpotConfig(Model):
    api_version: Literal["placement.novasphere.dev/v1alpha1"] = "placement.novasphere.dev/v1alpha1"
    kind: Literal["SpotConfig"] = "SpotConfig"
    provider: Provider = "generic"
    reclaim: Reclaim = Field(default_factory=Reclaim)
    critical: Critical = Field(default_factory=Critical)
    interruptible: Interruptible = Field(default_factory=Interruptible)
    interruptions: Interruptions = Field(default_factory=Interruptions)
    cost: Cost = Field(default_factory=Cost)
    _provider: dict[str, Any] | None = PrivateAttr(default=None)
    _prices: dict[tuple[str, str], float] | None = PrivateAttr(default=None)
    _capacity: tuple[str, frozenset[str], frozenset[str]] | None = PrivateAttr(default=None)

    def provider_entry(self) -> dict[str, Any]:
        """The provider's table entry (label, spot and on-demand values, toleration), once."""
        if self._provider is None:
            chosen: Any = self.provider if isinstance(self.provider, str) else self.provider.model_dump(
                by_alias=True, exclude_none=True)
            self._provider = dict(capacity_providers.provider({"provider": chosen}))
        return self._provider

    def capacity_rules(self) -> tuple[str, frozenset[str], frozenset[str]]:
        """The provider's capacity label and its spot and on-demand values, as sets, once."""
        if self._capacity is None:
            entry = self.provider_entry()
            self._capacity = (str(entry["label"]), frozenset(str(v) for v in entry.get("spot") or ()),
                              frozenset(str(v) for v in entry.get("onDemand") or ()))
        return self._capacity

    def price(self, instance_type: str, capacity: str) -> float | None:
        if self._prices is None:
            self._prices = {(p.instance_type, p.capacity): float(p.hourly) for p in self.cost.prices}
        return self._prices.get((instance_type, capacity))


class SpotConfigError(Exception):
    """The configuration file is broken; ``errors`` are every problem found."""

    def __init__(self, errors: Iterable[LoadError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


def load(path: str | Path | None) -> SpotConfig:
    """The configuration in ``path`` (None: the defaults)."""
    if path is None:
        return SpotConfig()
    try:
        docs = documents.load_file(path, strict=True)
    except documents.YamlError as exc:
        raise SpotConfigError([LoadError(exc.file, exc.line, "", exc.message)]) from None
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        line = docs[1].line if len(docs) > 1 else 1
        raise SpotConfigError([LoadError(str(path), line, "", f"expected one {KIND} document (a mapping)")])
    doc = docs[0]
    try:
        return SpotConfig.model_validate(doc.data)
    except ValidationError as exc:
        raise SpotConfigError(from_validation(exc, doc=doc, base=(), data=doc.data, root=SpotConfig)) from None


def schema() -> dict[str, Any]:
    return SpotConfig.model_json_schema(by_alias=True)
