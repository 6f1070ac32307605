"""``placement-webhook mutate``: show what admission would do to manifests, offline.

Reads YAML (multi-document) and JSON from files, folders and stdin, unpacks ``List``
objects, takes AdmissionReviews as the API server would send them, runs every object
through ``admission.admit`` -- the very function the server calls -- and prints the
mutated objects, the patches, a diff or the AdmissionReview answers.

Exit codes: 0 done; 1 some input could not be read (a document that is not a Kubernetes
object among them, named by ``file:line``) or admission failed on an object (the rest is still
processed and printed); 2 usage errors, including a broken or empty policy set (the command
cannot say anything meaningful without its policies), a broken cluster state, a missing input
path, an input that holds no object at all (an empty file, an empty List, a folder without
manifests: nothing to act on, as kubectl's "no objects passed to apply") and an object whose
namespace is not ``--namespace``'s (those after the rest is printed).
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from webhook import codec
from webhook.commands import inputs
from webhook.engine import review
from webhook.kube import objects

if TYPE_CHECKING:
    from webhook.engine.admission import Outcome

OUTPUTS = ("yaml", "json", "patch", "diff", "review")
HELP = "dry-run: show what admission does to manifests"


class _Dumper(yaml.SafeDumper):
    """Block-style YAML without anchors: the engine may reuse one dict in two places
    (a selector copied into an affinity term), which must print as two plain copies."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)


EPILOG = """exit codes: 0 done; 1 an input that cannot be read or is not a Kubernetes object (file:line), or
an object admission failed on; 2 usage errors: a broken or empty policy set or cluster state, a missing input, an input
holding no object (empty file, empty List, folder without manifests), a namespace other than --namespace's"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
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
                        help="read the cluster view once from the cluster this kubeconfig names (and, with "
                             "--policies-from cluster, its PlacementPolicies)")
    inputs.add_policy_sources(parser)
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

    setup = inputs.setup(args)
    if isinstance(setup, int):
        return setup
    policies, cluster = setup
    console = inputs.Console(sys.stderr)
    errors = inputs.InputErrors(console.say)
    items: list[Item] = []
    for where, request in inputs.requests(args, errors, console):
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


def _printable(item: Item, errors: inputs.InputErrors) -> bool:
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
