"""``placement-webhook rebalance``: bring running pods back to the capacity their policies prefer,
each move simulated first and made through the Eviction API (docs/rebalance.md). ``--dry-run``
prints what it would move, from where to where, and the gain, then exits; otherwise it follows
the cluster, a pass every ``--interval``, with ``--leader-elect`` acting only under the Lease.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from webhook.commands import common
from webhook.exitcodes import Exit

if TYPE_CHECKING:
    from webhook.rebalance.controller import RebalanceSettings
    from webhook.rebalance.model import Decision
    from webhook.runtime.controller import ControllerConfig
    from webhook.spot.config import SpotConfig

HELP = "move running pods back to the capacity their policies prefer, each move simulated, under PDBs"

# Go's time.ParseDuration units that make sense for an interval.
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")


def duration(text: str) -> float:
    """An argparse type: seconds, as a plain number or a Go duration (``60s``, ``1m30s``, ``2h``),
    greater than zero."""
    spoken = text.strip()
    try:
        seconds = float(spoken)
    except ValueError:
        parts = DURATION.findall(spoken)
        if not parts or "".join(n + u for n, u in parts) != spoken:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say 60s, 5m or 1m30s)") from None
        seconds = sum(float(number) * UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return seconds


def configure(parser: argparse.ArgumentParser) -> None:
    from webhook.rebalance import decide

    defaults = decide.Settings()
    common.add_controller_flags(parser, lease_name="placement-webhook-rebalance", acts="evict")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what it would move now (from, to, gain), evict nothing, exit")
    parser.add_argument("--interval", type=duration, default=60.0, metavar="DURATION",
                        help="time between passes: seconds or a duration such as 60s or 5m (default 60s)")
    parser.add_argument("--max-evictions-per-interval", dest="max_evictions", type=common.whole(1),
                        default=defaults.max_evictions, metavar="N",
                        help=f"evictions per pass at most (default {defaults.max_evictions})")
    parser.add_argument("--min-gain", type=common.whole(1), default=defaults.min_gain, metavar="POINTS",
                        help=f"preference points a move must gain (default {defaults.min_gain}; docs/rebalance.md)")
    parser.add_argument("--exclude-namespace", dest="exclude_namespaces", action="append", metavar="NS",
                        help="never move pods of this namespace (default: "
                        f"{', '.join(sorted(defaults.excluded_namespaces))}); repeatable, and replaces the default")
    common.add_spot_config_flags(parser, config_help="the SpotConfig file, as spot-controller takes it")


def run(args: argparse.Namespace) -> int:
    return common.run_spot_controller(args, "rebalance",
                                      lambda config, spot: _main(config, spot, settings(args, spot), sys.stdout))


def settings(args: argparse.Namespace, spot: SpotConfig) -> RebalanceSettings:
    """The flags as the rebalancer's settings (the Eviction version is the API server's to say)."""
    from webhook.rebalance import decide
    from webhook.rebalance.controller import RebalanceSettings

    excluded = decide.Settings().excluded_namespaces if args.exclude_namespaces is None else \
        frozenset(args.exclude_namespaces)
    policy = decide.Settings(min_gain=args.min_gain, max_evictions=args.max_evictions,
                             excluded_namespaces=excluded, spot=spot)
    return RebalanceSettings(policy=policy, interval=args.interval, dry_run=args.dry_run)


async def _main(config: ControllerConfig, spot: SpotConfig, options: RebalanceSettings, out: TextIO) -> int:
    from webhook.rebalance import component
    from webhook.runtime.run import run
    from webhook.runtime.sync import NotSynced

    rebalancer = await component.rebalancer(config, spot, options)
    if isinstance(rebalancer, NotSynced):
        return common.not_synced(rebalancer)
    if not options.dry_run:
        return await run(component.component(rebalancer, config))
    decisions = await component.dry_run(rebalancer, config)
    if isinstance(decisions, NotSynced):
        return common.not_synced(decisions)
    out.write(table(decisions))
    return Exit.OK


def table(decisions: Sequence[Decision]) -> str:
    """One row per candidate: where it runs, where the simulation lands it, the points there and
    here, the gain, the verdict and why; then how many of each verdict."""
    from webhook.rebalance.model import Verdict

    if not decisions:
        return "no candidates: every pod runs where its policies prefer\n"
    rows = [("POD", "OWNER", "FROM", "TO", "NOW", "THERE", "GAIN", "VERDICT", "REASON")]
    for d in decisions:
        simulated = d.verdict is not Verdict.SKIP
        rows.append((d.candidate.key, f"{d.candidate.owner.kind}/{d.candidate.owner.name}", d.candidate.node,
                     d.target or "-", str(d.score_now) if simulated else "-",
                     str(d.score_there) if simulated and d.target else "-",
                     f"{d.gain:+d}" if simulated and d.target else "-", d.verdict.value, d.reason))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
             for row in rows]
    counts = {v: sum(d.verdict is v for d in decisions) for v in Verdict}
    lines.append(f"{counts[Verdict.MOVE]} to move, {counts[Verdict.STAY]} to stay, {counts[Verdict.SKIP]} skipped")
    return "\n".join(lines) + "\n"
