"""``placement-webhook spot-controller``: cordon spot nodes about to be reclaimed and evict their
pods under their PodDisruptionBudgets (docs/spot-controller.md). ``--dry-run`` prints what it would do
and exits; otherwise it follows the cluster, with ``--leader-elect`` acting only while it holds
the Lease.
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from webhook.commands import common
from webhook.exitcodes import Exit

if TYPE_CHECKING:
    from webhook.runtime.controller import ControllerConfig
    from webhook.spot.config import SpotConfig
    from webhook.spot.controller import SpotSettings

HELP = "cordon spot nodes about to be reclaimed and evict their pods under PodDisruptionBudgets"


def configure(parser: argparse.ArgumentParser) -> None:
    common.add_controller_flags(parser, lease_name="placement-webhook-spot-controller", acts="act")
    common.add_spot_config_flags(parser, config_help="the SpotConfig file (docs/spot-controller.md)")
    parser.add_argument("--dry-run", action="store_true", help="print what it would do now, act on nothing, exit")
    parser.add_argument("--drain-timeout", type=common.positive, default=120.0, metavar="SECONDS",
                        help="seconds from the signal until a drain gives up and reports what a PDB kept (default 120)")
    parser.add_argument("--exclude-namespace", dest="exclude_namespaces", action="append", default=[], metavar="NS",
                        help="never evict pods of this namespace; repeatable")
    parser.add_argument("--parallel-evictions", type=common.whole(1), default=10, metavar="N",
                        help="evictions in flight at once, across all drains (default 10)")


def run(args: argparse.Namespace) -> int:
    return common.run_spot_controller(args, "spot-controller", lambda config, spot: _main(config, spot, settings(args)))


def settings(args: argparse.Namespace) -> SpotSettings:
    """The drain's flags as its settings (the Eviction version is the API server's to say)."""
    from webhook.spot.controller import SpotSettings

    return SpotSettings(drain_timeout=args.drain_timeout, exclude_namespaces=tuple(args.exclude_namespaces),
                        dry_run=args.dry_run, parallel_evictions=args.parallel_evictions)


async def _main(config: ControllerConfig, spot: SpotConfig, options: SpotSettings) -> int:
    from webhook.runtime.run import run
    from webhook.runtime.sync import NotSynced
    from webhook.spot import component

    controller = await component.spot_controller(config, spot, options)
    if not options.dry_run:
        return await run(component.component(controller, config))
    plan = await component.dry_run(controller, config)
    if isinstance(plan, NotSynced):
        return common.not_synced(plan)
    print("\n".join(plan))
    return Exit.OK
