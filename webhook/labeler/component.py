"""``label-nodes`` as a component: following the cluster on the runtime's run loop (``component``),
or one pass over every node (``once``: ``--once`` and ``--dry-run``)."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.cluster.cache import ClusterCache
from webhook.cluster.client import Client
from webhook.labeler.controller import Labeler, LabelerConfig
from webhook.labeler.values import NodeLabels
from webhook.labeler.writes import Change, PassReport
from webhook.runtime import controller, sync
from webhook.runtime.run import Component

__all__ = ["NAME", "OnePass", "component", "once"]

NAME = "label-nodes"
log = logging.getLogger("webhook.labeler")


@dataclass(frozen=True)
class OnePass:
    """What one pass did (or, dry, would do): the report, every node's labels, the writes, and
    the nodes as the view showed them."""

    report: PassReport
    computed: list[NodeLabels]
    changes: list[Change]
    nodes: Mapping[str, Mapping[str, Any]]


def _labeler(config: controller.ControllerConfig, settings: LabelerConfig) -> Labeler:
    client = Client(config.cluster)
    return Labeler(client, ClusterCache(client), settings)


def component(config: controller.ControllerConfig, settings: LabelerConfig) -> Component:
    """The labeler following the cluster, relabelling nodes as they change."""
    labeler = _labeler(config, settings)
    return controller.component(name=NAME, log=log, cache=labeler.cache, work=labeler.run, metrics=labeler.metrics,
                                config=config)


async def once(config: controller.ControllerConfig, settings: LabelerConfig) -> OnePass | sync.NotSynced:
    """One pass over every node once the view has listed them (at most ``config.sync_timeout``)."""
    labeler = _labeler(config, settings)
    async with sync.watched(labeler.cache):
        failed = await sync.first_lists(labeler.cache, timeout=config.sync_timeout)
        if failed is not None:
            return failed
        report, computed, changes = await labeler.run_pass()
        return OnePass(report, computed, changes, labeler.nodes())
