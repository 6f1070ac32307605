"""What several commands share: error lines, number types, the ``--kinds-config`` flag, and the
flags, configuration and SpotConfig of the cluster-side controllers."""
from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from webhook.exitcodes import Exit
from webhook.kube import kinds

if TYPE_CHECKING:
    from webhook.cluster.config import ClusterConfig
    from webhook.runtime.controller import ControllerConfig
    from webhook.runtime.sync import NotSynced
    from webhook.spot.config import SpotConfig


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


POLICY_SOURCES = ("files", "cluster")


def policy_sources(text: str) -> tuple[str, ...]:
    """``--policies-from``: files, cluster, or both (comma-separated, in any order, each once);
    raises ValueError saying so."""
    words = [w.strip().lower() for w in text.split(",")]
    if any(w not in POLICY_SOURCES for w in words) or len(set(words)) != len(words):
        raise ValueError(f"must be files, cluster or files,cluster, not {text!r}")
    return tuple(w for w in POLICY_SOURCES if w in words)


def policy_sources_flag(text: str) -> tuple[str, ...]:
    """``policy_sources`` as an argparse type, with its own message."""
    try:
        return policy_sources(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


def load_cluster(args: argparse.Namespace, command: str) -> ClusterConfig | None:
    """Where ``--kubeconfig`` and ``--context`` say the cluster is (else the pod's service account,
    ``$KUBECONFIG`` or ``~/.kube/config``); None (after an error line) when that cannot be used."""
    from webhook.cluster import config

    try:
        return config.load(args.kubeconfig, args.context, user_default=True)
    except config.ConfigError as exc:
        error(command, str(exc))
        return None


def controller_config(args: argparse.Namespace, cluster: ClusterConfig) -> ControllerConfig:
    """The controller flags' values as configuration, for the cluster at ``cluster``."""
    from webhook.runtime.controller import Address, ControllerConfig, Election

    election = Election(args.lease_name, args.lease_namespace, args.lease_duration, args.renew_deadline,
                        args.retry_period) if args.leader_elect else None
    probes = Address(args.metrics_host, args.metrics_port) if args.metrics_port else None
    return ControllerConfig(cluster=cluster, election=election, probes=probes, sync_timeout=args.sync_timeout)


PROVIDERS = ("generic", "karpenter", "eks", "gke", "aks")


def add_spot_config_flags(parser: argparse.ArgumentParser, *, config_help: str) -> None:
    """``--config`` (a SpotConfig file) and ``--provider``, as spot-controller and rebalance take them."""
    parser.add_argument("--config", metavar="FILE", help=config_help)
    parser.add_argument("--provider", choices=PROVIDERS, help="the capacity provider (overrides the config file's)")


def spot_config(args: argparse.Namespace) -> SpotConfig | int:
    """``--config``'s SpotConfig with ``--provider`` over its own, or exit code 2 after its errors."""
    spot = load_spot_config(args.config)
    if isinstance(spot, int) or not args.provider:
        return spot
    return spot.model_copy(update={"provider": args.provider})


def run_spot_controller(args: argparse.Namespace, command: str,
                        main: Callable[[ControllerConfig, SpotConfig], Coroutine[Any, Any, int]]) -> int:
    """Run a controller that reads a SpotConfig (spot-controller, rebalance): the config (exit 2
    after its errors), the logs, the cluster (exit 2 when it cannot be used), then ``main``."""
    from webhook.runtime import logs

    spot = spot_config(args)
    if isinstance(spot, int):
        return spot
    logs.setup(args.log_level)
    where = load_cluster(args, command)
    if where is None:
        return Exit.USAGE
    try:
        return asyncio.run(main(controller_config(args, where), spot))
    except KeyboardInterrupt:
        return 130


def not_synced(failed: NotSynced) -> int:
    """Say why a one-shot pass could not start, in one line; its exit code."""
    print(f"error: {failed.message}", file=sys.stderr)
    return failed.code


def load_spot_config(path: str | None) -> SpotConfig | int:
    """The SpotConfig in ``path`` (None: the defaults), or exit code 2 after printing each of
    its errors as ``file:line: field: message``."""
    from webhook.spot import config as spot_config

    try:
        return spot_config.load(path)
    except spot_config.SpotConfigError as exc:
        for problem in exc.errors:
            print(str(problem), file=sys.stderr)
        return Exit.USAGE
