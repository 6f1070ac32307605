"""Policy test suites: ``placement-webhook test [PATH...]`` (SPEC 5).

A ``*.suite.yaml`` file holds ``PlacementTest`` documents. Each names the policies under test
and cases: an object sent through ``admission.admit`` - the very function the server calls -
and the expectations its outcome must meet. Broken suites are reported as
``file:line: field: message`` like policy errors, and never half-run.
"""
from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from webhook.engine import admission

from webhook.policy import loader

from webhook.engine import review

from webhook.files import documents as yamlsrc
from webhook.policy.loader import LoadError
from webhook.policy.policyset import PolicySet
from webhook.suites.checks import Failure, check
from webhook.suites.model import ClusterSpec, Suite, format_path, validation_problems

__all__ = [
    "CaseResult",
    "LoadedCase",
    "LoadedSuite",
    "Report",
    "SuiteError",
    "configure_test",
    "discover",
    "load_suites",
    "run",
    "run_test",
]

SUFFIXES = (".suite.yaml", ".suite.yml")
EXIT_OK, EXIT_FAILED, EXIT_BROKEN = 0, 1, 2


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


@dataclass
class CaseResult:
    """What happened to one case."""

    suite: str
    case: str
    file: str
    line: int
    failures: list[Failure] = field(default_factory=list)
    updated: bool = False
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class Report:
    """Results of a whole run: per-case results and the suite files that could not run."""

    results: list[CaseResult] = field(default_factory=list)
    broken: list[SuiteError] = field(default_factory=list)
    broken_files: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    @property
    def exit_code(self) -> int:
        if self.broken:
            return EXIT_BROKEN
        return EXIT_FAILED if self.failed else EXIT_OK


# ---- discovery -----------------------------------------------------------------------------


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Suite files named by ``paths``: files as given, folders searched for ``*.suite.yaml``.

    Hidden entries (dot files, ConfigMap ``..data`` folders, ``.venv``) are skipped.
    Raises FileNotFoundError for a path that does not exist.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if _is_suite(p, path))
        elif path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))


def _is_suite(path: Path, root: Path) -> bool:
    hidden = any(part.startswith(".") for part in path.relative_to(root).parts)
    return not hidden and path.is_file() and path.name.endswith(SUFFIXES)


# ---- loading -------------------------------------------------------------------------------


class _Loader:
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
                errors.append(_error(document, ("policies", i), f"no such file or folder: {base / entry}"))
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
    from webhook.cluster import view as cluster

    return cluster.StaticClusterView(
        namespaces=spec.namespaces,
        nodes=spec.nodes,
        priority_classes={pc["metadata"]["name"]: pc for pc in spec.priority_classes},
        match_label_keys=spec.match_label_keys,
    )


def load_suites(path: str | Path, *, update: bool = False) -> list[LoadedSuite]:
    """The suites of one file; raises SuiteError listing every problem."""
    return _Loader(update=update).load(Path(path))


# ---- running -------------------------------------------------------------------------------


def run_case(suite: LoadedSuite, case: LoadedCase) -> tuple[CaseResult, dict[str, Any] | None]:
    """Run one case through admission; returns its result and the object admission produced."""
    started = time.perf_counter()
    request = review.request_for_object(
        copy.deepcopy(case.object),
        operation=case.operation,
        namespace=case.namespace,
        old_object=copy.deepcopy(case.old_object),
    )
    outcome = admission.admit(request, policies=suite.policies, cluster=case.cluster)
    failures = check(case.expect, outcome, expected_object=case.expected_object)
    result = CaseResult(suite.name, case.name, suite.file, case.line, failures, seconds=time.perf_counter() - started)
    return result, outcome.object


Listener = Callable[[CaseResult], None]


def run(paths: Iterable[str | Path], *, update: bool = False, on_case: Listener | None = None) -> Report:
    """Discover, load and run suites; with ``update``, rewrite expected objects that differ."""
    from webhook.suites import update as suite_update  # only --update needs the rewriting machinery

    report = Report()
    suite_loader = _Loader(update=update)
    for file in discover(paths):
        try:
            suites = suite_loader.load(file)
        except SuiteError as exc:
            report.broken.append(exc)
            report.broken_files.append(str(file))
            continue
        edits = suite_update.Edits(file)
        for suite in suites:
            for case in suite.cases:
                result, produced = run_case(suite, case)
                if update:
                    _record_update(edits, suite, case, result, produced)
                report.results.append(result)
                if on_case:
                    on_case(result)
        edits.apply()
    return report


def _record_update(edits: Any, suite: LoadedSuite, case: LoadedCase, result: CaseResult, produced: Any) -> None:
    """Turn a failed (or missing) object expectation into a rewrite of the suite or object file."""
    wants_object = case.expect.object is not None or case.expected_file is not None
    stale = any(f.expectation == "object" for f in result.failures) or (
        case.expected_file is not None and case.expected_object is None
    )
    if not (wants_object and stale and isinstance(produced, dict)):
        return
    if case.expected_file is not None:
        edits.object_file(case.expected_file, produced)
    else:
        path = ("cases", case.index, "expect", "object")
        edits.inline(path, suite.document.line_of(path), produced)
    result.failures = [f for f in result.failures if f.expectation != "object"]
    result.updated = True


# ---- command line --------------------------------------------------------------------------


def configure_test(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", default=["policies"],
                        help="suite files or folders searched for *.suite.yaml (default: policies)")
    parser.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML to FILE")
    parser.add_argument("--update", action="store_true",
                        help="rewrite expect.object / expect.objectFile from the current output")


def run_test(args: argparse.Namespace) -> int:
    from webhook.suites import report as suite_report

    return suite_report.main(paths=args.paths, junit=args.junit, update=args.update)
