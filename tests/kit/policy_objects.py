"""PlacementPolicy objects as the API server hands them out (metadata it owns, a generation, a
status), and a client writing them through the fake API server's HTTP API, so that its
custom-resource rules (generation, the status subresource) apply as a real server's do."""
from __future__ import annotations

import copy
from typing import Any

from webhook import API_VERSION, POLICY_KIND
from webhook.cluster.client import Client
from webhook.server.policies import PATH

SSD_SPEC: dict[str, Any] = {"match": {"kinds": ["Deployment"]}, "placement": {"nodeSelector": {"disk": "ssd"}}}


def policy_object(name: str, spec: dict[str, Any] | None = None, *, generation: int = 1,
                  status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stored PlacementPolicy: the spec as given, with the server's metadata around it."""
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION, "kind": POLICY_KIND,
        "metadata": {"name": name, "generation": generation, "uid": f"uid-{name}", "resourceVersion": "17",
                     "creationTimestamp": "2024-01-01T00:00:00Z",
                     "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
        "spec": copy.deepcopy(SSD_SPEC if spec is None else spec),
    }
    if status is not None:
        obj["status"] = status
    return obj


def manifest(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A PlacementPolicy as a user writes it, for ``kubectl apply``."""
    return {"apiVersion": API_VERSION, "kind": POLICY_KIND, "metadata": {"name": name},
            "spec": copy.deepcopy(SSD_SPEC if spec is None else spec)}


async def create(client: Client, name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return await client.create(PATH, manifest(name, spec))


async def edit(client: Client, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Replace the spec (a merge patch sets the whole spec: null the keys that go)."""
    current = await client.get(f"{PATH}/{name}")
    gone = {key: None for key in current.get("spec") or {} if key not in spec}
    return await client.patch(f"{PATH}/{name}", {"spec": {**gone, **spec}}, kind="merge")


async def delete(client: Client, name: str) -> None:
    await client.request("DELETE", f"{PATH}/{name}")
