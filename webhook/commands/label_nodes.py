"""``placement-webhook label-nodes``: keep the resource labels true on every node (SPEC section 8).

``--once`` lists the cluster, labels every node and exits (0, or 1 when a write failed);
``--dry-run`` prints, per node, the labels it carries and the ones it would get; otherwise it
follows the cluster view: a node is relabelled when its pods or allocatable change, and every
node every ``--interval`` seconds. With ``--leader-elect`` only the replica holding the Lease
writes; the others keep their view warm and take over within the lease duration.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any, TextIO

from webhook.commands import common
from webhook.exitcodes import Exit

if TYPE_CHECKING:
    from webhook.labeler.controller import Labeler
    from webhook.labeler.values import NodeLabels
    from webhook.labeler.writes import Change

HELP = "keep the resource labels of resource-aware placement current on every node"
log = logging.getLogger("webhook.labeler")


def configure(parser: argparse.ArgumentParser) -> None:
    from webhook.labeler.values import DEFAULT_GPU_RESOURCES, Steps

    defaults = Steps()
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="the cluster (default: the pod's service account, else $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: the current one)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one pass over every node, then exit")
    mode.add_argument("--interval", type=common.positive, default=60.0, metavar="SECONDS",
                      help="seconds between passes over every node while following the cluster (default 60)")
    parser.add_argument("--source", choices=("requests", "metrics"), default="requests",
                        help="usage labels from pod requests (default) or measured by metrics.k8s.io")
    parser.add_argument("--dry-run", action="store_true",
                        help="print each node's labels and the ones it would get; write nothing (one pass)")
    parser.add_argument("--leader-elect", action="store_true", help="write only while holding the Lease")
    parser.add_argument("--lease-name", default="placement-webhook-label-nodes", metavar="NAME")
    parser.add_argument("--lease-namespace", default=None, metavar="NS",
                        help="namespace of the Lease (default: the pod's own, else default)")
    parser.add_argument("--lease-duration", type=common.positive, default=15.0, metavar="SECONDS")
    parser.add_argument("--renew-deadline", type=common.positive, default=10.0, metavar="SECONDS")
    parser.add_argument("--retry-period", type=common.positive, default=2.0, metavar="SECONDS")
    parser.add_argument("--rate", type=common.positive, default=10.0, metavar="WRITES",
                        help="label writes per second at most (default 10)")
    parser.add_argument("--gpu-resource", dest="gpu_resources", action="append", metavar="NAME",
                        help=f"an extended resource counted as GPUs (default: {', '.join(DEFAULT_GPU_RESOURCES)}); "
                        "repeatable, and replaces the default")
    parser.add_argument("--usage-step", type=common.whole(1), default=defaults.usage, metavar="PERCENT")
    parser.add_argument("--cpu-step", type=common.whole(1), default=defaults.cpu, metavar="MILLICORES")
    parser.add_argument("--memory-step", type=common.whole(1), default=defaults.memory, metavar="MIB")
    parser.add_argument("--storage-step", type=common.whole(1), default=defaults.storage, metavar="MIB")
    parser.add_argument("--sync-timeout", type=common.positive, default=60.0, metavar="SECONDS",
                        help="how long to wait for the first list of nodes and pods (default 60)")
    parser.add_argument("--metrics-port", type=int, default=8080, metavar="PORT",
                        help="port of /metrics, /healthz and /readyz while following the cluster (0: none)")
    parser.add_argument("--metrics-host", default="0.0.0.0", metavar="ADDR")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


def run(args: argparse.Namespace) -> int:
    from webhook.cluster import config
    from webhook.labeler.controller import LabelerConfig
    from webhook.labeler.values import DEFAULT_GPU_RESOURCES, Steps
    from webhook.server import logs

    logs.setup(args.log_level)
    try:
        where = config.load(args.kubeconfig, args.context, user_default=True)
    except config.ConfigError as exc:
        print(f"placement-webhook label-nodes: {exc}", file=sys.stderr)
        return Exit.USAGE
    steps = Steps(usage=args.usage_step, cpu=args.cpu_step, memory=args.memory_step, storage=args.storage_step)
    settings = LabelerConfig(steps=steps, gpu_resources=tuple(args.gpu_resources or DEFAULT_GPU_RESOURCES),
                             source=args.source, rate=args.rate, interval=args.interval, dry_run=args.dry_run)
    try:
        return asyncio.run(_main(where, settings, args))
    except KeyboardInterrupt:
        return 130


async def _main(where: Any, settings: Any, args: argparse.Namespace) -> int:
    from webhook.cluster.cache import ClusterCache
    from webhook.cluster.client import Client
    from webhook.labeler.controller import Labeler

    client = Client(where)
    cache = ClusterCache(client)
    labeler = Labeler(client, cache, settings)
    await cache.start()
    try:
        if args.once or args.dry_run:
            return await _one_pass(labeler, cache, args, sys.stdout)
        return await _follow(labeler, cache, client, args)
    finally:
        await cache.stop()
        await client.close()


async def _one_pass(labeler: Labeler, cache: Any, args: argparse.Namespace, out: TextIO) -> int:
    if not await cache.wait_synced(args.sync_timeout):
        failing = "; ".join(f"{n}: {s['last_error']}" for n, s in cache.status().items() if s["last_error"])
        print(f"error: could not list the cluster's nodes and pods within {args.sync_timeout:g} s"
              f" ({failing or 'no answer'})", file=sys.stderr)
        return Exit.FINDINGS
    report, computed, changes = await labeler.run_pass()
    if args.dry_run:
        out.write(table(labeler.nodes(), computed, changes))
        return Exit.OK
    print(f"{report.nodes} node(s): {report.written} written, {report.unchanged} already right, "
          f"{len(report.skipped)} left out, {len(report.failed)} failed", file=sys.stderr)
    for node, why in sorted(report.failed.items()):
        print(f"error: node {node}: {why}", file=sys.stderr)
    return Exit.OK if report.ok else Exit.FINDINGS


def table(nodes: Any, computed: list[NodeLabels], changes: list[Change]) -> str:
    """Per node: each label's current value, the computed one, and whether it would change."""
    from webhook.labeler.values import PREFIX

    changing = {c.node: c.labels for c in changes}
    rows = [("NODE", "LABEL", "CURRENT", "COMPUTED", "CHANGE")]
    for result in sorted(computed, key=lambda r: r.node):
        if result.problem:
            rows.append((result.node, "-", "-", "-", f"left out: {result.problem}"))
            continue
        current = ((nodes.get(result.node) or {}).get("metadata") or {}).get("labels") or {}
        for key, value in result.labels.items():
            now = current.get(key)
            change = "write" if key in changing.get(result.node, {}) else ""
            rows.append((result.node, key.removeprefix(PREFIX), "-" if now is None else str(now), value, change))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "".join("  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(row)).rstrip() + "\n"
                   for row in rows)


async def _follow(labeler: Labeler, cache: Any, client: Any, args: argparse.Namespace) -> int:
    from webhook.cluster import probes

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    labeler.metrics.watch_cluster(cache.status)
    runner = None
    if args.metrics_port:
        def not_ready() -> list[str]:
            return [f"{name} not synced" for name, s in cache.status().items() if not s["synced"]]

        runner = await probes.start(args.metrics_host, args.metrics_port, metrics=labeler.metrics.render,
                                    not_ready=not_ready)
    try:
        await _wait_synced(cache, stop)
        if not args.leader_elect:
            labeler.metrics.leader.set(1)
            await labeler.run(stop)
            return Exit.OK
        return await _lead(labeler, client, args, stop)
    finally:
        if runner is not None:
            await runner.cleanup()


async def _wait_synced(cache: Any, stop: asyncio.Event) -> None:
    """Wait for the first lists (retried for ever by the informers), logging while they fail."""
    while not stop.is_set() and not await cache.wait_synced(30.0):
        log.warning("waiting for the cluster view", extra={"fields": {
            name: s["last_error"] for name, s in cache.status().items() if not s["synced"]}})


async def _lead(labeler: Labeler, client: Any, args: argparse.Namespace, stop: asyncio.Event) -> int:
    from webhook.cluster import config
    from webhook.cluster.leader import LeaderElectionConfig, LeaderElector, default_identity

    election = LeaderElectionConfig(
        namespace=args.lease_namespace or config.pod_namespace() or "default", name=args.lease_name,
        identity=default_identity(), lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
        retry_period=args.retry_period, field_manager="label-nodes")
    elector = LeaderElector(client, election)

    async def lead(lost: asyncio.Event) -> None:
        labeler.metrics.leader.set(1)
        both = asyncio.Event()

        async def relay() -> None:
            await _first(stop, lost)
            both.set()

        relay_task = asyncio.create_task(relay())
        try:
            await labeler.run(both)
        finally:
            relay_task.cancel()
            labeler.metrics.leader.set(0)

    election_task = asyncio.create_task(elector.run(lead))
    stop_task = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({election_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    if stop_task in done:
        election_task.cancel()  # releases the lease
        with contextlib.suppress(asyncio.CancelledError):
            await election_task
        return Exit.OK
    stop_task.cancel()
    error = election_task.exception()
    if error is not None:
        log.error("the labeler stopped", exc_info=error)
        return Exit.FINDINGS
    # Leadership was lost: exit, as client-go components do, so that a restart starts clean.
    log.error("lost the lease: exiting")
    return Exit.FINDINGS


async def _first(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()

