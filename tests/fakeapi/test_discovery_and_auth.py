"""Discovery, versions, authentication and the shape of errors, seen through the official client."""
from __future__ import annotations

import json
from pathlib import Path

import kubernetes
import pytest
import urllib3
from kubernetes.client.rest import ApiException

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node, pod

from .conftest import ClientFor


def test_version_and_discovery_describe_the_configured_server_version(api: kubernetes.client.ApiClient) -> None:
    version = kubernetes.client.VersionApi(api).get_code()
    assert (version.git_version, version.major, version.minor) == ("v1.31.0", "1", "31")

    groups = {g.name: g for g in kubernetes.client.ApisApi(api).get_api_versions().groups}
    assert groups["policy"].preferred_version.group_version == "policy/v1"
    assert [v.version for v in groups["policy"].versions] == ["v1"]  # v1beta1 PDBs are gone from 1.25
    assert {"apps", "coordination.k8s.io", "scheduling.k8s.io", "events.k8s.io"} <= set(groups)
    assert "metrics.k8s.io" not in groups

    resources = {r.name: r for r in kubernetes.client.CoreV1Api(api).get_api_resources().resources}
    assert (resources["pods/eviction"].group, resources["pods/eviction"].version,
            resources["pods/eviction"].kind) == ("policy", "v1", "Eviction")
    assert resources["nodes/status"].verbs == ["get", "patch", "update"]
    assert resources["nodes"].namespaced is False and resources["pods"].short_names == ["po"]
    assert kubernetes.client.CoreApi(api).get_api_versions().versions == ["v1"]


def test_an_old_server_serves_no_policy_v1_and_rejects_a_v1_eviction_body_with_400(client_for: ClientFor) -> None:
    with FakeApiServer.in_thread("1.20.0") as old:
        api = client_for(old)
        groups = {g.name: g for g in kubernetes.client.ApisApi(api).get_api_versions().groups}
        assert [v.group_version for v in groups["policy"].versions] == ["policy/v1beta1"]
        with pytest.raises(ApiException) as missing:
            kubernetes.client.PolicyV1Api(api).list_namespaced_pod_disruption_budget("default")
        assert missing.value.status == 404

        old.apply_object(pod("web-1"))
        eviction = kubernetes.client.V1Eviction(api_version="policy/v1", kind="Eviction",
                                                metadata=kubernetes.client.V1ObjectMeta(name="web-1",
                                                                                         namespace="default"))
        core = kubernetes.client.CoreV1Api(api)
        with pytest.raises(ApiException) as rejected:
            core.create_namespaced_pod_eviction("web-1", "default", eviction)
        assert rejected.value.status == 400  # not 404: the endpoint exists, the body's version does not
        assert json.loads(rejected.value.body)["message"].startswith(
            'Eviction in version "v1" cannot be handled as a Eviction: no kind "Eviction" is registered for version '
            '"policy/v1"')
        assert old.get_object("Pod", "web-1", "default") is not None

        eviction.api_version = "policy/v1beta1"
        core.create_namespaced_pod_eviction("web-1", "default", eviction)
        assert old.get_object("Pod", "web-1", "default") is None


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_a_tls_and_token_kubeconfig_works_with_load_kube_config_and_a_wrong_token_gets_401(tmp_path: Path) -> None:
    with FakeApiServer.in_thread("1.31.0", tls=True, token="s3cret") as srv:
        assert srv.url.startswith("https://")
        good = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(srv.write_kubeconfig(tmp_path / "good")),
                                           client_configuration=good)
        with kubernetes.client.ApiClient(good) as api:
            srv.apply_object(node("n1"))
            assert [n.metadata.name for n in kubernetes.client.CoreV1Api(api).list_node().items] == ["n1"]
        assert srv.requests[-1].headers["Authorization"] == "Bearer s3cret"

        insecure = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(srv.write_kubeconfig(tmp_path / "insecure", tls=False)),
                                           client_configuration=insecure)
        assert insecure.verify_ssl is False
        with kubernetes.client.ApiClient(insecure) as api:
            assert kubernetes.client.VersionApi(api).get_code().git_version == "v1.31.0"

        bad = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(srv.write_kubeconfig(tmp_path / "bad", token="nope")),
                                           client_configuration=bad)
        with kubernetes.client.ApiClient(bad) as api, pytest.raises(ApiException) as denied:
            kubernetes.client.CoreV1Api(api).list_node()
        assert denied.value.status == 401
        assert json.loads(denied.value.body) == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                 "status": "Failure", "message": "Unauthorized",
                                                 "reason": "Unauthorized", "code": 401}


def test_a_client_that_does_not_trust_the_ca_cannot_connect(tmp_path: Path) -> None:
    with FakeApiServer.in_thread("1.31.0", tls=True) as srv:
        config = kubernetes.client.Configuration(host=srv.url)
        config.retries = False
        with kubernetes.client.ApiClient(config) as api, pytest.raises(ApiException) as failed:
            kubernetes.client.VersionApi(api).get_code()
        assert failed.value.status == 0 and "CERTIFICATE_VERIFY_FAILED" in str(failed.value.reason)


def test_unknown_resources_get_a_404_status_and_unknown_groups_a_plain_404(server: FakeApiServer) -> None:
    http = urllib3.PoolManager()
    inside = http.request("GET", f"{server.url}/api/v1/gizmos")
    assert inside.status == 404
    assert json.loads(inside.data) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "message": "the server could not find the requested resource",
                                       "reason": "NotFound", "details": {}, "code": 404}
    outside = http.request("GET", f"{server.url}/apis/metrics.k8s.io/v1beta1/nodes")
    assert (outside.status, outside.data) == (404, b"404 page not found\n")
    wrong_method = http.request("GET", f"{server.url}/api/v1/namespaces/default/pods/x/eviction")
    assert (wrong_method.status, json.loads(wrong_method.data)["reason"]) == (405, "MethodNotAllowed")


def test_the_metrics_api_is_served_only_when_enabled_and_reports_what_the_test_set(client_for: ClientFor) -> None:
    with FakeApiServer.in_thread("1.31.0", metrics=True) as srv:
        api = client_for(srv)
        groups = [g.name for g in kubernetes.client.ApisApi(api).get_api_versions().groups]
        assert "metrics.k8s.io" in groups
        srv.set_node_metrics("n1", "250m", "1Gi", labels={"pool": "spot"})
        srv.set_node_metrics("n2", "1", "2Gi")
        srv.set_pod_metrics("default", "web-1", {"app": ("10m", "64Mi")})
        custom = kubernetes.client.CustomObjectsApi(api)
        nodes = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes", label_selector="pool=spot")
        assert nodes["kind"] == "NodeMetricsList"
        assert [(i["metadata"]["name"], i["usage"]) for i in nodes["items"]] == [("n1", {"cpu": "250m",
                                                                                         "memory": "1Gi"})]
        one = custom.get_namespaced_custom_object("metrics.k8s.io", "v1beta1", "default", "pods", "web-1")
        assert one["kind"] == "PodMetrics" and one["containers"][0]["usage"]["cpu"] == "10m"
