"""``placement-webhook lint``: validate policy files exactly as the server loads them.

Every error at once, as ``file:line: field: message``; then the findings across policies
(``policy.lint``). Exit 0 when clean, 1 with errors or findings, 2 on usage errors: a path
that does not exist, a folder with no policy file, or a path whose files hold no policy at all
(empty, or only comments: a typo in a CI path must not pass as clean).

With ``--policies-from cluster`` it lints the cluster's PlacementPolicy objects (each named
``cluster:PlacementPolicy/<name>``); with ``files,cluster`` the files against them, a file's
policy replacing the object of its name: what the validating webhook would say of applying them.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from webhook.commands import common, inputs
from webhook.engine import conflicts
from webhook.exitcodes import Exit
from webhook.kube.kinds import Targets
from webhook.policy import lint, loader, sources
from webhook.policy.errors import LoadError
from webhook.policy.loader import Loaded

HELP = "validate policy files"
DEFAULT_PATH = "./policies"


EPILOG = """exit codes: 0 every policy is valid and nothing is found; 1 errors or findings; 2 usage errors
(a path that does not exist, or that holds no policy: an empty file, a folder without policy files)"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help=f"policy files or folders (default: {DEFAULT_PATH})"
    )
    common.add_kinds_config(parser)
    inputs.add_policy_sources(parser, kubeconfig=True, files="the PATHs")


def run(args: argparse.Namespace) -> int:
    chosen = args.policies_from
    if "files" not in chosen and args.paths:
        common.error("lint", "PATH is read with --policies-from files or files,cluster, not with cluster alone")
        return Exit.USAGE
    if "cluster" not in chosen and (args.kubeconfig or args.context):
        common.error("lint", "--kubeconfig and --context are read with --policies-from cluster or files,cluster")
        return Exit.USAGE
    targets = common.targets(args, "lint")
    if targets is None:
        return Exit.USAGE
    files = _files(args, targets) if "files" in chosen else None
    if isinstance(files, int):
        return files
    loaded = files
    if "cluster" in chosen:
        objects = inputs.cluster_policies(args)
        if isinstance(objects, int):
            return objects
        assembled = sources.assemble(files, objects, targets=targets, on_duplicate="replace")
        if assembled.left_out:
            return _report(assembled.errors(), "error")
        loaded = assembled.loaded
    assert loaded is not None
    problems = sorted(
        set(lint.findings(loaded) + conflicts.findings(loaded)), key=lambda e: (e.file, e.line, e.field, e.message)
    )
    if problems:
        return _report(problems, "finding")
    count = len(loaded.policies)
    print(f"{count} {'policy' if count == 1 else 'policies'} OK")
    return Exit.OK


def _files(args: argparse.Namespace, targets: Targets) -> Loaded | int:
    """The policy files the PATHs name, loaded whole; or the exit code after their errors."""
    paths: list[str] = list(args.paths) or [DEFAULT_PATH]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        for path in missing:
            common.error("lint", f"{path}: no such file or directory")
        return Exit.USAGE
    try:
        return loader.load_with_sources(paths, targets=targets, each=True)
    except loader.NoPolicies as exc:
        for problem in exc.problems:
            common.error("lint", problem)
        return Exit.USAGE
    except loader.PolicyLoadError as exc:
        return _report(exc.errors, "error")


def _report(problems: Sequence[LoadError], noun: str) -> int:
    for problem in problems:
        print(problem, file=sys.stderr)
    plural = "" if len(problems) == 1 else "s"
    print(f"{len(problems)} {noun}{plural}", file=sys.stderr)
    return Exit.FINDINGS
