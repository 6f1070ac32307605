"""What the commands that read manifests share: the policy set and the cluster view they
run with, the manifests as admission requests, and standard error with a progress line.

``mutate`` and ``explain`` read their input the same way: YAML (multi-document) and JSON
from files, folders and stdin, ``List`` objects unpacked, AdmissionReviews taken as the API
server sent them; one bad file is reported and the rest still read.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from webhook.commands import common
from webhook.engine import review
from webhook.exitcodes import Exit
from webhook.files import walk
from webhook.kube import objects

if TYPE_CHECKING:
    from webhook.cluster.view import ClusterView
    from webhook.policy.policyset import PolicySet

__all__ = ["INPUT_SUFFIXES", "Console", "InputErrors", "cluster_view", "live_view", "load_policies", "requests",
           "setup", "usage"]

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


def load_policies(args: argparse.Namespace, command: str, hint: str = "use --policies PATH") -> PolicySet | int:
    """``--policies`` (default ./policies) loaded for the kinds ``--kinds-config`` adds, or the
    exit code after a usage error: without its policies a command has nothing to say."""
    from webhook.policy import loader

    kinds = common.targets(args, command)
    if kinds is None:
        return Exit.USAGE
    paths = args.policies or ["policies"]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        return usage(f"policy path {missing[0]} does not exist ({hint})")
    try:
        return loader.load(paths, targets=kinds)
    except loader.PolicyLoadError as exc:
        for error in exc.errors:
            print(str(error), file=sys.stderr)
        return usage(f"the policy set in {', '.join(map(str, paths))} has {len(exc.errors)} error(s)")


LIVE_VIEW_TIMEOUT = 30.0  # seconds to list the cluster's nodes, namespaces and priority classes


def read_live(kubeconfig: str, context: str | None, *, scheduling: bool) -> Any:
    """The cluster read once (``cluster.snapshot.read_once``; ``scheduling``: pods, PDBs and
    workloads too), or an exit code after the error: 2 for a broken kubeconfig, 1 for a
    cluster that cannot be read."""
    import asyncio

    from webhook.cluster import config, snapshot

    try:
        where = config.load(kubeconfig, context)
    except config.ConfigError as exc:
        return usage(str(exc))
    read = asyncio.run(snapshot.read_once(where, timeout=LIVE_VIEW_TIMEOUT, scheduling=scheduling))
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
    2 after a broken file's error. A dump's fields are never named in an error, so JSON is read
    without a line map (``locate=False``), a hundred times faster."""
    from webhook.files import documents

    found: list[Any] = []
    for path in paths:
        try:
            found.extend(doc.data for doc in documents.load_file(path, locate=False))
        except documents.YamlError as exc:
            return usage(str(exc))
    return found


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



def requests(args: argparse.Namespace, errors: InputErrors, console: Console) -> Iterator[tuple[str, review.Request]]:
    """Every object of every input, as an admission request, with its ``file:doc N``."""
    for source, docs in _documents(args.files, errors, console):
        for index, doc in enumerate(docs, start=1):
            where = f"{source}:doc {index}"
            try:
                yield from _doc_requests(doc.data, where, args, errors)
            except (review.BadReview, ValueError) as exc:
                errors.report(f"{source}:{doc.line}: doc {index}: {exc}")


def _doc_requests(
    data: Any, where: str, args: argparse.Namespace, errors: InputErrors
) -> Iterator[tuple[str, review.Request]]:
    if not isinstance(data, dict):
        raise ValueError(f"expected a Kubernetes object (a mapping), got {type(data).__name__}")
    if data.get("kind") == "AdmissionReview":
        yield where, review.parse(data)  # the API server said which namespace: -n has no say
        return
    if objects.is_list(data):
        for i, item in enumerate(data["items"]):
            yield from _doc_requests(item, f"{where} item {i}", args, errors)
        return
    own = str(objects.meta(data, "namespace") or "")
    if own and args.namespace and own != args.namespace:
        # kubectl refuses the object rather than move it to another namespace, in its words.
        errors.refuse(
            f'error: {where}: the namespace from the provided object "{own}" does not match the namespace '
            f'"{args.namespace}". You must pass \'--namespace={own}\' to perform this operation.'
        )
        return
    yield where, review.request_for_object(data, operation=args.operation, namespace=args.namespace)


def _documents(paths: Iterable[str], errors: InputErrors, console: Console) -> Iterator[tuple[str, list[Any]]]:
    from webhook.files import documents as yamlsrc

    files = _expand(paths, errors)
    show_progress = console.wants_progress() and len(files) > 20
    for n, path in enumerate(files, start=1):
        if show_progress:
            console.show(f"mutating {n}/{len(files)} files")
        try:
            if path == "-":
                yield "<stdin>", yamlsrc.load_text(sys.stdin.read(), file="<stdin>")
            else:
                yield path, yamlsrc.load_file(path)
        except yamlsrc.YamlError as exc:
            errors.report(str(exc))
    console.done()


def _expand(paths: Iterable[str], errors: InputErrors) -> list[str]:
    """Files in argument order (``-`` is standard input); folders expand to their manifests.

    A path that does not exist is a mistake in the command, as for ``lint`` and ``test``.
    """
    files: list[str] = []
    for raw in paths:
        if raw == "-":
            files.append(raw)
        else:
            found = walk.find([raw], accept=_is_manifest, on_missing=lambda exc: errors.refuse(f"error: {exc}"))
            files.extend(str(f) for f in found)
    return files


def _is_manifest(name: str) -> bool:
    return name.lower().endswith(INPUT_SUFFIXES)


