"""The chart with ``audit.enabled``: the server's flags and token, the PolicyReport CRDs installed
when the cluster has none (always, in an offline render: ``lookup`` finds nothing), and the least
RBAC the background audit needs, checked by running the chart's own command line against the fake
API server: every request it makes is granted, and every grant is used but the two the code says
it makes only in cases the run cannot reach."""
from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from tests.chart.conftest import CHART, NAMESPACE, Rendered
from tests.chart.test_kubernetes_schemas import _validate_all
from tests.chart.test_spot_controller import allowed, request_attributes
from tests.cluster.conftest import until
from tests.kit.chart import granted
from tests.kit.fakeapi import FakeApiServer
from tests.kit.policies import SSD_POLICY
from tests.kit.server import make_pki
from tests.kit.workloads import deployment
from webhook import cli
from webhook.audit import reports
from webhook.cluster.config import ClusterConfig
from webhook.commands import serve
from webhook.kube import kinds
from webhook.server import app

pytest.importorskip("helm_python")

FULLNAME = "pw-placement-webhook"
NAME = f"{FULLNAME}-audit"
AUDIT: dict[str, Any] = {"audit": {"enabled": True}}
CRD_FILES = {"policyreports.wgpolicyk8s.io": CHART / "files" / "crds" / "policyreports.yaml",
             "clusterpolicyreports.wgpolicyk8s.io": CHART / "files" / "crds" / "clusterpolicyreports.yaml"}
READ = ["list", "watch"]
AUDIT_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "namespaces", "pods"], "verbs": READ},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": READ},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": READ},
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets", "daemonsets"], "verbs": READ},
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]},
    {"apiGroups": ["kubevirt.io"], "verbs": ["list"],
     "resources": ["virtualmachines", "virtualmachineinstances", "virtualmachineinstancereplicasets"]},
    {"apiGroups": ["pool.kubevirt.io"], "resources": ["virtualmachinepools"], "verbs": ["list"]},
    {"apiGroups": ["vm.novasphere.dev"], "resources": ["wukongs"], "verbs": ["list"]},
    {"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports", "clusterpolicyreports"],
     "verbs": ["list", "create", "update", "delete"]},
]
LEASE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [FULLNAME],
     "verbs": ["get", "update"]},
]
Client = TestClient  # type: ignore[type-arg]


def _named(rendered: Rendered, kind: str, name: str = NAME) -> dict[str, Any]:
    (found,) = [o for o in rendered.of_kind(kind) if o["metadata"]["name"] == name]
    return found


def _parsed(rendered: Rendered) -> argparse.Namespace:
    return cli.build_parser().parse_args(["serve", *rendered.container["args"]])


@pytest.fixture(scope="module")
def audit(render: Callable[..., Rendered]) -> Rendered:
    return render(AUDIT)


def test_by_default_there_is_no_audit_no_report_crd_and_no_token(default: Rendered) -> None:
    assert _parsed(default).audit_interval is None  # the server's default: 0, off
    assert "CustomResourceDefinition" not in default.kinds()
    assert not [o for o in default.objects if o["metadata"]["name"] == NAME]
    assert default.pod_spec["automountServiceAccountToken"] is False


def test_enabled_the_server_audits_every_interval_under_the_lease_with_its_token(
        audit: Rendered, render: Callable[..., Rendered]) -> None:
    args = _parsed(audit)
    assert (args.audit_interval, args.lease_name, args.lease_namespace) == (300.0, FULLNAME, NAMESPACE)
    assert audit.pod_spec["automountServiceAccountToken"] is True
    faster = _parsed(render({"audit": {"enabled": True, "intervalSeconds": 30}}))
    assert faster.audit_interval == 30.0


def test_an_interval_that_is_not_positive_fails_the_render(render: Callable[..., Rendered]) -> None:
    with pytest.raises(Exception, match="intervalSeconds"):
        render({"audit": {"enabled": True, "intervalSeconds": 0}})


def test_the_report_crds_render_as_the_chart_files_hold_them_and_are_kept_on_uninstall(audit: Rendered) -> None:
    crds = {o["metadata"]["name"]: o for o in audit.of_kind("CustomResourceDefinition")}
    assert crds == {name: yaml.safe_load(path.read_text()) for name, path in CRD_FILES.items()}
    for crd in crds.values():
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["spec"]["group"] == reports.GROUP
        assert [v["name"] for v in crd["spec"]["versions"]] == [reports.VERSION]
    assert {c["spec"]["names"]["kind"]: c["spec"]["scope"] for c in crds.values()} == {
        reports.KIND: "Namespaced", reports.CLUSTER_KIND: "Cluster"}
    assert {c["spec"]["names"]["plural"] for c in crds.values()} == {reports.PLURAL, reports.CLUSTER_PLURAL}


def test_every_object_validates_strictly(audit: Rendered, render: Callable[..., Rendered]) -> None:
    assert _validate_all(audit.objects) == []
    assert _validate_all(render({**AUDIT, "policies": {"from": "files,cluster"}}).objects) == []


def test_the_cluster_role_is_exactly_what_the_audit_reads_and_writes(audit: Rendered) -> None:
    assert _named(audit, "ClusterRole")["rules"] == AUDIT_RULES


def test_the_audit_may_list_each_declared_kind_too(render: Callable[..., Rendered]) -> None:
    widget = {"group": "example.com", "version": "v1", "kind": "Widget", "resource": "widgets",
              "podSpecPath": "/spec/template/spec", "podLabelsPath": "/spec/template/metadata/labels"}
    core = {**widget, "group": "", "kind": "Gadget", "resource": "gadgets"}
    rules = _named(render({**AUDIT, "extraKinds": [widget, core]}), "ClusterRole")["rules"]
    assert rules == [*AUDIT_RULES[:-1], {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list"]},
                     {"apiGroups": [""], "resources": ["gadgets"], "verbs": ["list"]}, AUDIT_RULES[-1]]


def test_alone_the_audit_gets_a_lease_role_of_its_own_restricted_to_the_lease(audit: Rendered) -> None:
    role = _named(audit, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE and role["rules"] == LEASE_RULES
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = _named(audit, kind)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": NAME}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]


def test_with_policies_from_the_cluster_both_share_the_one_lease_role(render: Callable[..., Rendered]) -> None:
    both = render({**AUDIT, "policies": {"from": "cluster"}})
    assert [r["metadata"]["name"] for r in both.of_kind("Role")] == [f"{FULLNAME}-placementpolicies"]
    assert {r["metadata"]["name"] for r in both.of_kind("ClusterRole")} == {NAME, f"{FULLNAME}-placementpolicies"}


def _report(kind: str, namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": reports.NAME, "labels": dict(reports.LABELS)}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": reports.API_VERSION, "kind": kind, "metadata": metadata, "results": []}


async def test_running_the_chart_s_command_every_api_call_is_granted_and_every_grant_is_used(
        audit: Rendered, tmp_path: Path, aiohttp_client: Callable[..., Awaitable[Client]]) -> None:
    """The container's command line (its certificate and policy folder the test's) against the
    fake API server: a Deployment fails the SSD policy and gets a report; stale reports of ours,
    in a namespace with nothing left and cluster-wide, are deleted; the Deployment is fixed and its
    report updated. Every workload kind's CRD is installed, so that every list is made. Every
    request is then checked against the rendered rules."""
    cluster_rules, role_rules = _named(audit, "ClusterRole")["rules"], _named(audit, "Role")["rules"]
    pki = make_pki(tmp_path / "pki")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "ssd.yaml").write_text(SSD_POLICY)
    args = _parsed(audit)
    args.tls_cert, args.tls_key, args.policies = pki.cert, pki.key, [tmp_path / "policies"]
    web = {**deployment("web", namespace="shop"), "apiVersion": "apps/v1", "kind": "Deployment"}
    crds = ("VirtualMachine", "VirtualMachineInstance", "VirtualMachineInstanceReplicaSet", "VirtualMachinePool",
            "Wukong")
    async with FakeApiServer("1.20.2", policy_reports=True, bookmark_interval=0.2, crds=crds) as api:
        for namespace in (NAMESPACE, "shop", "gone"):
            api.apply_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        api.apply_object(web)
        api.apply_object(_report(reports.KIND, "gone"))
        api.apply_object(_report(reports.CLUSTER_KIND))
        values = serve.resolve(args, {})
        values["cluster"] = ClusterConfig(api.url)  # the pod's service account, here the fake's address
        state = app.State(serve.server_config(values, kinds.BUILTIN))
        client = await aiohttp_client(app.make_app(state))
        try:
            await until(lambda: api.get_object(reports.KIND, reports.NAME, "shop") is not None, timeout=20.0,
                        what="the report of shop")
            assert api.get_object(reports.KIND, reports.NAME, "gone") is None
            assert api.get_object(reports.CLUSTER_KIND, reports.NAME) is None
            web["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "ssd"}
            api.apply_object(web)
            assert state.audit is not None
            state.audit.wake.set()
            await until(lambda: (api.get_object(reports.KIND, reports.NAME, "shop") or {}).get(
                "summary", {}).get("fail") == 0, timeout=20.0, what="the report updated")
        finally:
            await client.close()
        requests = api.requests

    attributes = [(r, request_attributes(r.method, r.path, r.query)) for r in requests]
    denied = [f"{r.method} {r.path}" for r, a in attributes if a is not None and not allowed(a, cluster_rules, role_rules)]
    assert denied == []
    used = {(a["group"], a["resource"], a["verb"]) for _, a in attributes if a is not None}
    # Unused here, on purpose: a watch may not have started when a read completes and stops, and
    # a ClusterPolicyReport is created or updated only for a cluster-scoped object's results.
    unreachable = {(g, r, "watch") for g, r, v in granted(cluster_rules) if v == "watch"} | {
        (reports.GROUP, reports.CLUSTER_PLURAL, "create"), (reports.GROUP, reports.CLUSTER_PLURAL, "update")}
    assert (granted(cluster_rules) | granted(role_rules)) - unreachable <= used
    discovery = {r.path for r, a in attributes if a is None}  # everyone's (system:discovery)
    assert {"/version", "/apis", "/apis/batch/v1", "/apis/batch/v1beta1"} <= discovery
    assert all(path == "/version" or path.startswith(("/api/", "/apis")) for path in discovery)
