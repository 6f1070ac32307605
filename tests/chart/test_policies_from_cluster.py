"""The chart with ``policies.from`` reading the cluster's PlacementPolicy objects: the server's flags
and token, a ValidatingWebhookConfiguration for PlacementPolicies beside the mutating one (same
CA, its own failurePolicy), and the least RBAC the server needs, checked by running the chart's
own command line against the fake API server: every request it makes is granted, every grant used."""
from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.chart.conftest import CA_BUNDLE, NAMESPACE, TLS_MODES, Rendered
from tests.chart.test_kubernetes_schemas import _validate_all
from tests.chart.test_spot_controller import allowed, request_attributes
from tests.cluster.conftest import until
from tests.kit import policy_objects
from tests.kit.chart import granted
from tests.kit.fakeapi import FakeApiServer
from tests.kit.reviews import admission_review
from tests.kit.server import make_pki
from tests.kit.workloads import deployment
from webhook import cli
from webhook.cluster.config import ClusterConfig
from webhook.commands import serve
from webhook.kube import kinds
from webhook.runtime import leader
from webhook.server import app
from webhook.server import policies as policy_sources

pytest.importorskip("helm_python")

FULLNAME = "pw-placement-webhook"
NAME = f"{FULLNAME}-placementpolicies"
CLUSTER: dict[str, Any] = {"policies": {"from": "cluster"}}
BOTH: dict[str, Any] = {"policies": {"from": "files,cluster"}}
CLUSTER_RULES = [
    {"apiGroups": ["placement.novasphere.dev"], "resources": ["placementpolicies"], "verbs": ["list", "watch"]},
    {"apiGroups": ["placement.novasphere.dev"], "resources": ["placementpolicies/status"], "verbs": ["patch"]},
]
LEASE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [FULLNAME],
     "verbs": ["get", "update"]},
]
Client = TestClient  # type: ignore[type-arg]


def _named(rendered: Rendered, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in rendered.of_kind(kind) if o["metadata"]["name"] == name]
    return found


def _validating(rendered: Rendered) -> dict[str, Any]:
    (config,) = rendered.of_kind("ValidatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    return dict(hook)


def _parsed(rendered: Rendered) -> argparse.Namespace:
    return cli.build_parser().parse_args(["serve", *rendered.container["args"]])


@pytest.fixture(scope="module")
def cluster(render: Callable[..., Rendered]) -> Rendered:
    return render(CLUSTER)


# --- files by default -------------------------------------------------------------------------


def test_by_default_policies_come_from_files_and_nothing_of_the_cluster_source_renders(default: Rendered) -> None:
    assert _parsed(default).policies_from == ("files",)
    assert "ValidatingWebhookConfiguration" not in default.kinds()
    assert not [o for o in default.objects if o["metadata"]["name"] == NAME]
    assert default.pod_spec["automountServiceAccountToken"] is False


# --- the server -----------------------------------------------------------------------------------


def test_from_the_cluster_the_server_reads_objects_with_its_token_and_writes_status_under_a_lease(cluster: Rendered) -> None:
    args = _parsed(cluster)
    assert args.policies_from == ("cluster",) and args.policies is None
    assert (args.lease_name, args.lease_namespace) == (FULLNAME, NAMESPACE)
    assert cluster.pod_spec["automountServiceAccountToken"] is True
    assert _named(cluster, "ServiceAccount", FULLNAME)["automountServiceAccountToken"] is True


def test_from_the_cluster_alone_there_is_no_policies_config_map_or_volume(cluster: Rendered) -> None:
    assert not cluster.of_kind("ConfigMap")
    assert "policies" not in {v["name"] for v in cluster.pod_spec["volumes"]}
    assert "policies" not in {m["name"] for m in cluster.container["volumeMounts"]}


def test_from_both_the_config_map_is_still_mounted_and_read(render: Callable[..., Rendered]) -> None:
    both = render(BOTH)
    args = _parsed(both)
    mounts = {m["name"]: m["mountPath"] for m in both.container["volumeMounts"]}
    assert args.policies_from == ("files", "cluster") and [str(p) for p in args.policies] == [mounts["policies"]]


@pytest.mark.parametrize("policies", [{"items": [policy_objects.manifest("ssd")]}, {"existingConfigMap": "mine"}],
                         ids=["items", "existing-config-map"])
def test_files_it_would_not_read_fail_the_render(render: Callable[..., Rendered], policies: dict[str, Any]) -> None:
    with pytest.raises(Exception, match="are read with policies.from files or files,cluster"):
        render({"policies": {"from": "cluster", **policies}})


def test_the_values_schema_takes_only_the_sources_the_server_knows(render: Callable[..., Rendered]) -> None:
    with pytest.raises(Exception, match="from"):
        render({"policies": {"from": "configmap"}})


def test_notes_point_at_the_ready_column(cluster: Rendered, default: Rendered) -> None:
    assert "kubectl get placementpolicies" in cluster.notes and "No policies are configured" not in cluster.notes
    assert "kubectl get placementpolicies" not in default.notes


# --- the validating webhook ---------------------------------------------------------------------------


def test_the_validating_webhook_sees_placementpolicy_creates_and_updates_only(cluster: Rendered) -> None:
    hook = _validating(cluster)
    assert hook["rules"] == [{"apiGroups": ["placement.novasphere.dev"], "apiVersions": ["v1alpha1"],
                              "resources": ["placementpolicies"], "operations": ["CREATE", "UPDATE"], "scope": "Cluster"}]
    assert hook["clientConfig"]["service"] == {"name": FULLNAME, "namespace": NAMESPACE, "path": app.VALIDATE_POLICY,
                                               "port": 443}
    assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"]) == ("Fail", "None", 5)
    assert "namespaceSelector" not in hook and "objectSelector" not in hook


def test_it_trusts_the_same_ca_as_the_mutating_webhook_in_every_tls_mode(render: Callable[..., Rendered]) -> None:
    for mode, values in TLS_MODES.items():
        rendered = render({**values, **CLUSTER})
        (mutating,) = rendered.one("MutatingWebhookConfiguration")["webhooks"]
        assert _validating(rendered)["clientConfig"].get("caBundle") == mutating["clientConfig"].get("caBundle"), mode
        validating = rendered.one("ValidatingWebhookConfiguration")["metadata"]
        mutating_meta = rendered.one("MutatingWebhookConfiguration")["metadata"]
        assert validating.get("annotations") == mutating_meta.get("annotations"), mode


def test_a_webhook_outside_the_cluster_is_called_at_its_validate_policy_path(render: Callable[..., Rendered]) -> None:
    values = {**CLUSTER, "tls": {"mode": "secret", "secretName": "s", "caBundle": CA_BUNDLE},
              "webhook": {"url": "https://10.0.0.5:8443/mutate"}}
    assert _validating(render(values))["clientConfig"] == {"url": "https://10.0.0.5:8443/validate-policy",
                                                           "caBundle": CA_BUNDLE}


def test_its_failure_policy_and_timeout_are_values(render: Callable[..., Rendered]) -> None:
    hook = _validating(render({"policies": {"from": "cluster", "validation": {"failurePolicy": "Ignore",
                                                                              "timeoutSeconds": 2}}}))
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 2)


def test_every_object_validates_strictly(cluster: Rendered, render: Callable[..., Rendered]) -> None:
    assert _validate_all(cluster.objects) == []
    assert _validate_all(render({**BOTH, "clusterView": {"enabled": True}}).objects) == []


# --- RBAC -------------------------------------------------------------------------------------------


def test_the_cluster_role_is_exactly_the_least_the_server_needs(cluster: Rendered) -> None:
    assert _named(cluster, "ClusterRole", NAME)["rules"] == CLUSTER_RULES


def test_the_lease_role_is_namespaced_and_restricted_to_the_lease_the_server_is_told(cluster: Rendered) -> None:
    role = _named(cluster, "Role", NAME)
    assert role["metadata"]["namespace"] == NAMESPACE and role["rules"] == LEASE_RULES
    assert LEASE_RULES[1]["resourceNames"] == [_parsed(cluster).lease_name]


def test_the_bindings_grant_the_roles_to_the_webhook_service_account(cluster: Rendered) -> None:
    account = cluster.pod_spec["serviceAccountName"]
    for kind, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = _named(cluster, kind, NAME)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": NAME}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]


def test_with_the_cluster_view_too_both_roles_render(render: Callable[..., Rendered]) -> None:
    rendered = render({**CLUSTER, "clusterView": {"enabled": True}})
    assert {r["metadata"]["name"] for r in rendered.of_kind("ClusterRole")} == {NAME, f"{FULLNAME}-cluster-view"}


async def test_running_the_chart_s_command_every_api_call_is_granted_and_every_grant_is_used(
        cluster: Rendered, tmp_path: Path, aiohttp_client: Callable[..., Awaitable[Client]]) -> None:
    """The container's own command line (its certificate the test's), against the fake API server:
    two policies are listed (one the loader refuses), one is created and one edited, reviews are
    answered, statuses are written under the Lease, and the stop releases the Lease. Every request is
    then checked against the rendered rules as the RBAC authorizer would."""
    cluster_rules = _named(cluster, "ClusterRole", NAME)["rules"]
    role_rules = _named(cluster, "Role", NAME)["rules"]
    pki = make_pki(tmp_path / "pki")
    args = _parsed(cluster)
    args.tls_cert, args.tls_key = pki.cert, pki.key
    async with FakeApiServer("1.20.2", placement_policies=True, bookmark_interval=0.2) as api:
        api.apply_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        api.apply_object(policy_objects.manifest("ssd"))
        api.apply_object(policy_objects.manifest("typo", {"match": {"kinds": ["Deploymnet"]}}))
        values = serve.resolve(args, {})
        values["cluster"] = ClusterConfig(api.url)  # the pod's service account, here the fake's address
        state = app.State(serve.server_config(values, kinds.BUILTIN))
        client = await aiohttp_client(app.make_app(state))
        try:
            await until(lambda: state.policies.ready, timeout=5.0, what="the first list")
            # The user's writes go to the store directly: every request recorded is the server's.
            api.apply_object(policy_objects.manifest("gold", {"match": {"kinds": ["Deployment"]},
                                                              "scheduling": {"priorityClassName": "gold"}}))
            api.patch_object("PlacementPolicy", "ssd", {"metadata": {"generation": 2}, "spec": {"order": 2}})
            await until(lambda: all((api.get_object("PlacementPolicy", n) or {}).get("status", {}).get(
                "observedGeneration") == g for n, g in (("ssd", 2), ("gold", 1), ("typo", 1))),
                timeout=10.0, what="every status written")
            answer = await client.post("/mutate", json=admission_review(deployment("web")))
            assert (await answer.json())["response"]["patch"]
        finally:
            await client.close()  # the server stops: the Lease is released
        lease = api.get_object("Lease", FULLNAME, NAMESPACE)
        assert lease is not None and not lease["spec"].get("holderIdentity")
        requests = api.requests

    attributes = [(r, request_attributes(r.method, r.path, r.query)) for r in requests]
    denied = [f"{r.method} {r.path}" for r, a in attributes if a is not None and not allowed(a, cluster_rules, role_rules)]
    assert denied == []
    used = {(a["group"], a["resource"], a["verb"]) for _, a in attributes if a is not None}
    assert used == granted(cluster_rules) | granted(role_rules)  # nothing granted goes unused
    assert {r.path for r, a in attributes if a is None} <= {"/version"}  # every authenticated user's


def test_the_rules_name_the_resource_and_the_lease_api_the_code_calls() -> None:
    """Derived from the code: the informer's path, its status subresource, and leader.py's Lease API."""
    group, version, plural = policy_sources.PATH.split("/")[2:5]
    assert (group, version) == ("placement.novasphere.dev", "v1alpha1")
    assert granted(CLUSTER_RULES) == {(group, plural, "list"), (group, plural, "watch"), (group, f"{plural}/status", "patch")}
    assert {r["apiGroups"][0] for r in LEASE_RULES} == {leader.API_VERSION.split("/")[0]}
