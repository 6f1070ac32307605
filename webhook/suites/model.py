"""Pydantic models of a PlacementTest suite file (docs/testing-policies.md), validated as strictly as policies.

A suite names the policies under test and a list of cases: an object (inline or from a file),
the admission operation and namespace, and what the result must look like. Validation errors
carry the suite file's line and the field path, like policy errors do.
"""
from __future__ import annotations

import re
import typing
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from webhook.policy.errors import did_you_mean, format_path
from webhook.policy.types import NonNegativeInt

__all__ = [
    "Case", "ClusterSpec", "Expect", "Metadata", "PlacementExpect", "RolloutExpect", "Suite", "format_path",
    "validation_problems",
]

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
Result = Literal["patched", "unchanged", "skipped", "ignored", "error"]
EXPECTATIONS = ("object", "objectFile", "patch", "contains", "absent", "applied", "audited", "warnings", "unchanged", "result",
                "placement")
PLACEMENT_EXPECTATIONS = ("schedules", "placed", "pending", "nodes", "onlyNodes", "message", "rollout")
ROLLOUT_EXPECTATIONS = ("completes", "steps", "minAvailable")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class Metadata(_Model):
    """Who the suite is: its name shows in every result line."""

    name: str = Field(min_length=1)
    description: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


def _kind_is(kind: str) -> Any:
    """A check of one list item: a mapping whose ``kind``, when it says one, is ``kind``."""

    def check(value: dict[str, Any]) -> dict[str, Any]:
        given = value.get("kind")
        if given is not None and given != kind:
            raise ValueError(f"must be a {kind}, not kind {given!r}")
        return value

    return check


def _named(value: dict[str, Any]) -> dict[str, Any]:
    metadata = value.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise ValueError("needs metadata.name")
    return value


def _kubernetes_object(value: dict[str, Any]) -> dict[str, Any]:
    if not (isinstance(value.get("apiVersion"), str) and isinstance(value.get("kind"), str)):
        raise ValueError("an object needs string apiVersion and kind")  # noqa: TRY004 (pydantic wants ValueError)
    return value


def _not_null(value: Any) -> Any:
    if value is None:
        raise ValueError("null is not a node name (count Pending replicas with pending)")
    return value


NodeObject = Annotated[dict[str, Any], AfterValidator(_kind_is("Node"))]
PodObject = Annotated[dict[str, Any], AfterValidator(_kind_is("Pod")), AfterValidator(_named)]
AnyObject = Annotated[dict[str, Any], AfterValidator(_kubernetes_object)]
NodeName = Annotated[str, BeforeValidator(_not_null), Field(min_length=1)]
FilePath = Annotated[str, Field(min_length=1)]


class ClusterSpec(_Model):
    """A static cluster view the cases run against (docs/policies.md, "What needs the cluster
    view"); omitted: no cluster view. With ``pods``, ``objects`` and ``stateFiles`` it is also
    the cluster state ``expect.placement`` simulates the scheduler on, as ``explain`` does."""

    namespaces: dict[str, dict[str, str]] = Field(default_factory=dict)  # name -> labels
    nodes: list[NodeObject] = Field(default_factory=list)
    priority_classes: list[dict[str, Any]] = Field(default_factory=list)
    match_label_keys: StrictBool | None = None
    pods: list[PodObject] = Field(default_factory=list)  # running Pods (spec.nodeName says where)
    objects: list[AnyObject] = Field(default_factory=list)  # any objects: PDBs, Deployments, ReplicaSets, ...
    state_files: list[FilePath] = Field(default_factory=list)  # kubectl dumps, relative to the suite file

    @field_validator("priority_classes")
    @classmethod
    def _priority_classes_are_named(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for pc in value:
            if not isinstance(pc.get("metadata"), dict) or not isinstance(pc["metadata"].get("name"), str):
                raise ValueError("each PriorityClass needs metadata.name")  # noqa: TRY004 (pydantic wants ValueError)
        return value


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
    return pattern


class _Expectations(_Model):
    """A block of expectations: at least one of its ``EXPECTED`` (YAML names) must be given."""

    EXPECTED: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _something_to_check(self) -> Self:
        if all(getattr(self, _python_name(e)) is None for e in self.EXPECTED):
            raise ValueError(f"give at least one of {', '.join(self.EXPECTED)}")
        return self


class RolloutExpect(_Expectations):
    """How the simulated rolling update (``explain --update``) must go."""

    EXPECTED = ROLLOUT_EXPECTATIONS
    completes: StrictBool | None = None
    steps: NonNegativeInt | None = None
    min_available: NonNegativeInt | None = None


class PlacementExpect(_Expectations):
    """Where ``explain`` places the mutated object on the case's cluster state.

    ``replicas`` and ``update`` are the ``--replicas`` and ``--update``/``--no-update`` of
    ``explain``; the other fields are expectations, at least one of them given."""

    EXPECTED = PLACEMENT_EXPECTATIONS
    schedules: StrictBool | None = None  # every replica places and any rollout completes
    placed: NonNegativeInt | None = None
    pending: NonNegativeInt | None = None
    nodes: list[NodeName] | None = None  # where the placed replicas land, as a multiset
    only_nodes: list[NodeName] | None = Field(default=None, min_length=1)  # every placed replica on one of these
    message: Annotated[str, AfterValidator(_compiles)] | None = None  # searched in the Pending replica's message
    rollout: RolloutExpect | None = None
    replicas: NonNegativeInt | None = None
    update: StrictBool | None = None

    @model_validator(mode="after")
    def _rollout_is_simulated(self) -> PlacementExpect:
        if self.rollout is not None and self.update is False:
            raise ValueError("a rollout expectation needs the update simulated: drop update: false")
        return self


class Expect(_Expectations):
    """What the admission outcome must look like; every given expectation must hold."""

    EXPECTED = EXPECTATIONS
    object: dict[str, Any] | None = None
    object_file: str | None = Field(default=None, min_length=1)
    patch: list[dict[str, Any]] | None = None
    contains: dict[str, Any] | None = None
    absent: list[str] | None = None
    applied: list[str] | None = None
    audited: list[str] | None = None
    warnings: list[str] | None = None
    unchanged: StrictBool | None = None
    result: Result | None = None
    placement: PlacementExpect | None = None  # checked by explain's scheduler simulation (suites/placement.py)

    @field_validator("warnings")
    @classmethod
    def _regexes_compile(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or ():
            _compiles(pattern)
        return value

    @field_validator("absent")
    @classmethod
    def _pointers_are_absolute(cls, value: list[str] | None) -> list[str] | None:
        for pointer in value or ():
            if not pointer.startswith("/"):
                raise ValueError(f"JSON pointer must start with '/': {pointer!r}")
        return value

    @model_validator(mode="after")
    def _one_object(self) -> Expect:
        if self.object is not None and self.object_file is not None:
            raise ValueError("give object or objectFile, not both")
        return self


class Case(_Model):
    """One object sent through admission, and what must come out."""

    name: str = Field(min_length=1)
    description: str | None = None
    operation: Operation = "CREATE"
    namespace: str | None = Field(default=None, min_length=1)
    object: dict[str, Any] | None = None
    object_file: str | None = Field(default=None, min_length=1)
    old_object: dict[str, Any] | None = None  # UPDATE: the object as stored before the change
    cluster: ClusterSpec | None = None  # replaces the suite's cluster view for this case
    expect: Expect

    @field_validator("object")
    @classmethod
    def _looks_like_a_kubernetes_object(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not (isinstance(value.get("apiVersion"), str) and isinstance(value.get("kind"), str)):
            raise ValueError("an object needs string apiVersion and kind")
        return value

    @model_validator(mode="after")
    def _exactly_one_object(self) -> Case:
        if (self.object is None) == (self.object_file is None):
            raise ValueError("give exactly one of object or objectFile")
        return self


class Suite(_Model):
    """A ``PlacementTest`` document: policies under test and the cases run against them."""

    api_version: Literal["placement.novasphere.dev/v1alpha1"]
    kind: Literal["PlacementTest"]
    metadata: Metadata
    # Paths (files or folders, relative to the suite file) or inline PlacementPolicy documents.
    policies: list[str | dict[str, Any]] = Field(min_length=1)
    cluster: ClusterSpec | None = None
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _case_names_are_unique(self) -> Suite:
        seen: set[str] = set()
        for case in self.cases:
            if case.name in seen:
                raise ValueError(f"duplicate case name {case.name!r}")
            seen.add(case.name)
        return self


def _python_name(alias: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), alias)


# ---- turning pydantic errors into (data path, message) pairs -------------------------------

Path = tuple[str | int, ...]


def validation_problems(exc: ValidationError, data: Any) -> list[tuple[Path, str]]:
    """Each error of ``exc`` as (path into ``data``, message) with a "did you mean" for typos."""
    problems: list[tuple[Path, str]] = []
    for error in exc.errors(include_url=False):
        path = _data_path(data, error["loc"])
        message = _message(error, path)
        if error["type"] == "value_error" and "duplicate case name" in message:
            path = _duplicate_case_path(data, message) or path
        problems.append((path, message))
    return problems


def _data_path(data: Any, loc: tuple[int | str, ...]) -> Path:
    """Keep the parts of a pydantic ``loc`` that step into the data (drop union tags)."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if _steps_into(node, part):
            node = node[part]
            path.append(part)
        elif isinstance(node, dict) and isinstance(part, str) and part == loc[-1]:
            path.append(part)  # a missing required field: name it
    return tuple(path)


def _steps_into(node: Any, part: int | str) -> bool:
    if isinstance(node, dict):
        return isinstance(part, str) and part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _message(error: Any, path: Path) -> str:
    """Messages worded like policy errors, so ``test`` and ``lint`` read the same."""
    kind = error["type"]
    if kind == "extra_forbidden":
        name = str(path[-1])
        allowed = _allowed_fields(path[:-1])
        hint = did_you_mean(name, allowed) or f" (allowed: {', '.join(sorted(allowed))})"
        return f'unknown field "{name}"{hint}'
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        return f"must be one of {(error.get('ctx') or {}).get('expected')}, not {error.get('input')!r}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return message[:1].lower() + message[1:] if message[1:2].islower() else message


def _allowed_fields(path: Path) -> list[str]:
    """Aliases of the model found at ``path`` inside a Suite (for "did you mean")."""
    model: Any = Suite
    for part in path:
        if isinstance(part, int):
            continue
        field = next((f for f in model.model_fields.values() if f.alias == part), None)
        model = _model_in(field.annotation) if field else None
        if model is None:
            return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _duplicate_case_path(data: Any, message: str) -> Path | None:
    match = re.search(r"duplicate case name '(.*)'", message)
    cases = data.get("cases") if isinstance(data, dict) else None
    if not match or not isinstance(cases, list):
        return None
    hits = [i for i, c in enumerate(cases) if isinstance(c, dict) and str(c.get("name")) == match.group(1)]
    return ("cases", hits[-1], "name") if len(hits) > 1 else None
