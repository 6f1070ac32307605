"""``placement-webhook label-nodes``: keep the resource labels true on every node (docs/install.md).

``--once`` lists the cluster, labels every node and exits (0, or 1 when a write failed);
``--dry-run`` prints, per node, the labels it carries and the ones it would get; otherwise it
follows the cluster view: a node is relabelled when its pods or allocatable change, and every
node every ``--interval`` seconds. With ``--leader-elect`` only the replica holding the Lease
writes; the others keep their view warm and take over within the lease duration.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from webhook.commands import common
from webhook.exitcodes import Exit

if TYPE_CHECKING:
    from webhook.labeler.controller import LabelerConfig
    from webhook.labeler.values import NodeLabels
    from webhook.labeler.writes import Change
    from webhook.runtime.controller import ControllerConfig

HELP = "keep the resource labels of resource-aware placement current on every node"


def configure(parser: argparse.ArgumentParser) -> None:
    from webhook.labeler.values import DEFAULT_GPU_RESOURCES, Steps

    defaults = Steps()
    common.add_controller_flags(parser, lease_name="placement-webhook-label-nodes", acts="write")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one pass over every node, then exit")
    mode.add_argument("--interval", type=common.positive, default=60.0, metavar="SECONDS",
                      help="seconds between passes over every node while following the cluster (default 60)")
    parser.add_argument("--source", choices=("requests", "metrics"), default="requests",
                        help="usage labels from pod requests (default) or measured by metrics.k8s.io")
    parser.add_argument("--dry-run", action="store_true",
                        help="print each node's labels and the ones it would get; write nothing (one pass)")
    parser.add_argument("--rate", type=common.positive, default=10.0, metavar="WRITES",
                        help="label writes per second at most (default 10)")
    parser.add_argument("--gpu-resource", dest="gpu_resources", action="append", metavar="NAME",
                        help=f"an extended resource counted as GPUs (default: {', '.join(DEFAULT_GPU_RESOURCES)}); "
                        "repeatable, and replaces the default")
    parser.add_argument("--usage-step", type=common.whole(1), default=defaults.usage, metavar="PERCENT")
    parser.add_argument("--cpu-step", type=common.whole(1), default=defaults.cpu, metavar="MILLICORES")
    parser.add_argument("--memory-step", type=common.whole(1), default=defaults.memory, metavar="MIB")
    parser.add_argument("--storage-step", type=common.whole(1), default=defaults.storage, metavar="MIB")


def run(args: argparse.Namespace) -> int:
    from webhook.labeler.controller import LabelerConfig
    from webhook.labeler.values import DEFAULT_GPU_RESOURCES, Steps
    from webhook.runtime import logs

    logs.setup(args.log_level)
    where = common.load_cluster(args, "label-nodes")
    if where is None:
        return Exit.USAGE
    config = common.controller_config(args, where)
    steps = Steps(usage=args.usage_step, cpu=args.cpu_step, memory=args.memory_step, storage=args.storage_step)
    settings = LabelerConfig(steps=steps, gpu_resources=tuple(args.gpu_resources or DEFAULT_GPU_RESOURCES),
                             source=args.source, rate=args.rate, interval=args.interval, dry_run=args.dry_run)
    try:
        if args.once or args.dry_run:
            return asyncio.run(_one_pass(config, settings, sys.stdout))
        return asyncio.run(_follow(config, settings))
    except KeyboardInterrupt:
        return 130


async def _follow(config: ControllerConfig, settings: LabelerConfig) -> int:
    from webhook.labeler import component
    from webhook.runtime.run import run

    return await run(component.component(config, settings))


async def _one_pass(config: ControllerConfig, settings: LabelerConfig, out: TextIO) -> int:
    from webhook.labeler import component
    from webhook.runtime.sync import NotSynced

    done = await component.once(config, settings)
    if isinstance(done, NotSynced):
        print(f"error: {done.message}", file=sys.stderr)
        return done.code
    report = done.report
    if settings.dry_run:
        out.write(table(done.nodes, done.computed, done.changes))
        return Exit.OK
    print(f"{report.nodes} node(s): {report.written} written, {report.unchanged} already right, "
          f"{len(report.skipped)} left out, {len(report.failed)} failed", file=sys.stderr)
    for node, why in sorted(report.failed.items()):
        print(f"error: node {node}: {why}", file=sys.stderr)
    return Exit.OK if report.ok else Exit.FINDINGS


def table(nodes: Mapping[str, Mapping[str, Any]], computed: list[NodeLabels], changes: list[Change]) -> str:
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
