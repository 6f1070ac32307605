"""End to end through a real kube-apiserver: the webhook registered with the chart's own
MutatingWebhookConfiguration (url client config + caBundle), objects created with the kubernetes
client. Needs KUBEBUILDER_ASSETS (see docs/install.md); skipped with that message otherwise.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.kit.e2e_workloads import RESOURCES, placed, untouched, workload
from tests.kit.envtest import stopped
from webhook import ANNOTATION_SKIP

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize("kind", sorted(RESOURCES))
def test_created_workloads_are_stored_with_the_policy_placement(cluster: Any, namespace: str, kind: str) -> None:
    cluster.create(namespace, workload(kind, "created"))
    assert placed(cluster.get(namespace, kind, "created"))


@pytest.mark.parametrize("kind", sorted(RESOURCES))
def test_a_server_dry_run_returns_the_mutated_object_and_stores_nothing(cluster: Any, namespace: str, kind: str) -> None:
    answer = cluster.create(namespace, workload(kind, "dry"), dry_run=True)
    assert placed(answer)
    assert not cluster.exists(namespace, kind, "dry")


def _created_without_placement(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    """A Deployment stored before any placement: created with the opt-out annotation."""
    cluster.create(namespace, workload("Deployment", name, skip=True))
    stored: dict[str, Any] = cluster.get(namespace, "Deployment", name)
    assert untouched(stored)
    return stored


def test_an_update_of_an_existing_deployment_gets_the_placement_added(cluster: Any, namespace: str) -> None:
    stored = _created_without_placement(cluster, namespace, "existing")
    del stored["metadata"]["annotations"][ANNOTATION_SKIP]
    cluster.replace(namespace, stored)
    assert placed(cluster.get(namespace, "Deployment", "existing"))


def test_a_second_update_changes_nothing_further(cluster: Any, namespace: str) -> None:
    cluster.create(namespace, workload("Deployment", "twice"))
    first = cluster.get(namespace, "Deployment", "twice")
    first["metadata"].setdefault("labels", {})["touched"] = "yes"
    cluster.replace(namespace, first)
    second = cluster.get(namespace, "Deployment", "twice")
    assert second["spec"] == first["spec"]
    # The spec did not change, so the API server did not bump the generation either.
    assert second["metadata"]["generation"] == first["metadata"]["generation"]
    assert second["metadata"]["annotations"] == first["metadata"]["annotations"]


def test_the_skip_annotation_leaves_the_object_alone(cluster: Any, namespace: str) -> None:
    cluster.create(namespace, workload("Deployment", "opted-out", skip=True))
    assert untouched(cluster.get(namespace, "Deployment", "opted-out"))


@pytest.mark.parametrize("kind", sorted(RESOURCES))
def test_a_namespace_labelled_skip_is_never_sent_to_the_webhook(cluster: Any, skipped_namespace: str, kind: str) -> None:
    cluster.create(skipped_namespace, workload(kind, "in-skipped-namespace"))
    assert untouched(cluster.get(skipped_namespace, kind, "in-skipped-namespace"))


def test_with_the_webhook_stopped_failure_policy_ignore_lets_creates_through(
    cluster: Any, namespace: str, webhook: Any, wait_mutating: Callable[[Any, str], None]
) -> None:
    with stopped(webhook):
        cluster.create(namespace, workload("Deployment", "while-down"))
        assert untouched(cluster.get(namespace, "Deployment", "while-down"))
    wait_mutating(cluster, namespace)
