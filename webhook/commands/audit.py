"""``placement-webhook audit``: the running cluster held against the policies and the scheduler.

The cluster is read as ``explain`` reads it (``--cluster-state`` files, or ``--kubeconfig``
read once, listing besides every workload kind the engine places: Jobs, CronJobs, KubeVirt's,
Wukong's and the ``--kinds-config``'s, each at the group-version the server serves it; a kind
not served is said in a note, one whose list is refused in an error line naming the permission
wanted, and the others are audited), the policies as ``mutate`` and ``explain`` take them
(``--policies``, ``--policies-from``). Every workload is audited (``webhook.audit.scan``): whether each policy
that selects it would change it (``fail``: which policy, which field group, the patch), would
not (``pass``), or is opted out of (``skip``); and, from the scheduler model, whether all its
replicas are placed and whether its next rollout would finish (``warn`` when not, with what
blocks it). The text output is a table grouped by namespace, problems first; ``-o yaml`` and
``-o json`` print the results and their summary.

Exit codes: 0 every result is a pass or a skip; 1 some policy would change a workload, a
replica or a rollout is at risk, or something could not be read (``fail``, ``warn`` or
``error``, or a kind whose list the API server refused); 2 usage errors (no cluster given, both
given, a broken policy set or cluster state, an unreachable cluster).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from webhook.commands import common, explain, inputs
from webhook.exitcodes import Exit

if TYPE_CHECKING:
    from webhook.audit.model import Result
    from webhook.cluster.discovery import Unlisted

HELP = "audit the running cluster: which workloads the policies would change, which replicas or rollouts are stuck"
OUTPUTS = ("text", "yaml", "json")
PROBLEMS = ("error", "fail", "warn")  # the statuses that make the exit code 1, worst first


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster-state", metavar="FILE", action="extend", nargs="+",
                        help=f"the cluster, as objects in files (e.g. {explain.DUMP_COMMAND})")
    parser.add_argument("--kubeconfig", metavar="FILE", help="read the cluster once from this kubeconfig's cluster "
                        "(and, with --policies-from cluster, its PlacementPolicies)")
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: the current one)")
    parser.add_argument("--policies", metavar="PATH", action="extend", nargs="+",
                        help="policy folder or file (default: ./policies); repeatable")
    inputs.add_policy_sources(parser)
    common.add_kinds_config(parser)
    parser.add_argument("--kubernetes-version", type=explain.parse_version, metavar="MAJOR.MINOR",
                        help="the cluster's Kubernetes version, for the scheduler's messages (default: the API "
                        "server's with --kubeconfig, else the newest release)")
    parser.add_argument("--no-scheduling", action="store_true",
                        help="only the policies' verdicts: no replica or rollout simulated")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text",
                        help="text (default): a table grouped by namespace, problems first; yaml or json: the "
                        "results and their summary")


def run(args: argparse.Namespace) -> int:
    from webhook.audit.scan import Auditor, AuditState, Options

    policies = inputs.load_policies(args, "audit")
    if isinstance(policies, int):
        return policies
    kinds = common.targets(args, "audit")
    if kinds is None:
        return Exit.USAGE
    read = explain.read_cluster(args, kinds=kinds)
    if isinstance(read, int):
        return read
    state = AuditState.from_objects(read.objects, targets=kinds, match_label_keys=read.match_label_keys)
    options = Options(scheduling=not args.no_scheduling, scheduler=read.version.options())
    results = Auditor(policies, kinds, options).full(state)
    refused = _say_unlisted(read.unlisted)
    _print(results, args.output)
    return Exit.FINDINGS if refused or any(r.status.value in PROBLEMS for r in results) else Exit.OK


def _say_unlisted(unlisted: Iterable[Unlisted]) -> bool:
    """The kinds a live read did not list, on stderr: those the API server does not serve in one
    note (no object of them can exist), each refused one in an error line (its objects are not
    audited). Whether any was refused."""
    unlisted = list(unlisted)
    unserved = [u.shown() for u in unlisted if not u.refused]
    if unserved:
        print(f"note: not served by the API server, so none to audit: {', '.join(unserved)}", file=sys.stderr)
    refused = [u for u in unlisted if u.refused]
    for u in refused:
        print(f"error: {u.shown()} not audited: {u.reason}", file=sys.stderr)
    return bool(refused)


def to_dict(result: Result) -> dict[str, Any]:
    """One result in the machine form: the same field names in every result."""
    r = result.resource
    return {"resource": {"apiVersion": r.api_version, "kind": r.kind, "name": r.name, "namespace": r.namespace,
                         "uid": r.uid or None},
            "policy": result.policy, "rule": result.rule, "result": result.status.value, "message": result.message,
            "patch": [dict(op) for op in result.patch]}


def _print(results: list[Result], output: str) -> None:
    from webhook.audit.scan import summary
    from webhook.commands.mutate import to_yaml

    if output == "text":
        sys.stdout.write(render(results))
        return
    data = {"summary": summary(results), "results": [to_dict(r) for r in results]}
    sys.stdout.write(to_yaml(data) if output == "yaml" else json.dumps(data, indent=2) + "\n")


COLUMNS = ("RESULT", "WORKLOAD", "POLICY", "RULE", "MESSAGE")


def render(results: list[Result]) -> str:
    """The table a person reads: one block per namespace (cluster-scoped objects under
    ``(cluster)``), namespaces with the worst results first; in each, errors, fails, warns,
    skips, then passes; and the summary last."""
    from webhook.audit.scan import severity, summary

    if not results:
        return "no workload to audit\n"
    blocks: dict[str, list[Result]] = {}
    for result in results:
        blocks.setdefault(result.resource.namespace or "(cluster)", []).append(result)
    rows = {ns: sorted(found, key=lambda r: (severity(r.status), r.resource.kind, r.resource.name, r.policy, r.rule))
            for ns, found in blocks.items()}
    order = sorted(rows, key=lambda ns: (min(severity(r.status) for r in rows[ns]), ns))
    cells = {ns: [_cells(r) for r in rows[ns]] for ns in order}
    widths = [max(len(c[i]) for table in cells.values() for c in [COLUMNS, *table]) for i in range(len(COLUMNS) - 1)]
    lines: list[str] = []
    for ns in order:
        lines.append(f"NAMESPACE {ns}")
        lines += ["  " + _row(c, widths) for c in [COLUMNS, *cells[ns]]]
        lines.append("")
    counts = summary(results)
    workloads = len({r.resource for r in results})
    lines.append(f"{len(results)} results for {workloads} workloads: " +
                 ", ".join(f"{counts[s]} {s}" for s in ("fail", "warn", "error", "skip", "pass")))
    return "\n".join(lines) + "\n"


def _cells(result: Result) -> tuple[str, ...]:
    r = result.resource
    return result.status.value, f"{r.kind}/{r.name}", result.policy, result.rule, result.message


def _row(cells: Iterable[str], widths: list[int]) -> str:
    *head, last = cells
    return "  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)) + "  " + last
