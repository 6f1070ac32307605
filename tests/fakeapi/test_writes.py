"""Creates, updates, the three PATCH flavours, deletes, and the server's failure controls."""
from __future__ import annotations

import json
import time

import kubernetes
import pytest
import urllib3
from kubernetes.client.rest import ApiException

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import lease, node, pod

from .conftest import ClientFor

MERGE = "application/merge-patch+json"


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, object]:
    body: dict[str, object] = json.loads(exc.value.body)
    return body


def test_a_merge_patch_of_node_labels_records_the_field_manager(server: FakeApiServer,
                                                               core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(node("n1", pool="general"))
    before = server.resource_version
    patched = core.patch_node("n1", {"metadata": {"labels": {"pool": "spot", "zone": None}}},
                              field_manager="node-labeler", _content_type=MERGE)
    assert patched.metadata.labels == {"pool": "spot"}
    assert int(patched.metadata.resource_version) == before + 1
    entry = next(m for m in patched.metadata.managed_fields if m.manager == "node-labeler")
    assert (entry.operation, entry.api_version, entry.fields_type) == ("Update", "v1", "FieldsV1")
    assert entry.fields_v1 == {"f:metadata": {"f:labels": {"f:pool": {}}}}
    assert server.requests[-1].content_type == MERGE and server.requests[-1].query["fieldManager"] == "node-labeler"
    again = core.patch_node("n1", {"metadata": {"labels": {"pool": "spot"}}}, field_manager="node-labeler",
                            _content_type=MERGE)
    assert again.metadata.resource_version == patched.metadata.resource_version  # a no-op writes nothing


def test_a_strategic_patch_cordons_and_replaces_taints_because_node_taints_have_no_merge_key(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(node("n1", taints=[{"key": "a", "effect": "NoSchedule"}]))
    cordoned = core.patch_node("n1", {"spec": {"unschedulable": True,
                                               "taints": [{"key": "b", "effect": "NoExecute"}]}})
    assert server.requests[-1].content_type == "application/strategic-merge-patch+json"
    assert cordoned.spec.unschedulable is True
    assert [t.key for t in cordoned.spec.taints] == ["b"]
    assert [n.metadata.name for n in core.list_node(field_selector="spec.unschedulable=true").items] == ["n1"]


def test_a_strategic_patch_merges_containers_by_name_and_conditions_by_type(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(pod("p1"))
    patched = core.patch_namespaced_pod("p1", "default", {"spec": {"containers": [{"name": "app", "image": "app:2"}]}})
    assert [(c.name, c.image) for c in patched.spec.containers] == [("app", "app:2")]
    status = core.patch_namespaced_pod_status("p1", "default", {"status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True"}]}})
    assert [c.type for c in status.status.conditions] == ["Ready", "DisruptionTarget"]
    with pytest.raises(ApiException) as unknown:
        core.patch_namespaced_pod("p1", "default", {"metadata": {"$patch": "explode"}})
    assert unknown.value.status == 500 and "unknown patch type: explode" in str(status_of(unknown)["message"])


def test_a_json_patch_applies_in_order_and_a_failing_test_op_is_422(server: FakeApiServer,
                                                                   core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(node("n1"))
    patched = core.patch_node("n1", [{"op": "add", "path": "/metadata/labels/team", "value": "infra"},
                                     {"op": "test", "path": "/metadata/labels/team", "value": "infra"}])
    assert server.requests[-1].content_type == "application/json-patch+json"
    assert patched.metadata.labels["team"] == "infra"
    with pytest.raises(ApiException) as failed:
        core.patch_node("n1", [{"op": "test", "path": "/metadata/labels/team", "value": "other"}])
    assert status_of(failed) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                 "message": "the server rejected our request due to an error in our request",
                                 "reason": "Invalid", "details": {}, "code": 422}


def test_a_put_with_a_stale_resource_version_on_a_lease_is_a_409_conflict(server: FakeApiServer,
                                                                         api: kubernetes.client.ApiClient) -> None:
    leases = kubernetes.client.CoordinationV1Api(api)
    created = leases.create_namespaced_lease("kube-system", lease("spot-controller", holder="a"))
    mine = leases.read_namespaced_lease("spot-controller", "kube-system")
    mine.spec.holder_identity = "a"
    mine.spec.lease_duration_seconds = 30
    leases.replace_namespaced_lease("spot-controller", "kube-system", mine)
    created.spec.holder_identity = "b"
    with pytest.raises(ApiException) as lost:
        leases.replace_namespaced_lease("spot-controller", "kube-system", created)
    assert lost.value.status == 409
    assert status_of(lost)["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "spot-controller": the object has been '
        "modified; please apply your changes to the latest version and try again")
    assert status_of(lost)["details"] == {"name": "spot-controller", "group": "coordination.k8s.io", "kind": "leases"}
    with pytest.raises(ApiException) as exists:
        leases.create_namespaced_lease("kube-system", lease("spot-controller"))
    assert (exists.value.status, status_of(exists)["reason"]) == (409, "AlreadyExists")


def test_creating_in_a_missing_namespace_is_404_and_in_a_terminating_one_is_403(
        client_for: ClientFor) -> None:
    with FakeApiServer.in_thread("1.31.0", namespace_controller=False) as srv:
        core = kubernetes.client.CoreV1Api(client_for(srv))
        with pytest.raises(ApiException) as missing:
            core.create_namespaced_pod("nowhere", pod("p1", "nowhere"))
        assert status_of(missing)["message"] == 'namespaces "nowhere" not found'
        assert status_of(missing)["details"] == {"name": "nowhere", "kind": "namespaces"}
        core.create_namespace({"metadata": {"name": "team"}})
        gone = json.loads(core.delete_namespace("team", _preload_content=False).data)
        assert gone["kind"] == "Namespace" and gone["status"]["phase"] == "Terminating"
        assert gone["metadata"]["deletionTimestamp"]
        with pytest.raises(ApiException) as closing:
            core.create_namespaced_pod("team", pod("p1", "team"))
        assert closing.value.status == 403
        assert status_of(closing)["message"] == ('pods "p1" is forbidden: unable to create new content in namespace '
                                                 "team because it is being terminated")
        srv.finalize_namespace("team")
        with pytest.raises(ApiException) as deleted:
            core.read_namespace("team")
        assert deleted.value.status == 404
        with pytest.raises(ApiException) as immortal:
            core.delete_namespace("default")
        assert immortal.value.status == 403


def test_finalizers_turn_a_delete_into_a_deletion_timestamp_until_they_are_removed(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object({**node("n1"), "metadata": {"name": "n1", "finalizers": ["example.com/keep"]}})
    answer = core.delete_node("n1", _preload_content=False)
    body = json.loads(answer.data)
    assert answer.status == 200 and body["kind"] == "Node" and body["metadata"]["deletionTimestamp"]
    assert core.read_node("n1").metadata.deletion_grace_period_seconds == 0
    core.patch_node("n1", {"metadata": {"finalizers": None}}, _content_type=MERGE)
    with pytest.raises(ApiException) as gone:
        core.read_node("n1")
    assert gone.value.status == 404
    server.apply_object(node("n2"))
    plain = json.loads(core.delete_node("n2", _preload_content=False).data)
    assert plain["status"] == "Success" and plain["details"]["kind"] == "nodes" and plain["details"]["uid"]


def test_graceful_pod_deletion_keeps_the_pod_terminating_until_the_test_finishes_it(client_for: ClientFor) -> None:
    with FakeApiServer.in_thread("1.31.0", graceful_pod_deletion=True) as srv:
        core = kubernetes.client.CoreV1Api(client_for(srv))
        srv.apply_object(pod("p1", node_name="n1"))
        srv.apply_object(pod("unscheduled"))
        deleting = core.delete_namespaced_pod("p1", "default")
        assert deleting.metadata.deletion_grace_period_seconds == 30 and deleting.metadata.deletion_timestamp
        assert srv.terminating_pods() == [("default", "p1")]
        core.delete_namespaced_pod("unscheduled", "default")  # not scheduled: deleted at once
        assert srv.get_object("Pod", "unscheduled", "default") is None
        srv.finish_pod_termination("default", "p1")
        assert srv.get_object("Pod", "p1", "default") is None


def test_the_status_subresource_writes_only_status_and_the_main_resource_ignores_status(
        server: FakeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    server.apply_object(node("n1"))
    main = core.patch_node("n1", {"metadata": {"labels": {"x": "1"}}, "status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, _content_type=MERGE)
    assert main.metadata.labels["x"] == "1" and main.status.conditions[0].status == "True"
    sub = core.patch_node_status("n1", {"spec": {"unschedulable": True}, "status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, _content_type=MERGE)
    assert sub.spec.unschedulable is None and sub.status.conditions[0].status == "False"
    created = core.create_namespaced_pod("default", pod("p1", phase="Running"))
    assert created.status.phase == "Pending" and created.status.qos_class == "BestEffort"
    assert created.spec.restart_policy == "Always" and created.metadata.generation is None  # pods: 1.33+


def test_generate_name_and_dry_run_behave_like_the_registry(server: FakeApiServer,
                                                            core: kubernetes.client.CoreV1Api) -> None:
    made = core.create_namespaced_pod("default", {"metadata": {"generateName": "web-"},
                                                  "spec": {"containers": [{"name": "a", "image": "a"}]}})
    assert made.metadata.name.startswith("web-") and len(made.metadata.name) == 9
    assert set(made.metadata.name[4:]) <= set("bcdfghjklmnpqrstvwxz2456789")
    before = server.resource_version
    dry = core.create_namespaced_pod("default", pod("dry"), dry_run="All")
    assert dry.metadata.uid and not dry.metadata.resource_version
    assert server.get_object("Pod", "dry", "default") is None and server.resource_version == before
    with pytest.raises(ApiException) as bad:
        core.create_namespaced_pod("default", pod("p2"), dry_run="Some")
    assert bad.value.status == 422


def test_a_body_that_is_not_json_is_400_and_an_unknown_content_type_is_415(server: FakeApiServer) -> None:
    http = urllib3.PoolManager()
    url = f"{server.url}/api/v1/nodes"
    broken = http.request("POST", url, body=b"{not json", headers={"Content-Type": "application/json"})
    assert broken.status == 400
    assert json.loads(broken.data)["message"].startswith(
        "the object provided is unrecognized (must be of type Node): couldn't get version/kind; json parse error:")
    xml = http.request("POST", url, body=b"<node/>", headers={"Content-Type": "application/xml"})
    assert (xml.status, json.loads(xml.data)["reason"]) == (415, "UnsupportedMediaType")
    wrong_kind = http.request("POST", url, body=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "x"}}).encode(), headers={"Content-Type": "application/json"})
    assert wrong_kind.status == 400
    yaml_patch = http.request("PATCH", f"{url}/x", body=b"{}", headers={"Content-Type": "application/apply-patch+yaml"})
    assert yaml_patch.status == 415


def test_fail_next_injects_a_status_with_retry_after_once(server: FakeApiServer,
                                                          core: kubernetes.client.CoreV1Api) -> None:
    # POST: urllib3 would retry an idempotent GET after Retry-After on its own
    server.fail_next("POST", r"^/api/v1/nodes$", 429, retry_after=3)
    with pytest.raises(ApiException) as throttled:
        core.create_node(node("n1"))
    assert throttled.value.status == 429 and throttled.value.headers["Retry-After"] == "3"
    assert status_of(throttled)["details"] == {"retryAfterSeconds": 3}
    assert status_of(throttled)["reason"] == "TooManyRequests"
    assert core.create_node(node("n1")).metadata.name == "n1"
    server.fail_next("*", r"/nodes", 500, message="etcd is on fire")
    with pytest.raises(ApiException) as broken:
        core.list_node()
    assert (broken.value.status, status_of(broken)["message"]) == (500, "etcd is on fire")


def test_go_away_refuses_connections_and_come_back_serves_again(server: FakeApiServer,
                                                                client_for: ClientFor) -> None:
    config = kubernetes.client.Configuration(host=server.url)
    config.retries = False
    with kubernetes.client.ApiClient(config) as api:
        core = kubernetes.client.CoreV1Api(api)
        core.list_node()
        server.go_away()
        with pytest.raises(urllib3.exceptions.HTTPError):
            core.list_node()
        server.come_back()
        deadline = time.monotonic() + 5
        while True:
            try:
                assert core.list_node().items == []
                break
            except urllib3.exceptions.HTTPError:
                assert time.monotonic() < deadline
        server.go_away("unavailable")
        with pytest.raises(ApiException) as unavailable:
            core.list_node()
        assert unavailable.value.status == 503
        server.come_back()
        assert core.list_node().items == []


def test_events_written_as_core_v1_read_back_as_events_k8s_io_v1(server: FakeApiServer,
                                                                api: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespaced_event("default", {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Node",
                                 "name": "n1"}, "reason": "Cordoned", "message": "spot interruption", "type": "Normal",
                                 "eventTime": "2024-01-01T00:00:00.000000Z"})
    modern = kubernetes.client.EventsV1Api(api).read_namespaced_event("e1", "default")
    assert (modern.regarding.name, modern.note, modern.reason) == ("n1", "spot interruption", "Cordoned")
    about_n1 = core.list_namespaced_event("default", field_selector="involvedObject.name=n1").items
    assert [e.metadata.name for e in about_n1] == ["e1"]


def test_delete_preconditions_fail_with_the_storage_precondition_message(server: FakeApiServer,
                                                                        core: kubernetes.client.CoreV1Api) -> None:
    uid = server.apply_object(node("n1"))["metadata"]["uid"]
    options = kubernetes.client.V1DeleteOptions(preconditions=kubernetes.client.V1Preconditions(uid="other"))
    with pytest.raises(ApiException) as stale:
        core.delete_node("n1", body=options)
    assert stale.value.status == 409
    assert status_of(stale)["message"] == (
        'Operation cannot be fulfilled on nodes "n1": StorageError: invalid object, Code: 4, '
        "Key: /registry/minions/n1, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
        f"UID in precondition: other, UID in object meta: {uid}")
    options.preconditions.uid = uid
    core.delete_node("n1", body=options)
    assert server.get_object("Node", "n1") is None


def test_pods_get_their_priority_from_the_priority_class_like_the_priority_admission_plugin(
        core: kubernetes.client.CoreV1Api) -> None:
    critical = core.create_namespaced_pod("default", {**pod("p1"), "spec": {
        "priorityClassName": "system-node-critical", "containers": [{"name": "a", "image": "a"}]}})
    assert (critical.spec.priority, critical.spec.preemption_policy) == (2000001000, "PreemptLowerPriority")
    plain = core.create_namespaced_pod("default", pod("p2"))
    assert plain.spec.priority == 0 and plain.spec.priority_class_name is None
    with pytest.raises(ApiException) as unknown:
        core.create_namespaced_pod("default", {**pod("p3"), "spec": {"priorityClassName": "gold",
                                                                     "containers": [{"name": "a", "image": "a"}]}})
    assert (unknown.value.status, status_of(unknown)["message"]) == (
        403, 'pods "p3" is forbidden: no PriorityClass with name gold was found')


@pytest.mark.parametrize(("method", "path", "body", "content_type", "want"), [
    ("POST", "/api/v1/namespaces/default/pods", b'{"metadata": "x"}', "application/json", 400),
    ("POST", "/api/v1/namespaces/default/pods", b'{"metadata": {"labels": {"a": 1}}}', "application/json", 400),
    ("POST", "/api/v1/namespaces/default/pods", b"[1, 2]", "application/json", 400),
    ("POST", "/api/v1/namespaces/default/pods", b"", "application/json", 400),
    ("PUT", "/api/v1/nodes/n1", b'{"spec": []}', "application/json", 400),
    ("PATCH", "/api/v1/nodes/n1", b"not json", "application/merge-patch+json", 400),
    ("PATCH", "/api/v1/nodes/n1", b'{"op": "add"}', "application/json-patch+json", 400),
    ("PATCH", "/api/v1/nodes/n1", b'[{"op": "move", "from": "/nope", "path": "/x"}]', "application/json-patch+json",
     422),
    ("DELETE", "/api/v1/nodes/n1", b"{{", "application/json", 400),
    ("DELETE", "/api/v1/nodes/n1", b'{"propagationPolicy": "Sideways"}', "application/json", 422),
    ("GET", "/api/v1/nodes?limit=ten", b"", "", 400),
    ("GET", "/api/v1/nodes?watch=1&timeoutSeconds=soon", b"", "", 400),
    ("GET", "/api/v1/nodes?continue=%%%", b"", "", 400),
    ("GET", "/api/v1/nodes?labelSelector=a%20in%20(", b"", "", 400),
    ("POST", "/api/v1/namespaces/default/pods/p1/eviction", b'{"metadata": {"name": "p1"}, "deleteOptions": 3}',
     "application/json", 400),
    ("POST", "/api/v1/namespaces/default/pods/p1/eviction", b'{"apiVersion": "policy/v2", "metadata": {"name": "p1"}}',
     "application/json", 400),
    ("GET", "/api/v1/namespaces/default/pods/p1/logs", b"", "", 404),
    ("GET", "/apis/policy/v1/poddisruptionbudgets/x", b"", "", 404),
    ("POST", "/api/v1/pods", b"{}", "application/json", 405),
])
def test_malformed_requests_get_client_errors_and_the_server_keeps_serving(
        server: FakeApiServer, method: str, path: str, body: bytes, content_type: str, want: int) -> None:
    server.apply_object(node("n1"))
    server.apply_object(pod("p1", node_name="n1"))
    http = urllib3.PoolManager()
    headers = {"Content-Type": content_type} if content_type else {}
    answer = http.request(method, server.url + path, body=body or None, headers=headers)
    assert answer.status == want, answer.data
    assert json.loads(answer.data)["kind"] == "Status"
    assert http.request("GET", f"{server.url}/version").status == 200
