"""Finding and loading ``*.suite.yaml`` files: validated suites, their policies, their cases.

Broken suites are reported as ``file:line: field: message`` like policy errors, and never
half-run.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from webhook.files import documents as yamlsrc
from webhook.files import walk
from webhook.policy import loader
from webhook.policy.loader import LoadError
from webhook.policy.policyset import PolicySet
from webhook.suites.model import ClusterSpec, Suite, format_path, validation_problems

SUFFIXES = (".suite.yaml", ".suite.yml")


class SuiteError(Exception):
    """A suite file that cannot run: every problem found, each with file and line."""

    def __init__(self, errors: list[LoadError]) -> None:
        super().__init__("\n".join(map(str, errors)))
        self.errors = errors


@dataclass(frozen=True)
class LoadedCase:
    """A validated case with its objects read and its cluster view built."""

    name: str
    index: int
    line: int
    operation: str
    namespace: str | None
    object: dict[str, Any]
    old_object: dict[str, Any] | None
    expect: Any  # suite_model.Expect
    expected_object: dict[str, Any] | None
    expected_file: Path | None  # expect.objectFile, rewritten by --update
    cluster: Any  # cluster.ClusterView | None


@dataclass(frozen=True)
class LoadedSuite:
    """One PlacementTest document, ready to run."""

    name: str
    document: yamlsrc.Document
    policies: PolicySet
    cases: tuple[LoadedCase, ...]

    @property
    def file(self) -> str:
        return self.document.file


# ---- discovery -----------------------------------------------------------------------------


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Suite files named by ``paths`` (``files.walk``): in folders, ``*.suite.yaml``.
    Raises ``walk.MissingPath`` for a path that does not exist."""
    return walk.find(paths, accept=lambda name: name.endswith(SUFFIXES))


# ---- loading -------------------------------------------------------------------------------


class SuiteLoader:
    """Loads suite files, sharing policy sets between suites that name the same files."""

    def __init__(self, *, update: bool = False) -> None:
        self.update = update
        self._policy_sets: dict[tuple[Path, ...], PolicySet] = {}

    def load(self, path: Path) -> list[LoadedSuite]:
        try:
            documents = yamlsrc.load_file(path, strict=True)
        except yamlsrc.YamlError as exc:
            raise SuiteError([LoadError(exc.file, exc.line, "", exc.message)]) from None
        if not documents:
            raise SuiteError([LoadError(str(path), 1, "", "no PlacementTest document in the file")])
        suites: list[LoadedSuite] = []
        errors: list[LoadError] = []
        for document in documents:
            try:
                suites.append(self._suite(document))
            except SuiteError as exc:
                errors += exc.errors
        if errors:
            raise SuiteError(errors)
        return suites

    def _suite(self, document: yamlsrc.Document) -> LoadedSuite:
        try:
            suite = Suite.model_validate(document.data)
        except ValidationError as exc:
            problems = validation_problems(exc, document.data)
            raise SuiteError([_error(document, path, message) for path, message in problems]) from None
        errors: list[LoadError] = []
        policies = self._policies(document, suite, errors)
        cases = [self._case(document, suite, i, errors) for i in range(len(suite.cases))]
        if errors or policies is None:
            raise SuiteError(errors)
        return LoadedSuite(suite.metadata.name, document, policies, tuple(c for c in cases if c is not None))

    def _policies(self, document: yamlsrc.Document, suite: Suite, errors: list[LoadError]) -> PolicySet | None:
        base = Path(document.file).parent
        paths: list[Path] = []
        inline: list[yamlsrc.Document] = []
        for i, entry in enumerate(suite.policies):
            if isinstance(entry, dict):
                inline.append(_sub_document(document, ("policies", i)))
            elif (base / entry).exists():
                paths.append(base / entry)
            else:
                errors.append(_error(document, ("policies", i), f"no such file or directory: {base / entry}"))
        if len(errors):
            return None
        try:
            return self._policy_set(paths, inline)
        except loader.PolicyLoadError as exc:
            where = _error(document, ("policies",), "the policies under test do not load:")
            errors += [where, *exc.errors]
        except yamlsrc.YamlError as exc:
            errors.append(LoadError(exc.file, exc.line, "", exc.message))
        return None

    def _policy_set(self, paths: list[Path], inline: list[yamlsrc.Document]) -> PolicySet:
        if inline:
            documents = [d for f in loader.policy_files(paths) for d in yamlsrc.load_file(f, strict=True)]
            return loader.load_documents(documents + inline)
        key = tuple(p.resolve() for p in paths)
        if key not in self._policy_sets:
            self._policy_sets[key] = loader.load(paths)
        return self._policy_sets[key]

    def _case(self, document: yamlsrc.Document, suite: Suite, i: int, errors: list[LoadError]) -> LoadedCase | None:
        case = suite.cases[i]
        at: tuple[str | int, ...] = ("cases", i)
        base = Path(document.file).parent
        obj = case.object if case.object is not None else _object_file(document, at + ("objectFile",), base, errors)
        expected, expected_file = case.expect.object, None
        if case.expect.object_file is not None:
            expected_file = base / case.expect.object_file
            if not (self.update and not expected_file.exists()):
                expected = _object_file(document, at + ("expect", "objectFile"), base, errors)
        cluster_spec = case.cluster or suite.cluster
        if obj is None:
            return None
        return LoadedCase(
            name=case.name,
            index=i,
            line=document.line_of(at),
            operation=case.operation,
            namespace=case.namespace,
            object=obj,
            old_object=case.old_object,
            expect=case.expect,
            expected_object=expected,
            expected_file=expected_file,
            cluster=_cluster_view(cluster_spec) if cluster_spec else None,
        )


def _object_file(document: yamlsrc.Document, at: tuple[str | int, ...], base: Path, errors: list[LoadError]) -> dict[str, Any] | None:
    """The single object in a file a case names, or None with an error recorded."""
    line = document.line_of(at)
    target = base / str(_get(document.data, at))
    try:
        docs = yamlsrc.load_file(target)
    except yamlsrc.YamlError as exc:
        unreadable = exc.file == str(target) and exc.line == 0
        problem = f"cannot read {target}: {exc.message}" if unreadable else str(exc)
        errors.append(LoadError(document.file, line, format_path(at), problem))
        return None
    if len(docs) != 1 or not isinstance(docs[0].data, dict) or "kind" not in docs[0].data:
        errors.append(LoadError(document.file, line, format_path(at), f"{target} must hold exactly one object"))
        return None
    return dict(docs[0].data)


def _get(data: Any, path: Sequence[str | int]) -> Any:
    for part in path:
        data = data[part]
    return data


def _sub_document(document: yamlsrc.Document, at: tuple[str | int, ...]) -> yamlsrc.Document:
    """The node at ``at`` as a document of its own, keeping its lines (inline policies)."""
    size = len(at)
    lines = {path[size:]: line for path, line in document.lines.items() if path[:size] == at}
    return yamlsrc.Document(data=_get(document.data, at), file=document.file, line=document.line_of(at), lines=lines)


def _error(document: yamlsrc.Document, path: Sequence[str | int], message: str) -> LoadError:
    return LoadError(document.file, document.line_of(path), format_path(tuple(path)), message)


def _cluster_view(spec: ClusterSpec) -> Any:
    # Imported here: only suites that declare a cluster view need it.
    from webhook.cluster.view import StaticClusterView

    return StaticClusterView(
        namespaces=spec.namespaces,
        nodes=spec.nodes,
        priority_classes={pc["metadata"]["name"]: pc for pc in spec.priority_classes},
        match_label_keys=spec.match_label_keys,
    )


def load_suites(path: str | Path, *, update: bool = False) -> list[LoadedSuite]:
    """The suites of one file; raises SuiteError listing every problem."""
    return SuiteLoader(update=update).load(Path(path))
