"""``placement-webhook explain``: will the workload schedule, will its rollout finish, and why not.

Each workload of the input is mutated by the policies as admission would (unless
``--no-policies``), turned into the pods its controller would create, and placed one pod at
a time by the model of the kube-scheduler's default profile (``webhook.scheduler``) on
the cluster state: files (``kubectl get ... -o yaml``) or the live cluster, read once. A
Deployment or StatefulSet already running there is explained as its update (``--update`` is
then the default). Changes that would make a Pending replica place or a stuck rollout finish
are searched and each is verified by simulating again (``webhook.explain``).

Exit codes: 0 every replica places and every rollout completes; 1 some do not, or some input
could not be read or admitted; 2 usage errors (a missing path, a broken policy set or cluster
state, no workload in the input).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webhook.commands import common, inputs
from webhook.engine import review
from webhook.exitcodes import Exit
from webhook.kube import objects

if TYPE_CHECKING:
    from webhook.explain.report import Explanation
    from webhook.cluster.discovery import Unlisted
    from webhook.explain.state import ClusterState
    from webhook.kube.kinds import Targets
    from webhook.scheduler.plan import Options
    from webhook.scheduler.release import Release
    from webhook.policy.policyset import PolicySet

HELP = "simulate the kube-scheduler placing (mutated) workloads and rolling them out; diagnose and suggest fixes"
OUTPUTS = ("text", "yaml", "json")
PROGRESS_AFTER = 1.0  # seconds of work before a terminal gets a progress line
# The kinds a cluster dump is asked for (docs/explain.md), in kubectl's words.
DUMP_COMMAND = "kubectl get nodes,pods,priorityclasses,namespaces,deployments,replicasets,statefulsets," \
               "daemonsets,poddisruptionbudgets -A -o yaml"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--filename", dest="files", metavar="PATH", action="extend", nargs="+", required=True,
        help="workload manifest, folder (recursive: *.yaml *.yml *.json) or - for stdin; repeatable",
    )
    policies = parser.add_mutually_exclusive_group()
    policies.add_argument("--policies", metavar="PATH", action="extend", nargs="+",
                          help="policy folder or file to mutate the workloads with first (default: ./policies)")
    policies.add_argument("--no-policies", action="store_true", help="explain the workloads as they are")
    parser.add_argument("--cluster-state", metavar="FILE", action="extend", nargs="+",
                        help=f"the cluster, as objects in files (e.g. {DUMP_COMMAND})")
    parser.add_argument("--kubeconfig", metavar="FILE", help="read the cluster once from this kubeconfig's cluster "
                        "(and, with --policies-from cluster, its PlacementPolicies)")
    inputs.add_policy_sources(parser)
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: the current one)")
    parser.add_argument("--kubernetes-version", type=parse_version, metavar="MAJOR.MINOR",
                        help="the cluster's Kubernetes version (a patch may follow: 1.34.1), for --cluster-state "
                        "(default: the newest release); with --kubeconfig it replaces the API server's own. The "
                        "scheduler's messages are worded as that release words them, and 1.31 and later honour "
                        "matchLabelKeys in pod affinity, so a stuck rollout can be scoped to one revision")
    parser.add_argument("--replicas", type=common.whole(0), metavar="N", help="place N replicas instead of the object's count")
    update = parser.add_mutually_exclusive_group()
    update.add_argument("--update", dest="update", action="store_true", default=None,
                        help="simulate the rolling update of a Deployment or StatefulSet (the default when it "
                        "already runs in the cluster)")
    update.add_argument("--no-update", dest="update", action="store_false",
                        help="place the replicas as if the workload were created")
    parser.add_argument("--no-suggestions", action="store_true", help="do not search for changes that would help")
    parser.add_argument("--namespace", "-n", help="namespace of objects that do not name one (default: default)")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text",
                        help="text (default): a report to read; yaml or json: the machine form")
    common.add_kinds_config(parser)


def parse_version(text: str) -> Release:
    """MAJOR.MINOR, or MAJOR.MINOR.PATCH where a patch release's words differ (1.34.1)."""
    from webhook.scheduler.release import parse_release

    found = parse_release(text) if re.fullmatch(r"v?\d+\.\d+(\.\d+)?", text) else None
    if found is None:
        raise argparse.ArgumentTypeError(f"not a MAJOR.MINOR version: {text!r}")
    return found


def run(args: argparse.Namespace) -> int:
    args.operation = "CREATE"  # what inputs.requests reads: a workload explained is one being applied
    policies: PolicySet | None = None
    if args.no_policies and args.policies_from != ("files",):
        return inputs.usage("give --policies-from or --no-policies, not both")
    if not args.no_policies:
        loaded = inputs.load_policies(args, "explain", hint="use --policies PATH, or --no-policies")
        if isinstance(loaded, int):
            return loaded
        policies = loaded
    found = _cluster_state(args)
    if isinstance(found, int):
        return found
    state, release = found
    kinds = common.targets(args, "explain")
    if kinds is None:
        return Exit.USAGE
    console = inputs.Console(sys.stderr)
    errors = inputs.InputErrors(console.say)
    progress = _Progress(console)
    explanations: list[Explanation] = []
    for where, request in inputs.requests(args, errors, console):
        obj = _admitted(where, request, policies, state, errors, console.say)
        if obj is None:
            continue
        target = kinds.for_object(obj)
        label = objects.describe(obj)
        if target is None:
            console.say(f"{where}: {label}: skipped: not a workload kind explain places")
            continue
        progress.workload(label)
        explained = _explain(where, obj, target, state, args, errors, progress.step, release)
        if explained is not None:
            explanations.append(explained)
    progress.done()
    for note in state.notes:
        console.say(f"note: cluster state: {note}")
    if not explanations and not errors.count and not errors.usage:
        return inputs.usage("the input holds no workload to explain")
    if release.known:
        console.say(f"note: the scheduler's messages are worded as Kubernetes {release.version} words them "
                    f"({release.source})")
    _print(explanations, args.output, release)
    code = errors.exit_code()
    if code == Exit.OK and not all(e.ok for e in explanations):
        return Exit.FINDINGS
    return code


@dataclass(frozen=True)
class _Version:
    """The release the scheduler's messages are worded for, and where it was learnt."""

    version: Release | None  # None: not known, the newest release's words
    source: str = ""

    @property
    def known(self) -> bool:
        return self.version is not None

    def options(self) -> Options:
        from webhook.scheduler.plan import Options

        return Options.for_version(self.version)


@dataclass(frozen=True)
class ClusterRead:
    """The cluster's objects as read (files, or the live cluster once), whether pod affinity
    there honours matchLabelKeys (None: not known), the release its messages are worded for,
    and the kinds asked for that a live read did not list (and why)."""

    objects: list[Any]
    match_label_keys: bool | None
    version: _Version
    unlisted: tuple[Unlisted, ...] = ()


def read_cluster(args: argparse.Namespace, *, kinds: Targets | None = None) -> ClusterRead | int:
    """The cluster from ``--cluster-state`` files or ``--kubeconfig``, and the cluster's
    version: ``--kubernetes-version``, else the API server's (GET /version, MAJOR.MINOR); an
    exit code after a usage error (neither or both given, a broken file, an unreachable
    cluster). ``explain`` and ``audit`` read their cluster so; ``kinds`` (the audit's) has a live
    read list every workload kind of them too, where explain reads only what the scheduler
    model needs."""
    from webhook.cluster.cache import MATCH_LABEL_KEYS_SINCE
    from webhook.scheduler.release import Release

    given = _Version(args.kubernetes_version, "--kubernetes-version") if args.kubernetes_version else _Version(None)
    if bool(args.cluster_state) == bool(args.kubeconfig):
        return inputs.usage("give the cluster as --cluster-state FILE... or --kubeconfig FILE (one of them)")
    if args.kubeconfig:
        read = inputs.read_live(args.kubeconfig, args.context, scheduling=True, kinds=kinds or ())
        if isinstance(read, int):
            return read
        learnt = read.server_version
        version = given if given.known or learnt is None else _Version(Release(*learnt), "the API server's version")
        known = read.match_label_keys if not given.known else _honours_match_label_keys(given, MATCH_LABEL_KEYS_SINCE)
        return ClusterRead(read.objects, known, version, read.unlisted)
    files = inputs.read_state_files(args.cluster_state)
    if isinstance(files, int):
        return files
    known = _honours_match_label_keys(given, MATCH_LABEL_KEYS_SINCE) if given.known else None
    return ClusterRead(files, known, given)


def _cluster_state(args: argparse.Namespace) -> tuple[ClusterState, _Version] | int:
    """The cluster state ``read_cluster`` reads, as the simulation's ``ClusterState``."""
    from webhook.explain.state import ClusterState

    read = read_cluster(args)
    if isinstance(read, int):
        return read
    return ClusterState.from_objects(read.objects, match_label_keys=read.match_label_keys), read.version


def _honours_match_label_keys(version: _Version, since: tuple[int, int]) -> bool:
    assert version.version is not None
    return (version.version.major, version.version.minor) >= since


def _admitted(where: str, request: review.Request, policies: PolicySet | None, state: ClusterState,
              errors: inputs.InputErrors, say: Callable[[str], None]) -> dict[str, Any] | None:
    """The object as admission would leave it (as it is with ``--no-policies``)."""
    from webhook.engine import admission

    obj = request.object
    if not isinstance(obj, dict):
        errors.report(f"{where}: the request carries no object to explain")
        return None
    if policies is None:
        return obj
    outcome = admission.admit(request, policies=policies, cluster=state.view)
    label = objects.describe(obj, kind=request.kind, namespace=request.namespace, name=request.name)
    for warning in outcome.warnings:
        say(f"warning: {label}: {warning}")
    if outcome.result == "error":
        errors.report(f"error: {where}: {label}: admission failed: {outcome.error}")
        return None
    return outcome.object if isinstance(outcome.object, dict) else obj


def _explain(where: str, obj: dict[str, Any], target: Any, state: ClusterState, args: argparse.Namespace,
             errors: inputs.InputErrors, progress: Callable[[str], None], version: _Version) -> Explanation | None:
    from webhook.explain.report import explain
    from webhook.explain.workloads import WorkloadError

    try:
        return explain(obj, target, state, namespace=args.namespace or "default", replicas=args.replicas,
                       update=args.update, options=version.options(), suggestions=not args.no_suggestions,
                       progress=progress)
    except (WorkloadError, ValueError) as exc:
        # A spec the API server would refuse (a pod affinity selector it cannot parse, say)
        # is the input's fault: said once for this object, the others still explained.
        errors.report(f"error: {where}: {objects.describe(obj)}: {exc}")
        return None


class _Progress:
    """A progress line on a terminal, once the work has taken longer than a second."""

    def __init__(self, console: inputs.Console) -> None:
        self.console = console
        self.started = time.monotonic()
        self.count = 0
        self.label = ""

    def workload(self, label: str) -> None:
        self.count += 1
        self.label = label
        self.step("reading")

    def step(self, what: str) -> None:
        if self.console.wants_progress() and time.monotonic() - self.started > PROGRESS_AFTER:
            self.console.show(f"[{self.count}] {self.label}: {what}")

    def done(self) -> None:
        self.console.done()


def _print(explanations: list[Explanation], output: str, version: _Version) -> None:
    from webhook.commands.mutate import to_yaml
    from webhook.explain.report import render

    if output == "text":
        sys.stdout.write("\n".join(render(e) for e in explanations))
        return
    # The release the messages are worded for (null: the newest release's words).
    data: dict[str, Any] = {"kubernetesVersion": str(version.version) if version.known else None,
                            "workloads": [e.to_dict() for e in explanations]}
    sys.stdout.write(to_yaml(data) if output == "yaml" else json.dumps(data, indent=2) + "\n")
