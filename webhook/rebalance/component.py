"""``rebalance`` as a component: the rebalancer built from its configuration (the Eviction and
the PodDisruptionBudget group-versions found by discovery), following the cluster on the
runtime's run loop (``component``), or saying what it would move now (``dry_run``)."""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Mapping
from typing import Any

from webhook.cluster import discovery
from webhook.cluster.cache import NODES, ClusterCache
from webhook.cluster.client import Client, describe, final
from webhook.cluster.informer import REFLECTOR_BACKOFF, Backoff
from webhook.cluster.snapshot import DEPLOYMENTS, PDBS, REPLICASETS, STATEFULSETS, project_pdb, project_workload
from webhook.exitcodes import Exit
from webhook.rebalance.controller import COMPONENT, Rebalancer, RebalanceSettings
from webhook.rebalance.model import Decision
from webhook.runtime import controller, sync
from webhook.runtime.run import Component
from webhook.spot.config import SpotConfig
from webhook.spot.nodes import node_projection

__all__ = ["WORKLOADS", "component", "dry_run", "rebalancer", "view"]

log = logging.getLogger("webhook.rebalance")

WORKLOADS = (REPLICASETS, DEPLOYMENTS, STATEFULSETS)


async def rebalancer(config: controller.ControllerConfig, spot: SpotConfig,
                     settings: RebalanceSettings) -> Rebalancer | sync.NotSynced:
    """The rebalancer on a view of its own (PodDisruptionBudgets in the version the API server
    serves), evicting with the Eviction version it takes; why not, when discovery does not
    answer within the sync timeout (a dry run stops at once when waiting cannot help)."""
    client = Client(config.cluster)
    pdbs = await _pdb_group_version(client, config.sync_timeout, one_shot=settings.dry_run)
    if isinstance(pdbs, sync.NotSynced):
        await client.close()
        return pdbs
    version = await discovery.eviction_version(client)
    return Rebalancer(client, view(client, spot, pdbs), spot, dataclasses.replace(settings, eviction_version=version))


def view(client: Client, spot: SpotConfig, pdbs: str | None, **options: Any) -> ClusterCache:
    """The cluster view a pass decides on: the cache's nodes (with what the spot detector reads),
    namespaces and priority classes, the PodDisruptionBudgets of group-version ``pdbs`` (None:
    not served), and the owners' desired replicas and rollout limits; the rebalancer adds the
    pods. ``options`` go to the cache (tests make its timings short)."""
    cache = ClusterCache(client, projections={NODES: node_projection(spot)}, **options)
    if pdbs is not None:
        cache.add(PDBS, f"/apis/{pdbs}/poddisruptionbudgets", functools.partial(_stamped_pdb, api_version=pdbs))
    for name in WORKLOADS:
        cache.add(name, f"/apis/apps/v1/{name}", project_workload)
    return cache


def _stamped_pdb(obj: Mapping[str, Any], *, api_version: str) -> dict[str, Any]:
    """A budget as ``project_pdb`` keeps it, with its group-version: a List's items carry none,
    and an empty selector selects no pod under policy/v1beta1 but every pod under policy/v1
    (``safety`` reads which)."""
    return {**project_pdb(obj), "apiVersion": api_version}


async def _pdb_group_version(client: Client, timeout: float, *, one_shot: bool) -> str | None | sync.NotSynced:
    """``discovery.pdb_group_version``, retried with the reflector's backoff (as the informers
    retry) for ``timeout`` seconds; a one-shot pass stops at once when waiting cannot help
    (``client.final``), as ``sync.first_lists`` does."""
    loop = asyncio.get_running_loop()
    deadline, backoff = loop.time() + timeout, Backoff(REFLECTOR_BACKOFF)
    while True:
        try:
            return await discovery.pdb_group_version(client)
        except Exception as exc:  # noqa: BLE001 - said in one line, as the first lists say it
            if one_shot and final(exc):
                return sync.NotSynced(describe(exc, client.config.host), Exit.USAGE)
            if loop.time() >= deadline:
                return sync.NotSynced(f"could not discover the PodDisruptionBudget version within {timeout:g} s: "
                                      f"{describe(exc, client.config.host)}", Exit.FINDINGS)
        await asyncio.sleep(min(backoff.next(), max(0.0, deadline - loop.time())))


def component(rebalance: Rebalancer, config: controller.ControllerConfig) -> Component:
    """The rebalancer following the cluster: a pass every interval, under the Lease when asked."""
    return controller.component(name=COMPONENT, log=log, cache=rebalance.cache, work=rebalance.run,
                                metrics=rebalance.metrics, config=config)


async def dry_run(rebalance: Rebalancer, config: controller.ControllerConfig) -> list[Decision] | sync.NotSynced:
    """Every decision a pass would make now, once the view has listed the cluster."""
    async with sync.watched(rebalance.cache):
        failed = await sync.first_lists(rebalance.cache, timeout=config.sync_timeout,
                                        what="nodes, pods and PodDisruptionBudgets")
        return failed if failed is not None else rebalance.decisions()
