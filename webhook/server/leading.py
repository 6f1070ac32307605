"""The server's leader-only work, run by the one replica holding its Lease (``runtime.leader``,
client-go's rules): the PlacementPolicy status writer (policies from the cluster) and the
background audit (``--audit-interval``). Admission never depends on the Lease; a replica that
loses it stops this work and stands for it again."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from webhook.cluster.client import Client
from webhook.runtime.leader import LeaderElectionConfig, LeaderElector

__all__ = ["Work", "lead"]

log = logging.getLogger(__name__)

# One piece of leader-only work: it runs until the event (the Lease lost) is set.
Work = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


async def lead(client: Client, lease: LeaderElectionConfig, works: Mapping[str, Work], *,
               stand_again: float = 1.0) -> None:
    """Run ``works`` side by side while holding ``lease``; after losing it (or when one of them
    fails, which stops the others), stand again. Cancelled, it releases the Lease."""
    named = ", ".join(works)
    while True:
        elector = LeaderElector(client, lease)

        async def work(lost: asyncio.Event) -> None:
            log.info(f"leading ({named}) as the holder of lease {elector.describe}")
            async with asyncio.TaskGroup() as group:
                for name, each in works.items():
                    group.create_task(each(lost), name=name)

        try:
            await elector.run(work)
        except Exception:  # noqa: BLE001 - only the leader-only work depends on the Lease: stand again
            log.exception(f"the leader-only work ({named}) failed; standing for lease {elector.describe} again")
        else:
            log.info(f"no longer leading ({named}): lease {elector.describe} lost; standing again")
        await asyncio.sleep(stand_again)
