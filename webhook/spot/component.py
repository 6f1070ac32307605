"""``spot-controller`` as a component: the controller built from its configuration (the Eviction
version found by discovery), following the cluster on the runtime's run loop (``component``), or
saying what it would do now (``dry_run``)."""
from __future__ import annotations

import dataclasses
import logging

from webhook.cluster import discovery
from webhook.cluster.cache import NODES, ClusterCache
from webhook.cluster.client import Client
from webhook.runtime import controller, sync
from webhook.runtime.run import Component
from webhook.spot.config import SpotConfig
from webhook.spot.controller import COMPONENT, CORDONED_BY, DRAIN_STARTED, SpotController, SpotSettings, plan
from webhook.spot.nodes import node_projection

__all__ = ["component", "dry_run", "spot_controller"]

log = logging.getLogger("webhook.spot")


async def spot_controller(config: controller.ControllerConfig, spot: SpotConfig,
                          settings: SpotSettings) -> SpotController:
    """The controller on a view of its own (the annotations it writes watched too), evicting with
    the Eviction version the API server serves."""
    client = Client(config.cluster)
    cache = ClusterCache(client, projections={NODES: node_projection(spot, (DRAIN_STARTED, CORDONED_BY))})
    version = await discovery.eviction_version(client)
    return SpotController(client, cache, spot, dataclasses.replace(settings, eviction_version=version))


def component(spot: SpotController, config: controller.ControllerConfig) -> Component:
    """The controller following the cluster: drains as reclaim signals come and go."""
    return controller.component(name=COMPONENT, log=log, cache=spot.cache, work=spot.run, metrics=spot.metrics,
                                config=config)


async def dry_run(spot: SpotController, config: controller.ControllerConfig) -> list[str] | sync.NotSynced:
    """What a pass would do now, in words, once the view has listed the cluster."""
    async with sync.watched(spot.cache):
        failed = await sync.first_lists(spot.cache, timeout=config.sync_timeout)
        return failed if failed is not None else plan(spot)
