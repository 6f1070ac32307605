"""Discovery of the group-versions that differ by release: the Eviction and the PodDisruptionBudget."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.kit.envtest import free_port
from tests.kit.fakeapi import FakeApiServer
from webhook.cluster import discovery
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig


def ask(version: str, question: Callable[[Client], Awaitable[str | None]]) -> str | None:
    async def run() -> str | None:
        async with FakeApiServer(version) as api:
            client = Client(ClusterConfig(api.url), request_timeout=2.0)
            try:
                return await question(client)
            finally:
                await client.close()

    return asyncio.run(run())


@pytest.mark.parametrize(("version", "expected"), [("1.31.0", "policy/v1"), ("1.21.0", "policy/v1beta1")])
def test_the_eviction_version_comes_from_discovery(version: str, expected: str) -> None:
    assert ask(version, discovery.eviction_version) == expected


@pytest.mark.parametrize(("version", "expected"), [("1.31.0", "policy/v1"), ("1.20.0", "policy/v1beta1")])
def test_the_pdb_version_comes_from_discovery(version: str, expected: str) -> None:
    assert ask(version, discovery.pdb_group_version) == expected


def test_an_api_server_that_does_not_answer_gets_the_eviction_every_server_accepts() -> None:
    async def run() -> str:
        client = Client(ClusterConfig(f"http://127.0.0.1:{free_port()}"), request_timeout=2.0, log_failures=False)
        try:
            return await discovery.eviction_version(client)
        finally:
            await client.close()

    assert asyncio.run(run()) == discovery.EVICTION_FALLBACK == "policy/v1beta1"


def served(version: str, wanted: list[tuple[str, str, str]], **options: Any) -> list[Any]:
    """``discovery.served_kinds`` asked of a fake API server of ``version``; ``forbid``: a
    regex of discovery paths answered 403."""
    forbid = options.pop("forbid", None)

    async def run() -> list[Any]:
        async with FakeApiServer(version, **options) as api:
            if forbid:
                api.fail_next("GET", forbid, 403, times=10)
            client = Client(ClusterConfig(api.url), request_timeout=2.0)
            try:
                return await discovery.served_kinds(client, wanted)
            finally:
                await client.close()

    return asyncio.run(run())


CRON_JOB = ("batch", "CronJob", "v1")


@pytest.mark.parametrize(("version", "expected"), [
    ("1.20.2", "batch/v1beta1"),  # batch/v1 is served for Jobs alone
    ("1.21.0", "batch/v1"),  # both served: the version asked for first
    ("1.31.0", "batch/v1"),
])
def test_a_cron_job_is_listed_where_the_server_serves_it(version: str, expected: str) -> None:
    (found,) = served(version, [CRON_JOB])
    assert isinstance(found, discovery.ServedKind)
    assert (found.api_version, found.resource, found.namespaced) == (expected, "cronjobs", True)
    assert found.path == f"/apis/{expected}/cronjobs" and found.shown() == "cronjobs.batch"


def test_a_job_and_a_pod_are_found_in_their_groups() -> None:
    job, pod = served("1.20.2", [("batch", "Job", "v1"), ("", "Pod", "v1")])
    assert isinstance(job, discovery.ServedKind) and job.path == "/apis/batch/v1/jobs"
    assert isinstance(pod, discovery.ServedKind) and pod.path == "/api/v1/pods"


def test_a_custom_kind_is_served_only_while_its_crd_is_installed() -> None:
    vm = ("kubevirt.io", "VirtualMachine", "v1")
    (installed,) = served("1.31.0", [vm], crds=("VirtualMachine",))
    assert isinstance(installed, discovery.ServedKind) and installed.path == "/apis/kubevirt.io/v1/virtualmachines"
    # Its group served (another kind's CRD installed), the kind itself not: as not served.
    missing, group_missing = served("1.31.0", [vm, ("vm.novasphere.dev", "Wukong", "v1alpha1")],
                                    crds=("VirtualMachineInstance",))
    assert missing == discovery.Unlisted("kubevirt.io", "VirtualMachine", discovery.NOT_SERVED)
    assert group_missing == discovery.Unlisted("vm.novasphere.dev", "Wukong", discovery.NOT_SERVED)
    assert not missing.refused and missing.shown() == "kubevirt.io/VirtualMachine"


def test_a_group_version_whose_discovery_is_refused_is_unlisted_with_the_reason() -> None:
    (found,) = served("1.31.0", [("kubevirt.io", "VirtualMachine", "v1")], crds=("VirtualMachine",),
                      forbid=r"^/apis/kubevirt\.io/v1$")
    assert isinstance(found, discovery.Unlisted) and found.refused
    assert found.reason == "discovery of kubevirt.io/v1 failed: 403 Forbidden"
