"""Fixtures of the end-to-end tier: a control plane, the webhook registered in it, namespaces.

Everything that needs the binaries hangs off ``assets``, which skips with a message saying to set
KUBEBUILDER_ASSETS when they are absent; the offline checks of this folder run everywhere.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.e2e_workloads import POLICY_YAML, RESOURCES, placed, workload
from tests.kit.envtest import (
    SKIP_REASON,
    VM_CRD,
    Cluster,
    ControlPlane,
    Scheduler,
    Webhook,
    find_assets,
    find_scheduler,
    scheduler_skip_reason,
    wait_until,
    webhook_configuration,
)
from webhook import ANNOTATION_SKIP


@pytest.fixture(scope="session")
def assets() -> Path:
    folder = find_assets()
    if folder is None:
        pytest.skip(SKIP_REASON)
    return folder


@pytest.fixture(scope="session")
def control_plane(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(assets=assets, workdir=tmp_path_factory.mktemp("envtest"))
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> Iterator[Any]:
    client = control_plane.api_client()
    yield client
    client.close()


def _install_vm_crd(cluster: Cluster) -> None:
    cluster.crds.create_custom_resource_definition(VM_CRD)

    def established() -> bool:
        conditions = cluster.crds.read_custom_resource_definition(VM_CRD["metadata"]["name"]).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_until(established, what="the VirtualMachine CRD to be established")


def wait_for_mutation(cluster: Cluster, namespace: str) -> None:
    """The API server loads webhook configurations asynchronously: dry-run until they bite."""

    def mutated() -> bool:
        return all(placed(cluster.create(namespace, workload(kind, "warm-up"), dry_run=True)) for kind in RESOURCES)

    wait_until(mutated, what="the API server to call the webhook", timeout=60, interval=0.5)


@pytest.fixture(scope="session")
def cluster(api: Any) -> Cluster:
    return Cluster(api)


@pytest.fixture(scope="session")
def webhook(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    workdir = tmp_path_factory.mktemp("webhook")
    policies = workdir / "policies"
    policies.mkdir()
    (policies / "e2e-placement.yaml").write_text(POLICY_YAML)
    server = Webhook(workdir=workdir, policies=policies)
    server.start()
    try:
        _install_vm_crd(cluster)
        cluster.admission.create_mutating_webhook_configuration(
            webhook_configuration(url=server.url, ca_bundle=server.ca_bundle)
        )
        wait_for_mutation(cluster, cluster.create_namespace())
        yield server
    finally:
        server.stop()


@pytest.fixture
def namespace(cluster: Cluster, webhook: Webhook) -> str:
    return cluster.create_namespace()


@pytest.fixture
def skipped_namespace(cluster: Cluster, webhook: Webhook) -> str:
    return cluster.create_namespace(labels={ANNOTATION_SKIP: "true"})


@pytest.fixture
def wait_mutating() -> Callable[[Cluster, str], None]:
    return wait_for_mutation


# --- the real kube-scheduler (test_explain_scheduler) --------------------------------------------


@pytest.fixture(scope="session")
def scheduler_binary(assets: Path) -> Path:
    """``kube-scheduler`` in KUBEBUILDER_ASSETS; a skip saying so when it is not there."""
    binary = find_scheduler(assets)
    if binary is None:
        pytest.skip(scheduler_skip_reason(assets))
    return binary


@pytest.fixture(scope="session")
def scheduler(scheduler_binary: Path, control_plane: ControlPlane,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scheduler]:
    """kube-scheduler against the session's control plane. ``scheduler_binary`` comes first, so
    a missing binary skips before the control plane is started for nothing."""
    server = Scheduler(control_plane=control_plane, workdir=tmp_path_factory.mktemp("kube-scheduler"))
    try:
        server.start()
        yield server
    finally:
        server.stop()
