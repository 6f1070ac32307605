"""What several commands share: error lines, number types, the ``--kinds-config`` flag, and the
flags, run loop and SpotConfig of the cluster-side controllers."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from webhook.exitcodes import Exit
from webhook.kube import kinds


def error(command: str, message: str) -> None:
    """``placement-webhook COMMAND: message`` on standard error."""
    print(f"placement-webhook {command}: {message}", file=sys.stderr)


def positive(text: str) -> float:
    """An argparse type: a number greater than zero (seconds, rates)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def whole(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum`` (counts, steps)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text}")
        return value

    return parse


def add_kinds_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kinds-config", metavar="FILE", help="configuration file declaring extra workload kinds")


def targets(args: argparse.Namespace, command: str) -> kinds.Targets | None:
    """The built-in kinds plus ``--kinds-config``'s; None (after an error line) when it is broken."""
    if not getattr(args, "kinds_config", None):
        return kinds.BUILTIN
    try:
        return kinds.load_kinds_config(args.kinds_config)
    except kinds.KindConfigError as exc:
        error(command, str(exc))
        return None


def add_controller_flags(parser: argparse.ArgumentParser, *, lease_name: str, acts: str) -> None:
    """The flags of a cluster-side controller (label-nodes, spot-controller): where the cluster
    is, the Lease (``acts``: what only the holder does), the first lists, probes and logs."""
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="the cluster (default: the pod's service account, else $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: the current one)")
    parser.add_argument("--leader-elect", action="store_true", help=f"{acts} only while holding the Lease")
    parser.add_argument("--lease-name", default=lease_name, metavar="NAME")
    parser.add_argument("--lease-namespace", default=None, metavar="NS",
                        help="namespace of the Lease (default: the pod's own, else default)")
    parser.add_argument("--lease-duration", type=positive, default=15.0, metavar="SECONDS")
    parser.add_argument("--renew-deadline", type=positive, default=10.0, metavar="SECONDS")
    parser.add_argument("--retry-period", type=positive, default=2.0, metavar="SECONDS")
    parser.add_argument("--sync-timeout", type=positive, default=60.0, metavar="SECONDS",
                        help="how long to wait for the first list of nodes and pods (default 60)")
    parser.add_argument("--metrics-port", type=int, default=8080, metavar="PORT",
                        help="port of /metrics, /healthz and /readyz while following the cluster (0: none)")
    parser.add_argument("--metrics-host", default="0.0.0.0", metavar="ADDR")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


async def follow(work: Callable[[Any], Awaitable[None]], metrics: Any, cache: Any, client: Any,
                 args: argparse.Namespace, *, component: str) -> int:
    """``runtime.controller.follow`` with the controller flags' values; ``metrics`` has the
    ``leader`` gauge, ``render`` and ``watch_cluster``."""
    from webhook.runtime.controller import Election
    from webhook.runtime.controller import follow as run_following

    metrics.watch_cluster(cache.status)
    election = Election(args.lease_name, args.lease_namespace, args.lease_duration, args.renew_deadline,
                        args.retry_period) if args.leader_elect else None
    return await run_following(work, cache, client, component=component, leader=metrics.leader,
                               metrics=metrics.render, metrics_host=args.metrics_host,
                               metrics_port=args.metrics_port, election=election)


def load_spot_config(path: str | None) -> Any:
    """The SpotConfig in ``path`` (None: the defaults), or exit code 2 after printing each of
    its errors as ``file:line: field: message``."""
    from webhook.spot import config as spot_config

    try:
        return spot_config.load(path)
    except spot_config.SpotConfigError as exc:
        for problem in exc.errors:
            print(str(problem), file=sys.stderr)
        return Exit.USAGE
