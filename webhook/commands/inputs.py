"""What the commands that read manifests share: the policy set and the cluster view they
run with, the manifests as admission requests, and standard error with a progress line.

``mutate`` and ``explain`` read their input the same way: YAML (multi-document) and JSON
from files, folders and stdin, ``List`` objects unpacked, AdmissionReviews taken as the API
server sent them; one bad file is reported and the rest still read.

Nothing to act on is a mistake in the command (exit 2), as kubectl refuses to apply nothing
("error: no objects passed to apply"): an input, a policy path or a cluster-state file that
holds no object at all (an empty file, only comments, an empty ``List``, a folder with no
manifest). A document that is something but not a Kubernetes object (no ``apiVersion`` or
``kind``, as a docker-compose file) is an error at its ``file:line``, as kubectl's validation
reports it: an input error (exit 1) among manifests, a broken cluster state (exit 2).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from webhook.commands import common
from webhook.engine import review
from webhook.exitcodes import Exit
from webhook.files import walk
from webhook.kube import objects

if TYPE_CHECKING:
    from webhook.cluster.view import ClusterView
    from webhook.files.documents import Document
    from webhook.kube.kinds import Target
    from webhook.policy.loader import Loaded
    from webhook.policy.policyset import PolicySet
    from webhook.policy.sources import Assembled

__all__ = ["INPUT_SUFFIXES", "Console", "InputErrors", "add_policy_sources", "assemble_policies", "cluster_policies",
           "cluster_view", "live_view", "load_policies", "requests", "setup", "usage"]

INPUT_SUFFIXES = (".yaml", ".yml", ".json")


def setup(args: argparse.Namespace) -> tuple[PolicySet, ClusterView | None] | int:
    """The policy set and the optional cluster view, or an exit code after a usage error."""
    policies = load_policies(args, "mutate")
    if isinstance(policies, int):
        return policies
    if args.cluster_state and args.kubeconfig:
        return usage("give --cluster-state or --kubeconfig, not both")
    if args.kubeconfig:
        live = live_view(args.kubeconfig, args.context)
        return (policies, live) if not isinstance(live, int) else live
    if not args.cluster_state:
        return policies, None
    cluster = cluster_view(args.cluster_state)
    return (policies, cluster) if not isinstance(cluster, int) else cluster


def add_policy_sources(parser: argparse.ArgumentParser, *, kubeconfig: bool = False, files: str = "--policies") -> None:
    """``--policies-from`` (and, for a command that has none yet, ``--kubeconfig`` and ``--context``)."""
    parser.add_argument(
        "--policies-from", type=common.policy_sources_flag, default=("files",), metavar="SOURCES",
        help=f"where the policies come from: files ({files}; the default), cluster (the cluster's PlacementPolicy "
             "objects, listed once from the cluster --kubeconfig names), or files,cluster (a file's policy replaces "
             "the object of its name, as kubectl apply would)")
    if kubeconfig:
        parser.add_argument("--kubeconfig", metavar="FILE",
                            help="the cluster --policies-from cluster reads "
                                 "(default: $KUBECONFIG, else ~/.kube/config)")
        parser.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: the current one)")


def load_policies(args: argparse.Namespace, command: str, hint: str = "use --policies PATH") -> PolicySet | int:
    """The policies ``--policies-from`` names, for the kinds ``--kinds-config`` adds, or the exit
    code after a usage error: without its policies a command has nothing to say. ``--policies``
    (default ./policies) is loaded whole, every error at once; a cluster object the loader refuses
    is left out with a warning, as the server leaves it out."""
    assembled = assemble_policies(args, command, paths=args.policies, hint=hint)
    if isinstance(assembled, int):
        return assembled
    for name in sorted(assembled.left_out):
        for error in assembled.left_out[name].errors:
            print(f"warning: {error} (left out, as the server leaves it out)", file=sys.stderr)
    return assembled.policies


def assemble_policies(args: argparse.Namespace, command: str, *, paths: list[str] | None, hint: str,
                      flag: str = "--policies") -> Assembled | int:
    """The files (``paths``, default ./policies) and/or the cluster's objects ``--policies-from``
    names, as one set; or the exit code after a usage error."""
    from webhook.policy import sources as policy_sources

    chosen = getattr(args, "policies_from", ("files",))
    if "files" not in chosen and paths:
        return usage(f"{flag} is read with --policies-from files or files,cluster, "
                     "not with --policies-from cluster alone")
    kinds = common.targets(args, command)
    if kinds is None:
        return Exit.USAGE
    files = None
    if "files" in chosen:
        loaded = _load_files(paths or ["policies"], kinds, hint)
        if isinstance(loaded, int):
            return loaded
        files = loaded
    if "cluster" not in chosen:
        assert files is not None
        return policy_sources.Assembled(files)
    objects = cluster_policies(args)
    if isinstance(objects, int):
        return objects
    return policy_sources.assemble(files, objects, targets=kinds, on_duplicate="replace")


def _load_files(paths: list[str], kinds: Any, hint: str) -> Loaded | int:
    from webhook.policy import loader

    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        return usage(f"policy path {missing[0]} does not exist ({hint})")
    try:
        return loader.load_with_sources(paths, targets=kinds, each=True)
    except loader.NoPolicies as exc:
        for problem in exc.problems[:-1]:
            usage(problem)
        return usage(f"{exc.problems[-1]} ({hint})")
    except loader.PolicyLoadError as exc:
        for error in exc.errors:
            print(str(error), file=sys.stderr)
        return usage(f"the policy set in {', '.join(map(str, paths))} has {len(exc.errors)} error(s)")


NO_CRD = ("no PlacementPolicy resource there: is its CustomResourceDefinition installed? "
          "(charts/placement-webhook/crds/)")


def cluster_policies(args: argparse.Namespace) -> list[dict[str, Any]] | int:
    """The cluster's PlacementPolicy objects, listed once from the cluster ``--kubeconfig`` and
    ``--context`` name (else $KUBECONFIG or ~/.kube/config, as kubectl), or an exit code after a
    one-line error: 2 when waiting cannot help (a broken kubeconfig, a refused connection, 401,
    403, no such resource), 1 when the cluster did not answer in time."""
    import asyncio

    from webhook.cluster import config, snapshot
    from webhook.server.policies import PATH

    try:
        where = config.load(getattr(args, "kubeconfig", None), getattr(args, "context", None), user_default=True)
    except config.ConfigError as exc:
        return usage(str(exc))
    read = asyncio.run(snapshot.list_once(where, PATH, timeout=LIVE_VIEW_TIMEOUT, missing=NO_CRD))
    if isinstance(read, snapshot.Refused):
        return usage(read)
    if isinstance(read, str):
        print(f"error: {read}", file=sys.stderr)
        return Exit.FINDINGS
    return [item for item in read if isinstance(item, dict)]


LIVE_VIEW_TIMEOUT = 30.0  # seconds to list the cluster's nodes, namespaces and priority classes


def read_live(kubeconfig: str, context: str | None, *, scheduling: bool, kinds: Iterable[Target] = ()) -> Any:
    """The cluster read once (``cluster.snapshot.read_once``; ``scheduling``: pods, PDBs and
    workloads too; ``kinds``: the other workload kinds to list, as ``audit`` asks), or an exit
    code after a one-line error: 2 for a broken kubeconfig and for an API server that cannot be
    reached or refuses the request (refused connection, unknown host, failed TLS verification, no
    credentials, 401, 403: reported at once, as kubectl does), 1 for a cluster that answered but
    could not be read within ``LIVE_VIEW_TIMEOUT``."""
    import asyncio

    from webhook.cluster import config, snapshot

    try:
        where = config.load(kubeconfig, context)
    except config.ConfigError as exc:
        return usage(str(exc))
    read = asyncio.run(snapshot.read_once(where, timeout=LIVE_VIEW_TIMEOUT, scheduling=scheduling, kinds=kinds))
    if isinstance(read, snapshot.Refused):
        return usage(read)
    if isinstance(read, str):
        print(f"error: {read}", file=sys.stderr)
        return Exit.FINDINGS
    return read


def live_view(kubeconfig: str, context: str | None) -> ClusterView | int:
    """The cluster view read once, as the server's cache would hold it."""
    from webhook.cluster.view import StaticClusterView

    read = read_live(kubeconfig, context, scheduling=False)
    return read if isinstance(read, int) else StaticClusterView.from_objects(
        read.objects, match_label_keys=read.match_label_keys)


def read_state_files(paths: list[str]) -> list[Any] | int:
    """The objects of ``--cluster-state`` files (dumps, Lists, multi-document YAML), or exit code
    2 after naming every problem: a file that cannot be read, a document or List item that is
    not a Kubernetes object (``file:line``), a file with no object in it, and a state with no
    object in any file (every cluster has Namespaces, so that is no cluster's dump). A file
    whose only object is an empty List is a dump of a kind the cluster has none of.

    A dump's fields are never named in an error, so JSON is read without a line map
    (``locate=False``), a hundred times faster."""
    from webhook.files import documents

    found: list[Any] = []
    problems: list[str] = []
    objects_in_all = 0
    for path in paths:
        try:
            docs = documents.load_file(path, locate=False)
        except documents.YamlError as exc:
            problems.append(str(exc))
            continue
        if not docs:
            problems.append(f"{path}: holds no Kubernetes object")
        for index, doc in enumerate(docs, start=1):
            for label, line, obj in _objects(doc, index):
                problem = _not_an_object(obj)
                if problem:
                    problems.append(f"{path}:{line}: {label}: {problem}")
                objects_in_all += 1
            found.append(doc.data)
    if not problems and not objects_in_all:
        problems.append(f"the cluster state in {', '.join(paths)} holds no object, and every cluster has at least "
                        "its Namespaces")
    for problem in problems:
        usage(problem)
    return Exit.USAGE if problems else found


def cluster_view(paths: list[str]) -> ClusterView | int:
    from webhook.cluster.view import StaticClusterView

    found = read_state_files(paths)
    return found if isinstance(found, int) else StaticClusterView.from_objects(found)


def usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return Exit.USAGE


class Console:
    """Standard error, with a progress line on a terminal.

    The progress line is drawn without a newline, so anything else printed meanwhile would
    land on it: every message clears it first and draws it again after.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.progress = ""  # the progress line on screen; "" when none is

    def say(self, message: str) -> None:
        self._clear()
        print(message, file=self.stream)
        self._draw()

    def show(self, progress: str) -> None:
        """Draw ``progress`` over the progress line (only a terminal gets one: ``wants_progress``)."""
        self.stream.write("\r" + progress.ljust(len(self.progress)))
        self.stream.flush()
        self.progress = progress

    def done(self) -> None:
        """Leave the last progress line on screen and go on below it."""
        if self.progress:
            print(file=self.stream)
            self.progress = ""

    def wants_progress(self) -> bool:
        return self.stream.isatty()

    def _clear(self) -> None:
        if self.progress:  # spaces, not an escape sequence: any terminal understands them
            self.stream.write("\r" + " " * len(self.progress) + "\r")

    def _draw(self) -> None:
        if self.progress:
            self.stream.write("\r" + self.progress)
            self.stream.flush()


class InputErrors:
    """Input problems are printed and counted, not raised: one bad file must not hide the rest."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.count = 0  # unreadable inputs and failed objects: exit 1
        self.usage = 0  # missing paths and refused namespaces, mistakes in the command: exit 2

    def report(self, message: str) -> None:
        self.count += 1
        self.say(message)

    def refuse(self, message: str) -> None:
        self.usage += 1
        self.say(message)

    def exit_code(self) -> int:
        return Exit.USAGE if self.usage else Exit.FINDINGS if self.count else Exit.OK



@dataclass(frozen=True)
class Expected:
    """What a command acts on, for the error about an input that holds none of it."""

    noun: str  # "Kubernetes object"
    takes: Callable[[Mapping[str, Any]], bool]


def _any_object(obj: Mapping[str, Any]) -> bool:
    return True


OBJECTS = Expected("Kubernetes object", _any_object)


def requests(
    args: argparse.Namespace, errors: InputErrors, console: Console, *, expected: Expected = OBJECTS
) -> Iterator[tuple[str, review.Request]]:
    """Every object of every input, as an admission request, with its ``file:doc N``.

    An input (a file, a folder, ``-``) that holds nothing ``expected`` takes, and no error
    either, is refused once read (exit 2): there is nothing to act on.
    """
    named = _expand(args.files, errors)
    progress = _FileProgress(console, sum(len(files) for _, files in named))
    for name, files in named:
        tally = _Tally()
        for file in files:
            progress.next()
            source, docs = _read(file, errors)
            if docs is None:
                tally.broken = True
                continue
            for index, doc in enumerate(docs, start=1):
                yield from _doc_requests(doc, source, index, args, errors, expected=expected, tally=tally)
        if not tally.found and not tally.broken:
            errors.refuse(_nothing_in(name, files, expected))
    console.done()


@dataclass
class _Tally:
    """What one input held: objects the command takes, and whether an error was reported."""

    found: int = 0
    broken: bool = False


class _FileProgress:
    """``mutating N/M files`` on a terminal, for inputs of more than 20 files."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.shown = console.wants_progress() and total > 20

    def next(self) -> None:
        self.done += 1
        if self.shown:
            self.console.show(f"mutating {self.done}/{self.total} files")


def _nothing_in(name: str, files: list[str], expected: Expected) -> str:
    if not files:
        return f"error: no manifest files ({', '.join('*' + s for s in INPUT_SUFFIXES)}) under {name}"
    return f"error: {name}: holds no {expected.noun}"


def _read(file: str, errors: InputErrors) -> tuple[str, list[Document] | None]:
    """The file's name as messages give it and its documents; None after reporting an unreadable file."""
    from webhook.files import documents as yamlsrc

    source = "<stdin>" if file == "-" else file
    try:
        if file == "-":
            return source, yamlsrc.load_text(sys.stdin.read(), file=source)
        return source, yamlsrc.load_file(file)
    except yamlsrc.YamlError as exc:
        errors.report(str(exc))
        return source, None


def _doc_requests(
    doc: Document, source: str, index: int, args: argparse.Namespace, errors: InputErrors, *, expected: Expected,
    tally: _Tally,
) -> Iterator[tuple[str, review.Request]]:
    """The requests of one document's objects; each bad one reported at its ``file:line``."""
    for label, line, data in _objects(doc, index):
        where = f"{source}:{label}"
        try:
            problem = _not_an_object(data)
            if problem:
                raise ValueError(problem)
            request = _request(data, where, args, errors)
        except (review.BadReview, ValueError) as exc:
            tally.broken = True
            errors.report(f"{source}:{line}: {label}: {exc}")
            continue
        if request is None:  # refused, and said so: still an object the input holds
            tally.found += expected.takes(data)
            continue
        tally.found += expected.takes(request.object or request.old_object or data)
        yield where, request


def _objects(doc: Document, index: int) -> Iterator[tuple[str, int, Any]]:
    """The objects of a document with their ``doc N[ item I]`` and line: the document itself,
    or the items of a List, nested Lists unpacked (iteratively: a document may nest deeply)."""
    stack: list[tuple[str, tuple[str | int, ...], Any]] = [(f"doc {index}", (), doc.data)]
    while stack:
        label, path, data = stack.pop()
        if isinstance(data, dict) and objects.is_list(data):
            items = [(f"{label} item {i}", (*path, "items", i), item) for i, item in enumerate(data["items"])]
            stack.extend(reversed(items))
        else:
            yield label, doc.line_of(path), data


def _not_an_object(data: Any) -> str:
    """Why ``data`` is not a Kubernetes object ("" when it is), in kubectl's words: its
    validation (``getObjectKind``, kubectl's validation package) needs both ``apiVersion`` and
    ``kind`` to know what an object is, and says "apiVersion not set", "kind not set"."""
    if not isinstance(data, dict):
        return f"expected a Kubernetes object (a mapping), got {type(data).__name__}"
    problems = []
    for field in ("apiVersion", "kind"):
        value = data.get(field)
        if value is None or value == "":
            problems.append(f"{field} not set")
        elif not isinstance(value, str):
            problems.append(f"{field} isn't string type")
    return f"not a Kubernetes object: {', '.join(problems)}" if problems else ""


def _request(data: dict[str, Any], where: str, args: argparse.Namespace, errors: InputErrors) -> review.Request | None:
    """The admission request for one object; None when its namespace is refused."""
    if data.get("kind") == "AdmissionReview":
        return review.parse(data)  # the API server said which namespace: -n has no say
    own = str(objects.meta(data, "namespace") or "")
    if own and args.namespace and own != args.namespace:
        # kubectl refuses the object rather than move it to another namespace, in its words.
        errors.refuse(
            f'error: {where}: the namespace from the provided object "{own}" does not match the namespace '
            f'"{args.namespace}". You must pass \'--namespace={own}\' to perform this operation.'
        )
        return None
    return review.request_for_object(data, operation=args.operation, namespace=args.namespace)


def _expand(paths: Iterable[str], errors: InputErrors) -> list[tuple[str, list[str]]]:
    """Each input with its files, in argument order (``-`` is standard input); folders expand
    to their manifests. A path that does not exist is a mistake in the command, as for
    ``lint`` and ``test``."""
    named: list[tuple[str, list[str]]] = []
    for raw in paths:
        if raw == "-":
            named.append(("<stdin>", ["-"]))
            continue
        found = walk.find_each([raw], accept=_is_manifest, on_missing=lambda exc: errors.refuse(f"error: {exc}"))
        named.extend((raw, [str(f) for f in files]) for _, files in found)
    return named


def _is_manifest(name: str) -> bool:
    return name.lower().endswith(INPUT_SUFFIXES)
