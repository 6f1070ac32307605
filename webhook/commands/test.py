"""``placement-webhook test``: run policy test suites (``*.suite.yaml``).

One line per case, a diff per failure, ``N passed, M failed`` alone on the last line of
standard output; broken suites on standard error as ``file:line: field: message``.
``--policies-from cluster`` runs the cases against the cluster's PlacementPolicy objects instead
of the policies each suite names; ``files,cluster`` against both, a suite's own policy replacing
the object of its name (the change under test against what is in force).
Exit 0 when every case passes, 1 when one fails, 2 when a suite cannot run or a path names no
suite (it does not exist, or is a folder without ``*.suite.yaml`` files).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from webhook.commands import inputs
from webhook.exitcodes import Exit
from webhook.files.walk import MissingPath
from webhook.suites import load, report
from webhook.suites import run as suite_run
from webhook.suites.load import ClusterPolicies

HELP = "run policy test suites (*.suite.yaml)"


# ---- command line --------------------------------------------------------------------------


EPILOG = """exit codes: 0 every case passes; 1 a case fails; 2 usage errors (a path that does not exist or holds no
*.suite.yaml file, a suite that cannot run)"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("paths", nargs="*", metavar="PATH", default=["policies"],
                        help="suite files or folders searched for *.suite.yaml (default: policies)")
    parser.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML to FILE")
    parser.add_argument("--update", action="store_true",
                        help="rewrite expect.object / expect.objectFile from the current output")
    inputs.add_policy_sources(parser, kubeconfig=True, files="the policies each suite names")


def run(args: argparse.Namespace) -> int:
    cluster = None
    if "cluster" in args.policies_from:
        objects = inputs.cluster_policies(args)
        if isinstance(objects, int):
            return objects
        cluster = ClusterPolicies(objects, only="files" not in args.policies_from)
        _warn_left_out(cluster)
    elif args.kubeconfig or args.context:
        return inputs.usage("--kubeconfig and --context are read with --policies-from cluster or files,cluster")
    return run_suites(paths=args.paths, junit=args.junit, update=args.update, cluster=cluster)


def _warn_left_out(cluster: ClusterPolicies) -> None:
    from webhook.policy import sources

    for error in sources.assemble(None, cluster.objects, memo=cluster.memo).errors():
        print(f"warning: {error} (left out, as the server leaves it out)", file=sys.stderr)


def run_suites(
    *, paths: Sequence[str], junit: str | None, update: bool, out: TextIO | None = None, err: TextIO | None = None,
    cluster: ClusterPolicies | None = None,
) -> int:
    """Run the suites under ``paths`` and print as the ``test`` command does; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        files = load.discover(paths)
        empty = [path for path in paths if not load.discover([path])]
    except MissingPath as exc:
        print(f"error: {exc}", file=err)
        return Exit.USAGE
    if empty:  # each path names something to run, as each of lint's names a policy
        for path in empty:
            print(f"error: no *.suite.yaml files under {path}", file=err)
        return Exit.USAGE
    outcome = suite_run.run(files, update=update, on_case=lambda r: print(report.case_line(r), file=out, flush=True),
                            cluster=cluster)
    for problem in outcome.broken:
        print(str(problem), file=err)
    updated = sum(r.updated for r in outcome.results)
    if updated:
        print(f"updated the expected object of {updated} case(s); review the change with git diff", file=err)
    if junit:
        report.write_junit(outcome, Path(junit))
    print(report.summary(outcome), file=out)
    return outcome.exit_code
