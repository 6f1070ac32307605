"""The rebalancer's fixtures: a v1.20 fake API server with four interruptible replicas on an
on-demand node beside two spot nodes, under a budget of ``maxUnavailable: 1``; a fake clock; a
stub ``plan`` that says what a test tells it to; builders of decisions and pods."""
from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.kit.clock import FakeClock
from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import pdb, pod
from webhook import PREFIX
from webhook.rebalance import decide
from webhook.rebalance.model import Candidate, Decision, Owner, Verdict, Why

CAPACITY = "node.kubernetes.io/capacity"  # the generic provider's label
ON_DEMAND_NODE, SPOT_NODES = "od-1", ("spot-1", "spot-2")
INTERRUPTIBLE = f"{PREFIX}interruptible"


def capacity_node(name: str, kind: str, *, unschedulable: bool = False) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {CAPACITY: kind, "kubernetes.io/hostname": name}},
            "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def owner_ref(uid: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"web-{uid}", "uid": uid, "controller": True}


def web(name: str, *, node: str = ON_DEMAND_NODE, owner: str = "rs-1", ready: bool = True,
        app: str = "web") -> dict[str, Any]:
    """An interruptible replica of the web ReplicaSet (``node`` empty: not bound yet); another
    ``app`` is out of the web budget's reach."""
    made = pod(name, "shop", node_name=node, labels={"app": app}, owner=owner_ref(owner), ready=ready,
               phase="Running" if node else "Pending")
    made["metadata"]["annotations"] = {INTERRUPTIBLE: "true"}
    made["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    return made


def replica_set(uid: str, replicas: int) -> dict[str, Any]:
    """The ReplicaSet ``web-<uid>`` (its uid as given), whose scale the disruption controller reads."""
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"web-{uid}", "namespace": "shop", "uid": uid},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
            "status": {"replicas": replicas, "readyReplicas": replicas}}


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer("1.20.2", bookmark_interval=0.2, pdb_controller=True) as srv:
        srv.load([capacity_node(ON_DEMAND_NODE, "on-demand"), *(capacity_node(n, "spot") for n in SPOT_NODES),
                  replica_set("rs-1", 4), *(web(f"web-{i}") for i in range(1, 5)),
                  pdb("web", "shop", match={"app": "web"}, max_unavailable=1, api_version="policy/v1beta1")])
        srv.sync_pdbs()
        yield srv


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def move(server: FakeApiServer, name: str, *, to: str, owner: str = "rs-1", verdict: Verdict = Verdict.MOVE,
         ties: frozenset[str] = frozenset(), now: int = 0, there: int = 100) -> Decision:
    """The decision to move the pod ``shop/name`` (as the server holds it) to ``to``."""
    found = server.get_object("Pod", name, "shop")
    assert found is not None, name
    candidate = Candidate("shop", name, found["metadata"]["uid"], found["spec"]["nodeName"],
                          Owner("ReplicaSet", f"web-{owner}", owner), Why.INTERRUPTIBLE_ON_DEMAND)
    return Decision(candidate, verdict, "interruptible pod on on-demand while spot nodes exist", target=to,
                    score_now=now, score_there=there, ties=ties)


@dataclass
class Stub:
    """``decide.plan`` as a test says: ``decisions``, an owner backed off skipped as plan skips it;
    every call recorded as (world, settings, backoff)."""

    decisions: list[Decision]
    fail_once: bool = False
    calls: list[tuple[decide.World, decide.Settings, frozenset[str]]] = field(default_factory=list)

    def __call__(self, world: decide.World, settings: decide.Settings, *,
                 backoff: frozenset[str] = frozenset()) -> list[Decision]:
        self.calls.append((world, settings, backoff))
        if self.fail_once:
            self.fail_once = False
            raise RuntimeError("a bug in plan")
        return [Decision(d.candidate, Verdict.SKIP, "backed off") if d.candidate.owner.uid in backoff else d
                for d in self.decisions]


def events(server: FakeApiServer, reason: str) -> list[dict[str, Any]]:
    return [e for ns in ("default", "shop") for e in server.list_objects("Event", ns) if e.get("reason") == reason]


def evictions(server: FakeApiServer) -> list[str]:
    return [r.path.split("/")[-2] for r in server.requests if r.method == "POST" and r.path.endswith("/eviction")]
