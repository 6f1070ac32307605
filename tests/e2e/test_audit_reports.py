"""The background audit on a real kube-apiserver: ``placement-webhook serve --audit-interval 1``
with leader election, the PolicyReport CRDs installed from the chart's files, one Deployment that
fails a policy and one that passes. The report of their namespace is created in Kyverno's shape
(the API server checks it against the CRD's structural schema: a field the schema lacks would be
pruned, a wrong type or value refused), updated when the failing Deployment is fixed, and left
untouched (same resourceVersion) across passes that find nothing new. No ClusterPolicyReport is
written: none of the kinds the audit reads is cluster-scoped.

The namespace carries the skip label, so the session's webhook never mutates these Deployments;
the audit holds them against its own policy regardless. Needs KUBEBUILDER_ASSETS (docs/install.md);
skipped with that message otherwise.
"""
from __future__ import annotations

import json
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit.e2e_workloads import workload
from tests.kit.envtest import ControlPlane, Webhook, metric_value, quietly, wait_until
from webhook import ANNOTATION_SKIP
from webhook.audit import reports

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "charts" / "placement-webhook" / "files" / "crds"
POLICY = "e2e-audit-blue"
POOL = "e2e.novasphere.dev/audit-pool"
SELECTED = "e2e-audit"
POLICY_YAML = f"""\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: {POLICY}
spec:
  match:
    kinds: [Deployment]
    selector:
      matchLabels: {{{SELECTED}: "yes"}}
  placement:
    nodeSelector:
      {POOL}: blue
"""
INTERVAL = 1  # seconds between passes
RUNS = "placement_webhook_audit_runs_total"


@dataclass
class AuditingWebhook(Webhook):
    """The session's server command with the background audit on, under a Lease of its own."""

    interval: float = INTERVAL
    lease: str = "e2e-audit"

    def _argv(self) -> list[str]:
        return [*super()._argv(), f"--audit-interval={self.interval:g}", f"--lease-name={self.lease}",
                "--lease-namespace=default"]


class Here:
    """The server under test, its namespace, and how to look at its report."""

    def __init__(self, control_plane: ControlPlane, cluster: Any, server: AuditingWebhook, namespace: str) -> None:
        self.control_plane = control_plane
        self.cluster = cluster
        self.server = server
        self.namespace = namespace

    def table(self, path: str) -> Any:
        """GET ``path`` as ``kubectl get`` does: a meta.k8s.io Table."""
        plane = self.control_plane
        request = urllib.request.Request(f"{plane.url}{path}", headers={
            "Authorization": f"Bearer {plane.token}", "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(plane.ca_file)),
                                    timeout=30) as response:
            return json.load(response)

    def report(self) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found: dict[str, Any] = self.cluster.objects.get_namespaced_custom_object(
                reports.GROUP, reports.VERSION, self.namespace, reports.PLURAL, reports.NAME)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def verdict(self, name: str) -> str | None:
        """``result`` of the policy's result about Deployment ``name`` in the report."""
        for item in (self.report() or {}).get("results") or ():
            if item["policy"] == POLICY and item["resources"][0]["name"] == name:
                return str(item["result"])
        return None

    def passes(self) -> float:
        return metric_value(self.server.metrics(), RUNS, {"result": "success"}) or 0.0


def _deployment(name: str, *, pool: str | None = None) -> dict[str, Any]:
    obj = workload("Deployment", name)
    obj["metadata"]["labels"][SELECTED] = "yes"
    if pool is not None:
        obj["spec"]["template"]["spec"]["nodeSelector"] = {POOL: pool}
    return obj


def _install_crds(cluster: Any) -> list[str]:
    from kubernetes.client.exceptions import ApiException

    names = []
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        names.append(crd["metadata"]["name"])
        try:
            cluster.crds.create_custom_resource_definition(crd)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def established() -> bool:
        for name in names:
            conditions = cluster.crds.read_custom_resource_definition(name).status.conditions or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    wait_until(established, what="the PolicyReport CRDs to be established")
    return names


@pytest.fixture(scope="module")
def here(control_plane: ControlPlane, cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Here]:
    crds = _install_crds(cluster)
    workdir = tmp_path_factory.mktemp("webhook-audit")
    (workdir / "policies").mkdir()
    (workdir / "policies" / "blue.yaml").write_text(POLICY_YAML)
    namespace = f"e2e-audit-{uuid.uuid4().hex[:6]}"
    cluster.core.create_namespace({"metadata": {"name": namespace, "labels": {ANNOTATION_SKIP: "true"}}})
    cluster.create(namespace, _deployment("bad"))
    cluster.create(namespace, _deployment("good", pool="blue"))
    server = AuditingWebhook(workdir=workdir, policies=workdir / "policies", cluster_view=False,
                             kubeconfig=control_plane.write_kubeconfig(workdir / "kubeconfig"))
    server.start()
    try:
        yield Here(control_plane, cluster, server, namespace)
    finally:
        server.stop()
        for name in crds:
            quietly(lambda: cluster.crds.delete_custom_resource_definition(name))


def test_the_report_of_the_namespace_is_created_in_kyvernos_shape(here: Here) -> None:
    wait_until(lambda: here.verdict("bad") == "fail" and here.verdict("good") == "pass", timeout=60,
               what="the report of the namespace with both verdicts")
    report = here.report()
    assert report is not None
    print(yaml.safe_dump(report, sort_keys=False))
    assert report["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "placement-webhook"}
    bad = here.cluster.get(here.namespace, "Deployment", "bad")
    (failed,) = [r for r in report["results"] if r["policy"] == POLICY and r["result"] == "fail"]
    # Everything written was kept: the structural schema knows every field (none pruned).
    assert set(failed) == {"policy", "rule", "result", "resources", "message", "source", "scored", "category",
                           "timestamp"}
    assert failed["resources"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "bad",
                                    "namespace": here.namespace, "uid": bad["metadata"]["uid"]}]
    assert (failed["source"], failed["scored"], failed["category"]) == ("placement-webhook", True, "Placement")
    assert set(failed["timestamp"]) == {"seconds", "nanos"}
    counted = {value: sum(1 for r in report["results"] if r["result"] == value)
               for value in ("pass", "fail", "warn", "skip", "error")}
    assert report["summary"] == counted


def test_kubectl_get_polr_shows_the_summary_in_its_columns(here: Here) -> None:
    """The Table the API server answers ``kubectl get polr -A`` with, printed as kubectl prints it."""
    wait_until(lambda: here.report() is not None, timeout=60, what="the report")
    table = here.table(f"/apis/{reports.GROUP}/{reports.VERSION}/{reports.PLURAL}?labelSelector={reports.SELECTOR}")
    shown = [i for i, c in enumerate(table["columnDefinitions"]) if c.get("priority", 0) == 0]
    columns = [table["columnDefinitions"][i]["name"] for i in shown]
    assert columns == ["Name", "Pass", "Fail", "Warn", "Error", "Skip", "Age"]
    print("NAMESPACE  " + "  ".join(c.upper() for c in columns))
    for row in table["rows"]:
        namespace = row["object"]["metadata"]["namespace"]
        print(f"{namespace}  " + "  ".join(str(row["cells"][i]) for i in shown))
    (row,) = [r for r in table["rows"] if r["object"]["metadata"]["namespace"] == here.namespace]
    cells = dict(zip(columns, [row["cells"][i] for i in shown]))
    report = here.report()
    assert report is not None
    assert [cells[k] for k in ("Pass", "Fail", "Warn", "Error", "Skip")] == [
        report["summary"][k] for k in ("pass", "fail", "warn", "error", "skip")]


def test_fixing_the_workload_updates_the_report(here: Here) -> None:
    wait_until(lambda: here.verdict("bad") == "fail", timeout=60, what="the failing verdict")
    before = here.report()
    assert before is not None
    fixed = here.cluster.get(here.namespace, "Deployment", "bad")
    fixed["spec"]["template"]["spec"]["nodeSelector"] = {POOL: "blue"}
    here.cluster.replace(here.namespace, fixed)
    wait_until(lambda: here.verdict("bad") == "pass", timeout=30, what="the report updated")
    after = here.report()
    assert after is not None
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    assert after["summary"]["fail"] == before["summary"]["fail"] - 1

    def stamp(report: dict[str, Any], name: str) -> Any:
        (found,) = [r["timestamp"] for r in report["results"] if r["policy"] == POLICY and r["resources"][0]["name"] == name]
        return found

    assert stamp(after, "good") == stamp(before, "good")  # an unchanged result keeps when it was found


def test_with_nothing_changed_the_report_is_untouched_across_two_passes(here: Here) -> None:
    wait_until(lambda: here.report() is not None and here.passes() >= 1, timeout=60, what="a first pass")
    seen = here.passes()
    version = (here.report() or {})["metadata"]["resourceVersion"]
    wait_until(lambda: here.passes() >= seen + 2, timeout=30, interval=0.2, what="two more passes")
    assert (here.report() or {})["metadata"]["resourceVersion"] == version
    last = _passes_logged(here)[-1]
    assert (last["created"], last["updated"], last["deleted"], last["failed"]) == (0, 0, 0, 0)
    assert last["unchanged"] >= 1


def _passes_logged(here: Here) -> list[dict[str, Any]]:
    """The fields of each "audit written as policy reports" line of the server's log."""
    assert here.server.process is not None
    lines = here.server.process.log.read_text().splitlines()
    return [json.loads(line) for line in lines if '"audit written as policy reports"' in line]


def test_no_cluster_policy_report_is_written_when_no_result_is_about_a_cluster_scoped_object(here: Here) -> None:
    from kubernetes.client.exceptions import ApiException

    wait_until(lambda: here.report() is not None, timeout=60, what="the report")
    with pytest.raises(ApiException) as refused:
        here.cluster.objects.get_cluster_custom_object(reports.GROUP, reports.VERSION, reports.CLUSTER_PLURAL,
                                                       reports.NAME)
    assert refused.value.status == 404
