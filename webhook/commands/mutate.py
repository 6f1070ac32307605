"""``placement-webhook mutate``: show what admission would do to manifests, offline.

Reads YAML (multi-document) and JSON from files, folders and stdin, unpacks ``List``
objects, takes AdmissionReviews as the API server would send them, runs every object
through ``admission.admit`` -- the very function the server calls -- and prints the
mutated objects, the patches, a diff or the AdmissionReview answers.

Exit codes: 0 done; 1 some input could not be read or admission failed on an object
(the rest is still processed and printed); 2 usage errors, including a broken policy set
(the command cannot say anything meaningful without its policies), a missing input path
and an object whose namespace is not ``--namespace``'s (those after the rest is printed).
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from webhook import codec
from webhook.commands import common
from webhook.engine import review
from webhook.exitcodes import Exit
from webhook.files import walk
from webhook.kube import objects

if TYPE_CHECKING:
    from webhook.cluster.view import ClusterView
    from webhook.engine.admission import Outcome
    from webhook.policy.policyset import PolicySet

OUTPUTS = ("yaml", "json", "patch", "diff", "review")
INPUT_SUFFIXES = (".yaml", ".yml", ".json")
HELP = "dry-run: show what admission does to manifests"


class _Dumper(yaml.SafeDumper):
    """Block-style YAML without anchors: the engine may reuse one dict in two places
    (a selector copied into an affinity term), which must print as two plain copies."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--filename", dest="files", metavar="PATH", action="extend", nargs="+", required=True,
        help="manifest file, folder (recursive: *.yaml *.yml *.json) or - for stdin; repeatable",
    )
    parser.add_argument(
        "-o", "--output", choices=OUTPUTS, default="yaml",
        help="yaml (default): mutated objects; json: one object or a v1 List; patch: JSON patches "
        "(labelled by kind/namespace/name when several); diff: unified diff; review: AdmissionReview answers",
    )
    parser.add_argument(
        "--policies", metavar="PATH", action="extend", nargs="+",
        help="policy folder or file (default: ./policies); repeatable",
    )
    parser.add_argument(
        "--namespace", "-n",
        help="namespace of objects that do not name one (default: default); one that names another is refused, as kubectl does",
    )
    parser.add_argument(
        "--operation", choices=review.OPERATIONS, default="CREATE",
        help="admission operation for plain manifests (default CREATE); AdmissionReviews keep their own",
    )
    parser.add_argument("--kinds-config", metavar="FILE", help="server configuration file declaring extra kinds")
    parser.add_argument(
        "--cluster-state", metavar="FILE", action="extend", nargs="+",
        help="Nodes, Namespaces and PriorityClasses (e.g. kubectl get -o yaml) used as the cluster view",
    )
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="read the cluster view once from the cluster this kubeconfig names")
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: the current one)")


@dataclass
class Item:
    """One object from the input, where it came from, and what admission did to it."""

    where: str  # "file:doc N"
    request: review.Request
    outcome: Outcome

    @property
    def label(self) -> str:
        req = self.request
        return objects.describe(req.object or {}, kind=req.kind, namespace=req.namespace, name=req.name)


def run(args: argparse.Namespace) -> int:
    from webhook.engine import admission

    setup = _setup(args)
    if isinstance(setup, int):
        return setup
    policies, cluster = setup
    console = Console(sys.stderr)
    errors = InputErrors(console.say)
    items: list[Item] = []
    for where, request in _requests(args, errors, console):
        item = Item(where, request, admission.admit(request, policies=policies, cluster=cluster))
        if _report(item, console.say):
            errors.count += 1
        items.append(item)
    printable = [item for item in items if _printable(item, errors)]
    _print(printable, args.output, sys.stdout)
    return errors.exit_code()


# The YAML and JSON printers recurse, a few Python frames a level; Kubernetes objects nest a
# few dozen levels, far below this.
PRINTABLE_DEPTH = 200


def _printable(item: Item, errors: InputErrors) -> bool:
    """Whether the printers can print the object: one nested deeper is an input error for
    that object, not a traceback for all of them."""
    if _depth(item.outcome.object) <= PRINTABLE_DEPTH:
        return True
    errors.report(f"{item.where}: {item.label}: the object nests deeper than {PRINTABLE_DEPTH} levels to print")
    return False


def _depth(value: Any) -> int:
    """How deeply lists and mappings nest in ``value`` (iteratively: it may be very deep)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return deepest


def _setup(args: argparse.Namespace) -> tuple[PolicySet, ClusterView | None] | int:
    """The policy set and the optional cluster view, or an exit code after a usage error."""
    from webhook.policy import loader

    kinds = common.targets(args, "mutate")
    if kinds is None:
        return Exit.USAGE
    paths = args.policies or ["policies"]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        return _usage(f"policy path {missing[0]} does not exist (use --policies PATH)")
    try:
        policies = loader.load(paths, targets=kinds)
    except loader.PolicyLoadError as exc:
        for error in exc.errors:
            print(str(error), file=sys.stderr)
        return _usage(f"the policy set in {', '.join(map(str, paths))} has {len(exc.errors)} error(s)")
    if args.cluster_state and args.kubeconfig:
        return _usage("give --cluster-state or --kubeconfig, not both")
    if args.kubeconfig:
        live = _live_view(args.kubeconfig, args.context)
        return (policies, live) if not isinstance(live, int) else live
    if not args.cluster_state:
        return policies, None
    cluster = _cluster_view(args.cluster_state)
    return (policies, cluster) if not isinstance(cluster, int) else cluster


LIVE_VIEW_TIMEOUT = 30.0  # seconds to list the cluster's nodes, namespaces and priority classes


def _live_view(kubeconfig: str, context: str | None) -> ClusterView | int:
    """The cluster view read once, as the server's cache would hold it."""
    import asyncio

    from webhook.cluster import config

    try:
        where = config.load(kubeconfig, context)
    except config.ConfigError as exc:
        return _usage(str(exc))
    view = asyncio.run(_read_once(where))
    if isinstance(view, str):
        print(f"error: {view}", file=sys.stderr)
        return Exit.FINDINGS
    return view


async def _read_once(where: Any) -> ClusterView | str:
    from webhook.cluster.cache import ClusterCache
    from webhook.cluster.client import Client

    client = Client(where)
    cache = ClusterCache(client)
    try:
        await cache.start()
        if not await cache.wait_synced(LIVE_VIEW_TIMEOUT):
            errors = "; ".join(f"{name}: {s['last_error']}" for name, s in cache.status().items() if s["last_error"])
            return f"could not read the cluster at {where.host} within {LIVE_VIEW_TIMEOUT:.0f} s ({errors or 'no answer'})"
        return cache  # its stores stay in memory once its watches stop
    finally:
        await cache.stop()
        await client.close()


def _cluster_view(paths: list[str]) -> ClusterView | int:
    from webhook.cluster.view import StaticClusterView
    from webhook.files import documents

    found: list[Any] = []
    for path in paths:
        try:
            found.extend(doc.data for doc in documents.load_file(path))
        except documents.YamlError as exc:
            return _usage(str(exc))
    return StaticClusterView.from_objects(found)


def _usage(message: str) -> int:
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


def _report(item: Item, say: Callable[[str], None]) -> bool:
    """Print what happened to one object on stderr; True when it counts as a failure."""
    outcome = item.outcome
    for warning in outcome.warnings:
        say(f"warning: {item.label}: {warning}")
    if outcome.result == "error":
        say(f"error: {item.label}: {outcome.error}")
        return True
    if outcome.result == "ignored":
        # Admission's own reason, word for word: it knows why (a subresource, a missing
        # apiVersion, a kind it does not handle) better than the object can tell us here.
        say(f"{item.where}: {item.label}: left unchanged" + (f": {outcome.reason}" if outcome.reason else ""))
    return False


def _requests(args: argparse.Namespace, errors: InputErrors, console: Console) -> Iterator[tuple[str, review.Request]]:
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


def _print(items: list[Item], output: str, out: TextIO) -> None:
    printers: dict[str, Callable[[list[Item], TextIO], None]] = {
        "yaml": _print_yaml,
        "json": _print_json,
        "patch": _print_patch,
        "diff": _print_diff,
        "review": _print_review,
    }
    printers[output](items, out)


def _results(items: list[Item]) -> list[dict[str, Any]]:
    return [i.outcome.object for i in items if i.outcome.object is not None]


def _print_yaml(items: list[Item], out: TextIO) -> None:
    out.write("---\n".join(to_yaml(obj) for obj in _results(items)))


def _print_json(items: list[Item], out: TextIO) -> None:
    objects = _results(items)
    data: Any = objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objects}
    out.write(json.dumps(data, indent=2) + "\n")


def _print_patch(items: list[Item], out: TextIO) -> None:
    if len(items) == 1:
        out.write(json.dumps(items[0].outcome.patch, indent=2) + "\n")
        return
    out.writelines(f"# {item.label}\n{json.dumps(item.outcome.patch, indent=2)}\n" for item in items)


def _print_diff(items: list[Item], out: TextIO) -> None:
    for item in items:
        before = to_yaml(item.request.object).splitlines(keepends=True) if item.request.object else []
        after = to_yaml(item.outcome.object).splitlines(keepends=True) if item.outcome.object else []
        out.writelines(difflib.unified_diff(before, after, f"a/{item.label}", f"b/{item.label}"))


def _print_review(items: list[Item], out: TextIO) -> None:
    for item in items:
        patch = codec.dumps(item.outcome.patch) if item.outcome.patch else b""
        answer = review.respond(item.request, patch=patch, warnings=item.outcome.warnings)
        out.write(json.dumps(answer, indent=2) + "\n")
