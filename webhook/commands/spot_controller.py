"""``placement-webhook spot-controller``: cordon spot nodes about to be reclaimed and evict their
pods under their PodDisruptionBudgets (docs/spot-controller.md). ``--dry-run`` prints what it would do
and exits; otherwise it follows the cluster, with ``--leader-elect`` acting only while it holds
the Lease.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from webhook.commands import common
from webhook.exitcodes import Exit

HELP = "cordon spot nodes about to be reclaimed and evict their pods under PodDisruptionBudgets"
log = logging.getLogger("webhook.spot")


def configure(parser: argparse.ArgumentParser) -> None:
    common.add_controller_flags(parser, lease_name="placement-webhook-spot-controller", acts="act")
    parser.add_argument("--config", metavar="FILE", help="the SpotConfig file (docs/spot-controller.md)")
    parser.add_argument("--provider", choices=("generic", "karpenter", "eks", "gke", "aks"),
                        help="the capacity provider (overrides the config file's)")
    parser.add_argument("--dry-run", action="store_true", help="print what it would do now, act on nothing, exit")
    parser.add_argument("--drain-timeout", type=common.positive, default=120.0, metavar="SECONDS",
                        help="seconds from the signal until a drain gives up and reports what a PDB kept (default 120)")
    parser.add_argument("--exclude-namespace", dest="exclude_namespaces", action="append", default=[], metavar="NS",
                        help="never evict pods of this namespace; repeatable")
    parser.add_argument("--parallel-evictions", type=common.whole(1), default=10, metavar="N",
                        help="evictions in flight at once, across all drains (default 10)")


def run(args: argparse.Namespace) -> int:
    from webhook.cluster import config as cluster_config
    from webhook.runtime import logs
    settings = common.load_spot_config(args.config)
    if isinstance(settings, int):
        return settings
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


async def _main(where: Any, settings: Any, args: argparse.Namespace) -> int:
    from webhook.cluster import discovery
    from webhook.cluster.cache import NODES, ClusterCache
    from webhook.cluster.client import Client
    from webhook.spot.controller import CORDONED_BY, DRAIN_STARTED, SpotController, SpotSettings, plan
    from webhook.spot.nodes import node_projection

    client = Client(where)
    cache = ClusterCache(client, projections={NODES: node_projection(settings, (DRAIN_STARTED, CORDONED_BY))})
    options = SpotSettings(drain_timeout=args.drain_timeout, exclude_namespaces=tuple(args.exclude_namespaces),
                           dry_run=args.dry_run, eviction_version=await discovery.eviction_version(client),
                           parallel_evictions=args.parallel_evictions)
    controller = SpotController(client, cache, settings, options)
    await cache.start()
    try:
        if args.dry_run:
            from webhook.runtime.controller import first_lists

            failed = await first_lists(cache, timeout=args.sync_timeout)
            if failed is not None:
                print(f"error: {failed[0]}", file=sys.stderr)
                return failed[1]
            print("\n".join(plan(controller)))
            return Exit.OK
        return await common.follow(controller.run, controller.metrics, cache, client, args,
                                   component="spot-controller")
    finally:
        await cache.stop()
        await client.close()
