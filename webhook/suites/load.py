"""Finding and loading ``*.suite.yaml`` files: validated suites, their policies, their cases.

Broken suites are reported as ``file:line: field: message`` like policy errors, and never
half-run.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from webhook.files import documents as yamlsrc
from webhook.files import walk
from webhook.kube.objects import by_kind, is_list, kind_of
from webhook.policy import loader, sources
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
    state: Any = None  # explain.state.ClusterState for expect.placement, else None


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


@dataclass
class ClusterPolicies:
    """The cluster's PlacementPolicy objects a run tests against (``test --policies-from``):
    alone (``only``: the suites' own ``policies`` are not read), or under each suite's own
    policies, which replace the objects of their names (the change under test). An object the
    loader refuses is left out, as the server leaves it out."""

    objects: Sequence[Mapping[str, Any]]
    only: bool
    memo: sources.Memo = field(default_factory=sources.Memo)

    def under(self, own: loader.Loaded | None) -> PolicySet:
        return sources.assemble(own, self.objects, on_duplicate="replace", memo=self.memo).policies


class SuiteLoader:
    """Loads suite files, sharing policy sets between suites that name the same files."""

    def __init__(self, *, update: bool = False, cluster: ClusterPolicies | None = None) -> None:
        self.update = update
        self.cluster = cluster
        self._policy_sets: dict[tuple[Path, ...], PolicySet] = {}
        self._state_files: dict[Path, list[yamlsrc.Document]] = {}

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
        clusters = _Clusters(self, document, errors)
        cases = [self._case(document, suite, i, clusters, errors) for i in range(len(suite.cases))]
        if errors or policies is None:
            raise SuiteError(errors)
        return LoadedSuite(suite.metadata.name, document, policies, tuple(c for c in cases if c is not None))

    def _policies(self, document: yamlsrc.Document, suite: Suite, errors: list[LoadError]) -> PolicySet | None:
        if self.cluster is not None and self.cluster.only:
            return self.cluster.under(None)
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
        if self.cluster is not None:
            documents = [d for f in loader.policy_files(paths) for d in yamlsrc.load_file(f, strict=True)]
            return self.cluster.under(loader.load_documents_with_sources(documents + inline))
        if inline:
            documents = [d for f in loader.policy_files(paths) for d in yamlsrc.load_file(f, strict=True)]
            return loader.load_documents(documents + inline)
        key = tuple(p.resolve() for p in paths)
        if key not in self._policy_sets:
            self._policy_sets[key] = loader.load(paths)
        return self._policy_sets[key]

    def _case(self, document: yamlsrc.Document, suite: Suite, i: int, clusters: _Clusters,
              errors: list[LoadError]) -> LoadedCase | None:
        case = suite.cases[i]
        at: tuple[str | int, ...] = ("cases", i)
        base = Path(document.file).parent
        obj = case.object if case.object is not None else _object_file(document, at + ("objectFile",), base, errors)
        expected, expected_file = case.expect.object, None
        if case.expect.object_file is not None:
            expected_file = base / case.expect.object_file
            if not (self.update and not expected_file.exists()):
                expected = _object_file(document, at + ("expect", "objectFile"), base, errors)
        cluster_at: tuple[str | int, ...] = at + ("cluster",) if case.cluster else ("cluster",)
        cluster_spec = case.cluster or suite.cluster
        view, state = None, None
        if cluster_spec is not None:
            view = clusters.view(cluster_spec, cluster_at)
            if case.expect.placement is not None:
                state = clusters.state(cluster_spec, cluster_at)
        elif case.expect.placement is not None:
            errors.append(_error(document, at + ("expect", "placement"),
                                 "needs a cluster state: give cluster (nodes, pods, stateFiles, ...) on the suite or the case"))
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
            cluster=view,
            state=state,
        )

    def state_file(self, path: Path) -> list[yamlsrc.Document]:
        """The documents of a cluster state file, read once per run (suites share dumps)."""
        key = path.resolve()
        if key not in self._state_files:
            self._state_files[key] = yamlsrc.load_file(path)
        return self._state_files[key]


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


# ---- cluster views and states -------------------------------------------------------------


@dataclass(frozen=True)
class _Located:
    """An object of a cluster spec and where it was written, for errors about it."""

    object: Mapping[str, Any]
    path: tuple[str | int, ...]  # in the suite document
    where: str = ""  # "file:line: " of an object in a state file


class _Clusters:
    """The cluster view (admission) and state (placement) of each ``cluster`` of one suite
    document, built once each, with every problem recorded as a load error."""

    def __init__(self, loader: SuiteLoader, document: yamlsrc.Document, errors: list[LoadError]) -> None:
        self.loader = loader
        self.document = document
        self.errors = errors
        self._objects: dict[tuple[str | int, ...], list[_Located] | None] = {}
        self._views: dict[tuple[str | int, ...], Any] = {}
        self._states: dict[tuple[str | int, ...], Any] = {}

    def view(self, spec: ClusterSpec, at: tuple[str | int, ...]) -> Any:
        # Imported here: only suites that declare a cluster view need it.
        from webhook.cluster.view import StaticClusterView

        if at not in self._views:
            located = self._located(spec, at) or []
            self._views[at] = StaticClusterView.from_objects([o.object for o in located],
                                                             match_label_keys=spec.match_label_keys)
        return self._views[at]

    def state(self, spec: ClusterSpec, at: tuple[str | int, ...]) -> Any:
        """The ``explain`` cluster state, or None when it cannot be built (an error is recorded)."""
        if at not in self._states:
            located = self._located(spec, at)
            self._states[at] = None if located is None else self._build_state(spec, at, located)
        return self._states[at]

    def _build_state(self, spec: ClusterSpec, at: tuple[str | int, ...], located: list[_Located]) -> Any:
        from webhook.explain.state import ClusterState

        def build(items: list[_Located]) -> Any:
            return ClusterState.from_objects([o.object for o in items], match_label_keys=spec.match_label_keys)

        try:
            return build(located)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            # Find the object to blame: the shortest failing prefix, in the order a dump is read
            # (Nodes first: a Pod is read only with its node), ends with it.
            groups = by_kind(located, kind=lambda o: kind_of(o.object))
            ordered = [o for group in groups.values() for o in group]
            low, high = 1, len(ordered)
            while low < high:
                middle = (low + high) // 2
                try:
                    build(ordered[:middle])
                    low = middle + 1
                except (ValueError, TypeError, AttributeError, KeyError):
                    high = middle
            culprit = ordered[low - 1] if located else None
            path = culprit.path if culprit else at
            where = culprit.where if culprit else ""
            self.errors.append(_error(self.document, path, f"{where}the cluster state cannot be read: {exc}"))
            return None

    def _located(self, spec: ClusterSpec, at: tuple[str | int, ...]) -> list[_Located] | None:
        """Every object of the spec as the scheduler reads it; None when a state file is broken."""
        if at in self._objects:
            return self._objects[at]
        located: list[_Located] = []
        broken = False
        base = Path(self.document.file).parent
        for i, name in enumerate(spec.state_files):
            found = self._state_file(base / name, at + ("stateFiles", i))
            broken = broken or found is None
            located += found or []
        located += [_Located(obj, at + ("objects", i)) for i, obj in enumerate(spec.objects)]
        located += [_Located({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
                             at + ("namespaces", name)) for name, labels in spec.namespaces.items()]
        located += [_Located({"apiVersion": "v1", "kind": "Node", **node}, at + ("nodes", i))
                    for i, node in enumerate(spec.nodes)]
        located += [_Located({"apiVersion": "scheduling.k8s.io/v1", **pc, "kind": "PriorityClass"},
                             at + ("priorityClasses", i)) for i, pc in enumerate(spec.priority_classes)]
        located += [_Located({"apiVersion": "v1", "kind": "Pod", **pod}, at + ("pods", i))
                    for i, pod in enumerate(spec.pods)]
        self._objects[at] = None if broken else located
        return self._objects[at]

    def _state_file(self, path: Path, at: tuple[str | int, ...]) -> list[_Located] | None:
        try:
            documents = self.loader.state_file(path)
        except yamlsrc.YamlError as exc:
            unreadable = exc.file == str(path) and exc.line == 0
            self.errors.append(_error(self.document, at, f"cannot read {path}: {exc.message}" if unreadable else str(exc)))
            return None
        found: list[_Located] = []
        problems = 0
        for doc in documents:
            for obj, line in _objects_of(doc.data, doc, ()):
                if isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) and obj["kind"]:
                    found.append(_Located(obj, at, f"{doc.file}:{line}: "))
                else:
                    problems += 1
                    self.errors.append(_error(self.document, at, f"{doc.file}:{line}: not a Kubernetes object (no kind)"))
        return None if problems else found


def _objects_of(data: Any, doc: yamlsrc.Document, path: tuple[str | int, ...]) -> Iterable[tuple[Any, int]]:
    """The objects of one document with their lines, Lists unpacked (``kubectl get -o yaml``)."""
    if isinstance(data, Mapping) and is_list(data):
        for i, item in enumerate(data["items"]):
            yield from _objects_of(item, doc, path + ("items", i))
    else:
        yield data, doc.line_of(path)


def load_suites(path: str | Path, *, update: bool = False) -> list[LoadedSuite]:
    """The suites of one file; raises SuiteError listing every problem."""
    return SuiteLoader(update=update).load(Path(path))
