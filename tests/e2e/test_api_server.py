"""End to end through a real kube-apiserver: the webhook registered with the chart's own
MutatingWebhookConfiguration (url client config + caBundle), objects created with the kubernetes
client. Needs KUBEBUILDER_ASSETS (see docs/install.md); skipped with that message otherwise.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.kit.e2e_workloads import (
    LATER_POLICY_NAME,
    LATER_POLICY_YAML,
    RESOURCES,
    RESTARTED_AT,
    placed,
    tolerates_later,
    untouched,
    workload,
)
from tests.kit.envtest import stopped, wait_until
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


def test_an_existing_deployment_gets_the_placement_at_its_next_rollout(cluster: Any, namespace: str) -> None:
    stored = _created_without_placement(cluster, namespace, "existing")
    del stored["metadata"]["annotations"][ANNOTATION_SKIP]
    cluster.replace(namespace, stored)
    opted_in = cluster.get(namespace, "Deployment", "existing")
    assert opted_in["spec"]["template"] == stored["spec"]["template"], "dropping the skip rolled no pod"
    opted_in["spec"]["template"]["metadata"]["annotations"] = {RESTARTED_AT: "2026-11-23T10:00:00Z"}
    cluster.replace(namespace, opted_in)  # kubectl rollout restart
    assert placed(cluster.get(namespace, "Deployment", "existing"))


@contextmanager
def policy_added(cluster: Any, webhook: Any, name: str, text: str) -> Iterator[None]:
    """``text`` in the webhook's policy folder, in force (a dry-run create shows it) until the
    block ends; then removed, and out of force again, for the tests that follow."""
    path = webhook.policies / f"{name}.yaml"
    probe = cluster.create_namespace()

    def in_force() -> bool:
        return tolerates_later(cluster.create(probe, workload("Deployment", "probe"), dry_run=True))

    path.write_text(text)
    try:
        wait_until(in_force, what=f"the webhook to load {name}", timeout=60, interval=0.5)
        yield
    finally:
        path.unlink()
        wait_until(lambda: not in_force(), what=f"the webhook to drop {name}", timeout=60, interval=0.5)


def _template_bytes(obj: dict[str, Any]) -> str:
    """The pod template as the API server served it, in its own field order."""
    return json.dumps(obj["spec"]["template"], separators=(",", ":"))


def test_after_a_policy_change_a_scale_and_an_annotation_leave_the_pod_template_byte_for_byte(
    cluster: Any, namespace: str, webhook: Any
) -> None:
    cluster.create(namespace, workload("Deployment", "steady"))
    created = cluster.get(namespace, "Deployment", "steady")
    assert placed(created)
    with policy_added(cluster, webhook, LATER_POLICY_NAME, LATER_POLICY_YAML):
        scaled = copy.deepcopy(created)
        scaled["spec"]["replicas"] = 5
        cluster.replace(namespace, scaled)  # a GitOps re-sync of a new replica count
        annotate = {"metadata": {"annotations": {"team.example.com/owner": "web"}}}  # kubectl annotate: a merge patch
        group, version, plural = RESOURCES["Deployment"]
        cluster.objects.patch_namespaced_custom_object(group, version, namespace, plural, "steady", annotate)
        after = cluster.get(namespace, "Deployment", "steady")
    assert _template_bytes(after) == _template_bytes(created)
    assert not tolerates_later(after)
    assert after["spec"]["replicas"] == 5 and after["metadata"]["annotations"]["team.example.com/owner"] == "web"
    # Each update bumps the generation, the annotation too: the Deployment strategy counts a
    # change of spec or annotations (PrepareForUpdate, pkg/registry/apps/deployment/strategy.go).
    # What starts a rollout is the template, and it did not change.
    assert after["metadata"]["generation"] == created["metadata"]["generation"] + 2


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
