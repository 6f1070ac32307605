"""The server's background audit against admission: /mutate latency while a real audit runs.

    python bench/audit_server_bench.py [--nodes 1000] [--workloads 2000] [--pods 30000]

The admission app (the shipped policies, no TLS: the measure is the event loop's, not the
handshake's) serves in this process; one client sends reviews one after another, first with no
audit (the baseline), then while ``BackgroundAudit`` runs one pass: the audit bench's synthetic
cluster as its snapshot, ``SnapshotAudit`` (the real Auditor) in its worker thread, its reports
written to a stand-in API server that answers at once (yielding to the loop as a request does). It prints the median, 99th percentile and
slowest review of each phase, and how long the pass took.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from collections.abc import AsyncIterator
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.audit_bench import build
from tests.kit.reviews import admission_review
from tests.kit.workloads import deployment
from webhook.audit.background import BackgroundAudit, SnapshotAudit
from webhook.audit.writer import ReportWriter
from webhook.cluster.config import ClusterConfig
from webhook.cluster.snapshot import Snapshot
from webhook.kube.kinds import BUILTIN
from webhook.server import app
from webhook.server.config import ServerConfig


class Reports:
    """A stand-in for the API server's report endpoints that answers at once but, as a real
    request does, gives the event loop its turn on every call; it stores what it is given."""

    def __init__(self) -> None:
        self.config = ClusterConfig(host="https://unused")
        self.stored: dict[str, dict[str, Any]] = {}

    async def list_pages(self, path: str, params: Any = None) -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(0)
        cluster = path.endswith("/clusterpolicyreports")
        yield {"items": [o for p, o in self.stored.items() if ("/namespaces/" not in p) == cluster]}

    async def create(self, path: str, body: dict[str, Any], *, field_manager: str = "") -> dict[str, Any]:
        await asyncio.sleep(0)
        self.stored[f"{path}/{body['metadata']['name']}"] = body
        return body

    async def replace(self, path: str, body: dict[str, Any], *, field_manager: str = "") -> dict[str, Any]:
        await asyncio.sleep(0)
        self.stored[path] = body
        return body

    async def request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self.stored.pop(path, {})


def _shown(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"{len(ordered)} reviews, median {statistics.median(ordered) * 1000:.2f} ms, "
            f"p99 {p99 * 1000:.2f} ms, max {ordered[-1] * 1000:.2f} ms")


async def _reviews(client: Any, *, until: asyncio.Future[Any] | None = None, count: int = 500) -> list[float]:
    body = admission_review(deployment("web"))
    took: list[float] = []
    while (until is None and len(took) < count) or (until is not None and not until.done()):
        started = time.perf_counter()
        resp = await client.post("/mutate", json=body)
        await resp.read()
        took.append(time.perf_counter() - started)
    return took


async def run(nodes: int, workloads: int, pods: int) -> None:
    snapshot = Snapshot(objects=build(nodes, workloads, pods), server_version=(1, 31), match_label_keys=True)
    config = ServerConfig(policies=(ROOT / "policies",), tls_cert=Path("unused"), tls_key=Path("unused"),
                          reload_interval=3600)
    state = app.State(config)
    await state.reload_policies()
    policies = state.policy_set()

    async def read(_: ClusterConfig) -> Snapshot | str:
        return snapshot

    audit = BackgroundAudit(ReportWriter(Reports()), where=ClusterConfig(host="https://unused"),  # type: ignore[arg-type]
                            policies=lambda: policies, audit=SnapshotAudit(BUILTIN), sink=state.metrics, read=read)
    async with TestClient(TestServer(app.make_app(state))) as client:
        await _reviews(client, count=200)  # warm up
        print(f"no audit:     {_shown(await _reviews(client))}")
        started = time.perf_counter()
        passing = asyncio.ensure_future(audit.once())
        during = await _reviews(client, until=passing)
        outcome = passing.result()
        print(f"during audit: {_shown(during)}")
        print(f"the pass: {outcome.result}, {len(outcome.results)} results, {time.perf_counter() - started:.1f} s "
              f"({nodes} nodes, {workloads} workloads, {pods} pods)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=30000)
    args = parser.parse_args(argv)
    asyncio.run(run(args.nodes, args.workloads, args.pods))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
