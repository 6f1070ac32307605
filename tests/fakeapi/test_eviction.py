"""The pods/eviction subresource and the disruption-controller stand-in, through the official client."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import budget_status, pdb, pod

from .conftest import ClientFor


def eviction_of(name: str, namespace: str = "default", **delete: object) -> kubernetes.client.V1Eviction:
    options = kubernetes.client.V1DeleteOptions(**delete) if delete else None
    return kubernetes.client.V1Eviction(metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=namespace),
                                        delete_options=options)


def evict(core: kubernetes.client.CoreV1Api, name: str, **delete: object) -> tuple[int, dict[str, object]]:
    raw = core.create_namespaced_pod_eviction(name, "default", eviction_of(name, **delete), _preload_content=False)
    return raw.status, json.loads(raw.data)


def test_an_eviction_with_room_in_the_budget_deletes_the_pod_and_spends_the_budget(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pod("web-1", node_name="n1", labels={"app": "web"}))
    server.apply_object(pdb("web", match={"app": "web"}, min_available=1, status=budget_status(1, 2, 1, 2)))
    assert evict(core, "web-1") == (201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                          "code": 201})
    assert server.get_object("Pod", "web-1", "default") is None
    budget = server.get_object("PodDisruptionBudget", "web", "default")
    assert budget is not None
    assert budget["status"]["disruptionsAllowed"] == 0 and set(budget["status"]["disruptedPods"]) == {"web-1"}
    condition = budget["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("DisruptionAllowed", "False",
                                                                             "InsufficientPods")


def test_the_evicted_pod_carries_the_disruption_target_condition_before_it_goes(
        client_for: ClientFor) -> None:
    with FakeApiServer.in_thread("1.31.0", graceful_pod_deletion=True) as srv:
        core = kubernetes.client.CoreV1Api(client_for(srv))
        srv.apply_object(pod("web-1", node_name="n1"))
        core.create_namespaced_pod_eviction("web-1", "default", eviction_of("web-1"))
        terminating = srv.get_object("Pod", "web-1", "default")
        assert terminating is not None and terminating["metadata"]["deletionTimestamp"]
        target = terminating["status"]["conditions"][-1]
        assert (target["type"], target["status"], target["reason"], target["message"]) == (
            "DisruptionTarget", "True", "EvictionByEvictionAPI", "Eviction API: evicting")


def test_an_eviction_blocked_by_the_budget_is_429_with_the_disruption_budget_cause(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pod("web-1", node_name="n1", labels={"app": "web"}))
    server.apply_object(pdb("web", match={"app": "web"}, min_available=2, status=budget_status(0, 2, 2, 2)))
    with pytest.raises(ApiException) as blocked:
        core.create_namespaced_pod_eviction("web-1", "default", eviction_of("web-1"))
    assert blocked.value.status == 429
    assert json.loads(blocked.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.", "reason": "TooManyRequests",
        "details": {"causes": [{"reason": "DisruptionBudget",
                                "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]},
        "code": 429}
    assert "Retry-After" not in blocked.value.headers
    assert server.get_object("Pod", "web-1", "default") is not None


def test_a_budget_whose_status_lags_its_generation_is_429_still_being_processed_with_retry_after(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pod("web-1", node_name="n1", labels={"app": "web"}))
    server.apply_object(pdb("web", match={"app": "web"}, min_available=1, generation=2,
                            status=budget_status(5, 6, 1, 6, observed=1)))
    with pytest.raises(ApiException) as lagging:
        core.create_namespaced_pod_eviction("web-1", "default", eviction_of("web-1"))
    body = json.loads(lagging.value.body)
    assert lagging.value.status == 429 and lagging.value.headers["Retry-After"] == "10"
    assert body["details"] == {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web is "
                                           "still being processed by the server."}], "retryAfterSeconds": 10}


def test_two_budgets_over_one_pod_answer_http_201_carrying_a_failure_status_with_code_500(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pod("web-1", node_name="n1", labels={"app": "web", "tier": "front"}))
    server.apply_object(pdb("by-app", match={"app": "web"}, min_available=1, status=budget_status(1, 2, 1, 2)))
    server.apply_object(pdb("by-tier", match={"tier": "front"}, min_available=1, status=budget_status(1, 2, 1, 2)))
    status, body = evict(core, "web-1")
    assert status == 201  # handlers/create.go writes 201 for any Status the REST Create returns
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
                               "not support.", "code": 500}
    assert server.get_object("Pod", "web-1", "default") is not None


def test_pending_and_terminal_pods_are_evicted_without_consulting_budgets(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pdb("all", match={"app": "web"}, min_available=10, status=budget_status(0, 0, 10, 0)))
    for name, phase in (("pending", "Pending"), ("done", "Succeeded"), ("failed", "Failed")):
        server.apply_object(pod(name, node_name="n1", phase=phase, labels={"app": "web"}))
        assert evict(core, name)[0] == 201
        assert server.get_object("Pod", name, "default") is None


def test_an_unready_pod_is_evicted_without_spending_a_healthy_budget_and_blocked_by_an_unhealthy_one(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pod("sick", node_name="n1", ready=False, labels={"app": "web"}))
    server.apply_object(pdb("web", match={"app": "web"}, min_available=2, status=budget_status(0, 2, 2, 3)))
    assert evict(core, "sick")[0] == 201  # currentHealthy >= desiredHealthy > 0
    spent = server.get_object("PodDisruptionBudget", "web", "default")
    assert spent is not None and spent["status"]["disruptionsAllowed"] == 0
    server.apply_object(pod("sick2", node_name="n1", ready=False, labels={"app": "web"}))
    server.apply_object(pdb("web", match={"app": "web"}, min_available=2, status=budget_status(0, 1, 2, 3)))
    with pytest.raises(ApiException) as blocked:
        core.create_namespaced_pod_eviction("sick2", "default", eviction_of("sick2"))
    assert blocked.value.status == 429
    server.apply_object(pdb("web", match={"app": "web"}, min_available=2, status=budget_status(0, 1, 2, 3),
                            unhealthy_pod_eviction_policy="AlwaysAllow"))
    assert evict(core, "sick2")[0] == 201


def test_a_dry_run_eviction_changes_nothing_and_a_name_mismatch_is_400(server: FakeApiServer,
                                                                       core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pod("web-1", node_name="n1", labels={"app": "web"}))
    server.apply_object(pdb("web", match={"app": "web"}, min_available=1, status=budget_status(1, 2, 1, 2)))
    before = server.resource_version
    core.create_namespaced_pod_eviction("web-1", "default", eviction_of("web-1"), dry_run="All")
    assert server.resource_version == before and server.get_object("Pod", "web-1", "default") is not None
    with pytest.raises(ApiException) as mismatch:
        core.create_namespaced_pod_eviction("web-1", "default", eviction_of("other"))
    assert json.loads(mismatch.value.body)["message"] == "name in URL does not match name in Eviction object"


def test_the_pdb_controller_recomputes_budgets_as_pods_come_and_go(client_for: ClientFor) -> None:
    with FakeApiServer.in_thread("1.31.0", pdb_controller=True) as srv:
        core = kubernetes.client.CoreV1Api(client_for(srv))
        policy = kubernetes.client.PolicyV1Api(client_for(srv))
        for i in range(3):
            srv.apply_object(pod(f"web-{i}", node_name="n1", labels={"app": "web"}))
        policy.create_namespaced_pod_disruption_budget("default", pdb("web", match={"app": "web"}, min_available=2))
        status = policy.read_namespaced_pod_disruption_budget("web", "default").status
        assert (status.current_healthy, status.desired_healthy, status.expected_pods,
                status.disruptions_allowed, status.observed_generation) == (3, 2, 3, 1, 1)
        core.create_namespaced_pod_eviction("web-0", "default", eviction_of("web-0"))
        after = policy.read_namespaced_pod_disruption_budget("web", "default").status
        assert (after.current_healthy, after.disruptions_allowed) == (2, 0)
        with pytest.raises(ApiException) as blocked:
            core.create_namespaced_pod_eviction("web-1", "default", eviction_of("web-1"))
        assert blocked.value.status == 429
        srv.patch_object("Pod", "web-2", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                         "default")
        assert policy.read_namespaced_pod_disruption_budget("web", "default").status.current_healthy == 1

        srv.apply_object(pdb("pct", "other", match={"app": "db"}, max_unavailable="50%"))
        for i in range(4):
            srv.apply_object(pod(f"db-{i}", "other", node_name="n1", labels={"app": "db"}))
        srv.set_expected_pods("other", "pct", 4)  # the scale of the pods' (undeclared) controller
        pct = policy.read_namespaced_pod_disruption_budget("pct", "other").status
        assert (pct.expected_pods, pct.desired_healthy, pct.disruptions_allowed) == (4, 2, 2)


def test_disrupted_pods_count_as_unhealthy_until_the_deletion_timeout_expires(client_for: ClientFor) -> None:
    with FakeApiServer.in_thread("1.31.0", pdb_controller=True, pdb_deletion_timeout=2.0) as srv:
        policy = kubernetes.client.PolicyV1Api(client_for(srv))
        for i in range(2):
            srv.apply_object(pod(f"web-{i}", node_name="n1", labels={"app": "web"}))
        srv.apply_object(pdb("web", match={"app": "web"}, min_available=1))
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        srv.patch_object("PodDisruptionBudget", "web", {"status": {"disruptedPods": {"web-1": now}}}, "default")
        srv.sync_pdbs()
        status = policy.read_namespaced_pod_disruption_budget("web", "default").status
        assert status.current_healthy == 1 and set(status.disrupted_pods) == {"web-1"}
        deadline = time.monotonic() + 5
        while policy.read_namespaced_pod_disruption_budget("web", "default").status.current_healthy != 2:
            assert time.monotonic() < deadline, "the disrupted pod never expired"
            time.sleep(0.05)
        assert policy.read_namespaced_pod_disruption_budget("web", "default").status.disrupted_pods is None
