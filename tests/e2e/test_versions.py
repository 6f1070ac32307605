"""What differs by Kubernetes release, asserted by the release the real API server reports.

v1.20 serves neither the policy/v1 Eviction (v1.22 on) nor policy/v1 PodDisruptionBudgets (v1.21
on): the spot controller and the cluster snapshot find the version by discovery, and these tests
hold both discoveries, and the refusal that makes them necessary, to the real server.
"""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.kit.envtest import ControlPlane
from webhook.cluster import client as api
from webhook.cluster import config as cluster_config
from webhook.cluster import discovery

pytestmark = [pytest.mark.e2e]


def _with_client(control_plane: ControlPlane, tmp_path: Path, work: Any) -> Any:
    async def run() -> Any:
        client = api.Client(cluster_config.load(str(control_plane.write_kubeconfig(tmp_path / "kubeconfig"))))
        try:
            return await work(client)
        finally:
            await client.close()

    return asyncio.run(run())


def test_the_eviction_version_is_the_one_the_server_serves(control_plane: ControlPlane, tmp_path: Path) -> None:
    expected = "policy/v1" if control_plane.server_version() >= (1, 22) else "policy/v1beta1"
    assert _with_client(control_plane, tmp_path, discovery.eviction_version) == expected


def test_the_pdb_version_is_the_one_the_server_serves(control_plane: ControlPlane, tmp_path: Path) -> None:
    expected = "policy/v1" if control_plane.server_version() >= (1, 21) else "policy/v1beta1"
    assert _with_client(control_plane, tmp_path, discovery.pdb_group_version) == expected


def test_before_1_22_an_eviction_naming_policy_v1_is_refused(control_plane: ControlPlane, tmp_path: Path) -> None:
    async def evict(client: api.Client) -> dict[str, int]:
        namespace = f"e2e-{uuid.uuid4().hex[:8]}"
        await client.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        statuses: dict[str, int] = {}
        try:
            for version in ("policy/v1", "policy/v1beta1"):
                body = {"apiVersion": version, "kind": "Eviction", "metadata": {"name": "absent", "namespace": namespace}}
                try:
                    await client.request("POST", f"/api/v1/namespaces/{namespace}/pods/absent/eviction", body)
                    statuses[version] = 201
                except api.ApiError as exc:
                    statuses[version] = exc.status
        finally:
            await client.request("DELETE", f"/api/v1/namespaces/{namespace}")
        return statuses

    statuses = _with_client(control_plane, tmp_path, evict)
    # A served version gets as far as looking the pod up (404); an unserved one is a bad request.
    v1 = 404 if control_plane.server_version() >= (1, 22) else 400
    assert statuses == {"policy/v1": v1, "policy/v1beta1": 404}
