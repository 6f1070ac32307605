"""``placement-webhook spot-controller``: cordon spot nodes about to be reclaimed and evict their
pods under their PodDisruptionBudgets (SPEC section 9). ``--dry-run`` prints what it would do
and exits; otherwise it follows the cluster, with ``--leader-elect`` acting only while it holds
the Lease.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from webhook.commands import common
from webhook.exitcodes import Exit

HELP = "cordon spot nodes about to be reclaimed and evict their pods under PodDisruptionBudgets"
log = logging.getLogger("webhook.spot")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="the cluster (default: the pod's service account, else $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME")
    parser.add_argument("--config", metavar="FILE", help="the SpotConfig file (docs/spot-controller.md)")
    parser.add_argument("--provider", choices=("generic", "karpenter", "eks", "gke", "aks"),
                        help="the capacity provider (overrides the config file's)")
    parser.add_argument("--dry-run", action="store_true", help="print what it would do now, act on nothing, exit")
    parser.add_argument("--drain-timeout", type=common.positive, default=120.0, metavar="SECONDS",
                        help="seconds from the signal until a drain gives up and reports what a PDB kept (default 120)")
    parser.add_argument("--exclude-namespace", dest="exclude_namespaces", action="append", default=[], metavar="NS",
                        help="never evict pods of this namespace; repeatable")
    parser.add_argument("--leader-elect", action="store_true", help="act only while holding the Lease")
    parser.add_argument("--lease-name", default="placement-webhook-spot-controller", metavar="NAME")
    parser.add_argument("--lease-namespace", default=None, metavar="NS")
    parser.add_argument("--lease-duration", type=common.positive, default=15.0, metavar="SECONDS")
    parser.add_argument("--renew-deadline", type=common.positive, default=10.0, metavar="SECONDS")
    parser.add_argument("--retry-period", type=common.positive, default=2.0, metavar="SECONDS")
    parser.add_argument("--sync-timeout", type=common.positive, default=60.0, metavar="SECONDS")
    parser.add_argument("--metrics-port", type=int, default=8080, metavar="PORT", help="0: none")
    parser.add_argument("--metrics-host", default="0.0.0.0", metavar="ADDR")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


def run(args: argparse.Namespace) -> int:
    from webhook.cluster import config as cluster_config
    from webhook.server import logs
    from webhook.spot import config as spot_config

    try:
        settings = spot_config.load(args.config)
    except spot_config.SpotConfigError as exc:
        for error in exc.errors:
            print(str(error), file=sys.stderr)
        return Exit.USAGE
    if args.provider:
        settings = settings.model_copy(update={"provider": args.provider})
    logs.setup(args.log_level)
    try:
        where = cluster_config.load(args.kubeconfig, args.context, user_default=True)
    except cluster_config.ConfigError as exc:
        common.error("spot-controller", str(exc))
        return Exit.USAGE
    try:
        return asyncio.run(_main(where, settings, args))
    except KeyboardInterrupt:
        return 130


async def eviction_version(client: Any) -> str:
    """The Eviction group-version ``pods/eviction`` takes, from discovery of /api/v1: policy/v1
    from 1.22, policy/v1beta1 before (a body naming a version not served is a 400)."""
    try:
        resources = await client.get("/api/v1")
    except Exception:  # noqa: BLE001 - fall back to the version every supported server accepts
        return "policy/v1beta1"
    for resource in resources.get("resources") or ():
        if resource.get("name") == "pods/eviction" and resource.get("group") and resource.get("version"):
            return f"{resource['group']}/{resource['version']}"
    return "policy/v1beta1"


async def _main(where: Any, settings: Any, args: argparse.Namespace) -> int:
    from webhook.cluster.cache import NODES, ClusterCache
    from webhook.cluster.client import Client
    from webhook.spot.controller import CORDONED_BY, DRAIN_STARTED, SpotController, SpotSettings, plan
    from webhook.spot.nodes import node_projection

    client = Client(where)
    cache = ClusterCache(client, projections={NODES: node_projection(settings, (DRAIN_STARTED, CORDONED_BY))})
    options = SpotSettings(drain_timeout=args.drain_timeout, exclude_namespaces=tuple(args.exclude_namespaces),
                           dry_run=args.dry_run, eviction_version=await eviction_version(client))
    controller = SpotController(client, cache, settings, options)
    await cache.start()
    try:
        if args.dry_run:
            if not await cache.wait_synced(args.sync_timeout):
                print(f"error: could not list the cluster's nodes and pods within {args.sync_timeout:g} s",
                      file=sys.stderr)
                return Exit.FINDINGS
            print("\n".join(plan(controller)))
            return Exit.OK
        return await _follow(controller, cache, client, args)
    finally:
        await cache.stop()
        await client.close()


async def _follow(controller: Any, cache: Any, client: Any, args: argparse.Namespace) -> int:
    from webhook.cluster import probes

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    controller.metrics.watch_cluster(cache.status)
    runner = None
    if args.metrics_port:
        def not_ready() -> list[str]:
            return [f"{name} not synced" for name, s in cache.status().items() if not s["synced"]]

        runner = await probes.start(args.metrics_host, args.metrics_port, metrics=controller.metrics.render,
                                    not_ready=not_ready)
    try:
        while not stop.is_set() and not await cache.wait_synced(30.0):
            log.warning("waiting for the cluster view")
        if not args.leader_elect:
            controller.metrics.leader.set(1)
            await controller.run(stop)
            return Exit.OK
        return await _lead(controller, client, args, stop)
    finally:
        if runner is not None:
            await runner.cleanup()


async def _lead(controller: Any, client: Any, args: argparse.Namespace, stop: asyncio.Event) -> int:
    from webhook.cluster import config
    from webhook.cluster.leader import LeaderElectionConfig, LeaderElector, default_identity

    election = LeaderElectionConfig(
        namespace=args.lease_namespace or config.pod_namespace() or "default", name=args.lease_name,
        identity=default_identity(), lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
        retry_period=args.retry_period, field_manager="spot-controller")

    async def lead(lost: asyncio.Event) -> None:
        controller.metrics.leader.set(1)
        either = asyncio.Event()

        async def relay() -> None:
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(lost.wait())]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in waits:
                task.cancel()
            either.set()

        relay_task = asyncio.create_task(relay())
        try:
            await controller.run(either)
        finally:
            relay_task.cancel()
            controller.metrics.leader.set(0)

    election_task = asyncio.create_task(LeaderElector(client, election).run(lead))
    stop_task = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({election_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    if stop_task in done:
        election_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await election_task
        return Exit.OK
    stop_task.cancel()
    error = election_task.exception()
    if error is not None:
        log.error("the spot controller stopped", exc_info=error)
    else:
        log.error("lost the lease: exiting")  # a restart starts clean and resumes drains from the nodes
    return Exit.FINDINGS
