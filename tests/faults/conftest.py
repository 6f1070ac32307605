"""The fault tier: things killed on a real control plane, and nothing lost.

Every test in this folder is marked ``faults`` (``pytest -m faults`` runs the tier alone); it runs
with the rest of the suite by default, as CI runs everything. The tier has a control plane of its
own (etcd and kube-apiserver, from KUBEBUILDER_ASSETS as in tests/e2e), so restarting its API
server never disturbs the e2e tier's. Its webhook keeps a cluster view and is registered twice
under the chart's own configuration: once with ``failurePolicy: Fail`` for namespaces labelled
``FAILURE_POLICY_LABEL=Fail``, once with ``Ignore`` for ``=Ignore``, so a test chooses the policy
by its namespace and no configuration changes while the API server caches it.

kube-scheduler and kube-controller-manager, for the tests that need them, run without leader
election (``Component``): with it they exit once the API server has been gone for longer than
their renew deadline (about 10 s), which every API server restart here is.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.e2e_workloads import POLICY_YAML
from tests.kit.envtest import (
    AUDIT_WRITES,
    SKIP_REASON,
    CONTROLLER_MANAGER,
    SCHEDULER,
    Cluster,
    ControllerManager,
    ControlPlane,
    Scheduler,
    Webhook,
    find_assets,
    find_binary,
)
from tests.kit.faults import FIGURES, TEAM_POLICY_YAML, VIEW_MAX_AGE, fault_namespace, registered, wait_for_mutation
from tests.kit.writers import USERS as WRITER_USERS

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder ``faults`` (the hook sees the whole session's items)."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.faults)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The figures the tier's tests reported, in every run's summary (CI runs without ``-s``)."""
    if FIGURES:
        terminalreporter.section("fault tier figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def fault_assets() -> Path:
    folder = find_assets()
    if folder is None:
        pytest.skip(SKIP_REASON)
    return folder


@pytest.fixture(scope="session")
def control_plane(fault_assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver for this tier alone; ``apiserver_stopped(grace=...)`` restarts it.
    Its audit log records every write with its user; the writer replicas have users of their own."""
    plane = ControlPlane(assets=fault_assets, workdir=tmp_path_factory.mktemp("faults-envtest"), users=WRITER_USERS,
                         audit_policy=AUDIT_WRITES)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The admin kubeconfig (``system:masters``), as a process outside the cluster is given it."""
    return control_plane.write_kubeconfig(tmp_path_factory.mktemp("faults-kubeconfig") / "admin.kubeconfig")


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[Any]:
    """A kubernetes ``ApiClient`` with the admin token (a new one after a restart is not needed:
    the API server keeps its address and certificates)."""
    client = control_plane.api_client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def cluster(api_client: Any) -> Cluster:
    return Cluster(api_client)


@pytest.fixture(scope="session")
def webhook(cluster: Cluster, kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    """``placement-webhook serve`` with its cluster view on, registered with Fail and with Ignore;
    serving when a test starts (a test that stops it starts it again)."""
    workdir = tmp_path_factory.mktemp("faults-webhook")
    policies = workdir / "policies"
    policies.mkdir()
    (policies / "e2e-placement.yaml").write_text(POLICY_YAML)
    (policies / "faults-team.yaml").write_text(TEAM_POLICY_YAML)
    server = Webhook(workdir=workdir, policies=policies, kubeconfig=kubeconfig, view_max_age=VIEW_MAX_AGE)
    server.start()
    try:
        for policy in ("Fail", "Ignore"):
            cluster.admission.create_mutating_webhook_configuration(registered(server, policy))
            wait_for_mutation(cluster, fault_namespace(cluster, failure_policy=policy))
        yield server
    finally:
        server.stop()


@pytest.fixture
def serving(webhook: Webhook) -> Webhook:
    """The session's webhook, started again if an earlier test left it stopped."""
    if webhook.process is None or not webhook.process.running():
        webhook.stop()
        webhook.start()
    return webhook


def _component_binary(assets: Path, name: str) -> None:
    if find_binary(assets, name) is None:
        pytest.skip(f"{name} is missing from KUBEBUILDER_ASSETS ({assets}): copy the {name} binary of the same "
                    "Kubernetes release next to etcd and kube-apiserver (hack/envtest-assets.sh with "
                    "PLACEMENT_ENVTEST_FULL=1 builds it)")


@pytest.fixture(scope="session")
def scheduler(fault_assets: Path, control_plane: ControlPlane,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scheduler]:
    """kube-scheduler without leader election, so it survives an API server restart."""
    _component_binary(fault_assets, SCHEDULER)
    server = Scheduler(control_plane=control_plane, workdir=tmp_path_factory.mktemp("faults-scheduler"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def controller_manager(fault_assets: Path, control_plane: ControlPlane,
                       tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerManager]:
    """kube-controller-manager (deployment, replicaset, disruption, garbage collector) without
    leader election, so it survives an API server restart."""
    _component_binary(fault_assets, CONTROLLER_MANAGER)
    manager = ControllerManager(control_plane=control_plane, workdir=tmp_path_factory.mktemp("faults-controller-manager"))
    try:
        manager.start()
        yield manager
    finally:
        manager.stop()
