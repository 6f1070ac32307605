"""An immutable, validated set of policies, indexed by the kinds they can match.

The loader builds it; the engine reads it. Indexing by (group, kind) keeps the cost of an
admission close to the number of policies that *can* apply, not the number loaded.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.kube.kinds import BUILTIN, Target, Targets


@dataclass(frozen=True, slots=True, eq=False)
class Policy:
    """One validated PlacementPolicy as plain data.

    ``spec`` is the policy's ``spec`` exactly as written (camelCase keys), validated, with
    ``None`` values dropped and the defaults of ``order``, ``onConflict``, ``enforcement`` and
    ``allowSkip`` filled in. The engine never sees pydantic models.
    """

    name: str
    spec: Mapping[str, Any]
    source: str = "<memory>"  # "file:line" of the document, for messages
    order: int = 0
    # Targets this policy's ``match.kinds`` names; None when it names none (any kind).
    targets: frozenset[Target] | None = None
    # Derived data the engine computes once per policy (compiled fragments, matchers).
    # The policy is immutable, so anything derived from it alone may be memoised here.
    cache: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    # ``spec.onConflict`` and ``spec.enforcement``: admission asks each several times per policy.
    on_conflict: str = field(init=False, repr=False)
    enforcement: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "on_conflict", str(self.spec.get("onConflict", "merge")))
        object.__setattr__(self, "enforcement", str(self.spec.get("enforcement", "patch")))

    @property
    def allow_skip(self) -> bool:
        """Whether the object annotation ``placement.novasphere.dev/skip: "true"`` opts an
        object out of this policy (``spec.allowSkip``, default true)."""
        return self.spec.get("allowSkip", True) is not False


@dataclass(frozen=True)
class PolicySet:
    """Policies sorted by (order, name), with a per-kind index."""

    policies: tuple[Policy, ...] = ()
    targets: Targets = BUILTIN
    # False for the empty set a server answers with before any set loaded: admission then
    # says that nothing could be applied.
    loaded: bool = True
    _index: dict[tuple[str, str], tuple[Policy, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    # Derived data other modules memoise per set (``matching.index_for``); it lives and dies
    # with the set. Nothing in it may refer back to the set: a cycle would keep a set that a
    # reload replaced alive until the cyclic collector runs.
    cache: dict[str, Any] = field(init=False, repr=False, compare=False, hash=False, default_factory=dict)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.policies, key=lambda p: (p.order, p.name)))
        object.__setattr__(self, "policies", ordered)
        index: dict[tuple[str, str], tuple[Policy, ...]] = {}
        for target in self.targets:
            key = (target.group, target.kind)
            index[key] = tuple(p for p in ordered if p.targets is None or target in p.targets)
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.policies)

    def __iter__(self) -> Iterator[Policy]:
        return iter(self.policies)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.policies)

    def candidates(self, target: Target) -> tuple[Policy, ...]:
        """Policies that can match objects of this target's kind, in run order."""
        return self._index.get((target.group, target.kind), ())

    @property
    def by_kind(self) -> Mapping[tuple[str, str], tuple[Policy, ...]]:
        """``candidates`` of every target, keyed by (group, kind)."""
        return self._index

    def digest(self) -> str:
        """A short content hash, for logs and the reload metric."""
        h = hashlib.sha256()
        for p in self.policies:
            h.update(json.dumps([p.name, p.spec], sort_keys=True, default=str).encode())
        return h.hexdigest()[:12]
