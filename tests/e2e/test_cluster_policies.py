"""PlacementPolicies as objects on a real kube-apiserver: ``placement-webhook serve --policies-from
cluster`` with the chart's CRD installed, its mutating webhook and the chart's validating webhook
registered. A policy applied is in force within two seconds (measured from the create to the first
dry-run create that carries it), its status says Ready at its generation, a policy lint refuses is
refused at apply with lint's message, an edit is in force within two seconds, and a broken policy
that got in while the validating webhook was away is left out while the others serve.

The webhook of this module selects only namespaces labelled ``LABEL``; those carry the
``placement.novasphere.dev/skip`` label too, so the session's file-based webhook never touches
them. Needs KUBEBUILDER_ASSETS (see docs/install.md); skipped with that message otherwise.
"""
from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit.e2e_workloads import pod_spec, workload
from tests.kit.envtest import ControlPlane, Webhook, wait_until, webhook_configuration
from webhook import ANNOTATION_SKIP, API_GROUP
from webhook.policy import crd

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
CHART_CRD = ROOT / "charts" / "placement-webhook" / "crds" / "placementpolicies.yaml"
LABEL = "e2e.novasphere.dev/cluster-policies"
POOL = "e2e.novasphere.dev/pp-pool"
IN_FORCE_WITHIN = 2.0  # seconds from a write to the first review that has it in force
NAME = "e2e-cluster-policies"
VALIDATOR = "validate-policy.placement.novasphere.dev"


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{API_GROUP}/{crd.VERSION}", "kind": crd.KIND, "metadata": {"name": name}, "spec": spec}


def _pool(value: str, *, kinds: list[str] | None = None, names: list[str] | None = None) -> dict[str, Any]:
    match: dict[str, Any] = {"kinds": kinds or ["Deployment"]}
    if names:
        match["names"] = names
    return {"match": match, "placement": {"nodeSelector": {POOL: value}}}


class Policies:
    """The cluster's PlacementPolicies through the API server, as kubectl writes them."""

    def __init__(self, cluster: Any) -> None:
        self.objects = cluster.objects

    def create(self, policy: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        extra = {"dry_run": "All"} if dry_run else {}
        created: dict[str, Any] = self.objects.create_cluster_custom_object(API_GROUP, crd.VERSION, crd.PLURAL, policy,
                                                                            **extra)
        return created

    def get(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.objects.get_cluster_custom_object(API_GROUP, crd.VERSION, crd.PLURAL, name)
        return found

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = self.objects.patch_cluster_custom_object(API_GROUP, crd.VERSION, crd.PLURAL, name, patch)
        return patched

    def delete(self, name: str) -> None:
        self.objects.delete_cluster_custom_object(API_GROUP, crd.VERSION, crd.PLURAL, name)

    def refusal(self, policy: dict[str, Any]) -> dict[str, Any]:
        """The API server's Status refusing ``policy``; fails when it is accepted."""
        from kubernetes.client.exceptions import ApiException

        with pytest.raises(ApiException) as refused:
            self.create(policy)
        status: dict[str, Any] = json.loads(refused.value.body)
        return status

    def ready(self, name: str) -> dict[str, Any]:
        conditions = (self.get(name).get("status") or {}).get("conditions") or [{}]
        return dict(conditions[0])


def _crd_state(cluster: Any) -> str:
    from kubernetes.client.exceptions import ApiException

    try:
        found = cluster.crds.read_custom_resource_definition(crd.NAME)
    except ApiException as exc:
        if exc.status == 404:
            return "gone"
        raise
    conditions = found.status.conditions or []
    established = any(c.type == "Established" and c.status == "True" for c in conditions)
    return "established" if established and not found.metadata.deletion_timestamp else "other"


@pytest.fixture(scope="module")
def installed(cluster: Any) -> Iterator[None]:
    """The chart's CRD file, created as Helm creates crds/, established; deleted afterwards."""
    wait_until(lambda: _crd_state(cluster) == "gone", what="an earlier PlacementPolicy CRD to be deleted")
    cluster.crds.create_custom_resource_definition(yaml.safe_load(CHART_CRD.read_text()))
    try:
        wait_until(lambda: _crd_state(cluster) == "established", what="the PlacementPolicy CRD to be established")
        yield
    finally:
        cluster.crds.delete_custom_resource_definition(crd.NAME)
        wait_until(lambda: _crd_state(cluster) == "gone", what="the PlacementPolicy CRD to be deleted")


def _configurations(server: Webhook) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chart's mutating configuration selecting this module's namespaces, and its validating one."""
    mutating = webhook_configuration(url=server.url, ca_bundle=server.ca_bundle)
    mutating["metadata"] = {"name": NAME}
    (hook,) = mutating["webhooks"]
    hook["name"] = "cluster-policies.placement.novasphere.dev"
    hook["namespaceSelector"] = {"matchLabels": {LABEL: "true"}}
    validating = webhook_configuration(url=server.url, ca_bundle=server.ca_bundle, kind="ValidatingWebhookConfiguration",
                                       values={"policies": {"from": "cluster"}})
    validating["metadata"] = {"name": NAME}
    assert validating["webhooks"][0]["clientConfig"]["url"] == server.validate_url
    return mutating, validating


class Module:
    """The webhook under test, a namespace of this module, and how to look at what it admits."""

    def __init__(self, cluster: Any, server: Webhook, namespace: str, validating: dict[str, Any]) -> None:
        self.cluster = cluster
        self.server = server
        self.namespace = namespace
        self.validating = validating
        self.policies = Policies(cluster)

    def node_selector(self, name: str = "probe") -> dict[str, str]:
        created = self.cluster.create(self.namespace, workload("Deployment", name), dry_run=True)
        return dict(pod_spec(created).get("nodeSelector") or {})

    def seconds_until(self, check: Callable[[], bool], *, what: str, started: float) -> float:
        """Seconds from ``started`` until ``check`` holds (polled with dry runs); fails past 15 s."""
        wait_until(check, what=what, timeout=15.0, interval=0.05)
        return time.monotonic() - started


@pytest.fixture(scope="module")
def module(control_plane: ControlPlane, cluster: Any, installed: None,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Module]:
    workdir = tmp_path_factory.mktemp("webhook-cluster-policies")
    server = Webhook(workdir=workdir, policies=None, policies_from="cluster", cluster_view=False,
                     kubeconfig=control_plane.write_kubeconfig(workdir / "kubeconfig"))
    server.start()  # ready once the PlacementPolicies are listed
    mutating, validating = _configurations(server)
    namespace = _unique("e2e-pp")
    cluster.core.create_namespace({"metadata": {"name": namespace, "labels": {LABEL: "true", ANNOTATION_SKIP: "true"}}})
    warm_up = _unique("e2e-pp-warm-up")
    try:
        cluster.admission.create_mutating_webhook_configuration(mutating)
        cluster.admission.create_validating_webhook_configuration(validating)
        here = Module(cluster, server, namespace, validating)
        here.policies.create(_policy(warm_up, _pool("warm-up", names=["warm-up"])))
        # The API server loads webhook configurations asynchronously: dry-run until it calls ours.
        wait_until(lambda: here.node_selector("warm-up") == {POOL: "warm-up"}, what="the API server to call the webhook",
                   timeout=60, interval=0.5)
        yield here
    finally:
        _quietly(lambda: cluster.admission.delete_validating_webhook_configuration(NAME))
        _quietly(lambda: cluster.admission.delete_mutating_webhook_configuration(NAME))
        server.stop()


def _quietly(delete: Callable[[], Any]) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        delete()
    except ApiException as exc:
        if exc.status != 404:
            raise


# --- in force ---------------------------------------------------------------------------------------


def test_a_policy_applied_is_in_force_within_two_seconds_and_ready_at_its_generation(module: Module) -> None:
    name, app = _unique("e2e-pp-blue"), _unique("blue")
    started = time.monotonic()
    created = module.policies.create(_policy(name, _pool("blue", names=[app])))
    took = module.seconds_until(lambda: module.node_selector(app) == {POOL: "blue"}, started=started,
                                what=f"policy {name} in force")
    print(f"\ncreate to in force: {took:.2f} s")
    assert took < IN_FORCE_WITHIN
    generation = created["metadata"]["generation"]
    wait_until(lambda: module.policies.ready(name).get("status") == "True", what=f"{name} Ready", timeout=15)
    status = module.policies.get(name)["status"]
    assert status["observedGeneration"] == generation and status["changedObjects"] == 0
    ready = status["conditions"][0]
    assert (ready["reason"], ready["observedGeneration"]) == ("Loaded", generation)


def test_an_edit_is_in_force_within_two_seconds_and_observed_at_its_new_generation(module: Module) -> None:
    name, app = _unique("e2e-pp-edit"), _unique("edit")
    module.policies.create(_policy(name, _pool("green", names=[app])))
    wait_until(lambda: module.node_selector(app) == {POOL: "green"}, what=f"policy {name} in force", timeout=15,
               interval=0.05)
    started = time.monotonic()
    edited = module.policies.patch(name, {"spec": {"placement": {"nodeSelector": {POOL: "purple"}}}})
    took = module.seconds_until(lambda: module.node_selector(app) == {POOL: "purple"}, started=started,
                                what=f"the edit of {name} in force")
    print(f"\nedit to in force: {took:.2f} s")
    assert took < IN_FORCE_WITHIN
    generation = edited["metadata"]["generation"]
    assert generation == 2
    wait_until(lambda: module.policies.get(name).get("status", {}).get("observedGeneration") == generation,
               what=f"generation {generation} observed", timeout=15)


def test_objects_it_changes_are_counted_in_its_status(module: Module) -> None:
    name, app = _unique("e2e-pp-count"), _unique("count")
    module.policies.create(_policy(name, _pool("counted", names=[app])))
    wait_until(lambda: module.node_selector(app) == {POOL: "counted"}, what=f"policy {name} in force", timeout=15,
               interval=0.05)
    module.cluster.create(module.namespace, workload("Deployment", app))  # a dry run is not counted
    wait_until(lambda: module.policies.get(name).get("status", {}).get("changedObjects") == 1,
               what="one object counted", timeout=30)


# --- refused at apply -------------------------------------------------------------------------------------


def test_a_policy_lint_refuses_is_refused_at_apply_with_lints_message(module: Module) -> None:
    name = _unique("e2e-pp-typo")
    status = module.policies.refusal(_policy(name, {"match": {"kinds": ["Deploymnet"]},
                                                    "placement": {"nodeSelector": {POOL: "x"}}}))
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert f'admission webhook "{VALIDATOR}" denied the request' in status["message"]
    assert (f"cluster:PlacementPolicy/{name}: spec.match.kinds[0]: unknown kind 'Deploymnet'; "
            'did you mean "Deployment"?') in status["message"]
    causes = status["details"]["causes"]
    assert {"field": "spec.match.kinds[0]", "reason": "FieldValueInvalid",
            "message": "unknown kind 'Deploymnet'; did you mean \"Deployment\"?"} in causes
    assert not module.policies.objects.list_cluster_custom_object(
        API_GROUP, crd.VERSION, crd.PLURAL, field_selector=f"metadata.name={name}")["items"]


def test_a_policy_that_conflicts_with_one_in_force_is_refused(module: Module) -> None:
    gold, silver, app = _unique("e2e-pp-gold"), _unique("e2e-pp-silver"), _unique("tiered")
    module.policies.create(_policy(gold, {"match": {"kinds": ["Deployment"], "names": [app]},
                                          "scheduling": {"priorityClassName": "gold"}}))
    wait_until(lambda: module.policies.ready(gold).get("status") == "True", what=f"{gold} in force", timeout=15)
    status = module.policies.refusal(_policy(silver, {"match": {"kinds": ["Deployment"], "names": [app]},
                                                      "scheduling": {"priorityClassName": "silver"}}))
    assert status["code"] == 422
    assert (f"spec.scheduling.priorityClassName: conflicts with policy '{gold}' (cluster:PlacementPolicy/{gold}), "
            "which sets 'gold'") in status["message"]


def test_a_broken_policy_that_got_in_without_the_validator_is_left_out_and_the_others_serve(module: Module) -> None:
    from kubernetes.client.exceptions import ApiException

    name, app = _unique("e2e-pp-broken"), _unique("serves")
    module.policies.create(_policy(_unique("e2e-pp-serves"), _pool("still", names=[app])))
    broken = _policy(name, {"match": {"kinds": ["Deploymnet"]}, "placement": {"nodeSelector": {POOL: "x"}}})
    module.cluster.admission.delete_validating_webhook_configuration(NAME)
    try:
        def accepted() -> bool:
            try:
                module.policies.create(broken, dry_run=True)
            except ApiException:
                return False
            return True

        wait_until(accepted, what="the API server to stop calling the validating webhook", timeout=60, interval=0.5)
        module.policies.create(broken)  # the API server's schema takes it; the loader does not
    finally:
        config = copy.deepcopy(module.validating)
        module.cluster.admission.create_validating_webhook_configuration(config)
    wait_until(lambda: module.policies.ready(name).get("status") == "False", what=f"{name}'s status", timeout=15)
    ready = module.policies.ready(name)
    assert ready["reason"] == "Invalid"
    assert ready["message"] == "spec.match.kinds[0]: unknown kind 'Deploymnet'; did you mean \"Deployment\"?"
    assert module.node_selector(app) == {POOL: "still"}
    module.policies.delete(name)
