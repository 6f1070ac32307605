"""``placement-webhook audit --kubeconfig`` on a real v1.20 kube-apiserver lists every workload kind
the engine places, each where the server serves it: a Job from batch/v1, a CronJob from
batch/v1beta1 (a 1.20 server serves batch/v1 for Jobs only), a KubeVirt VirtualMachine from the CRD
the tier installs; the kinds whose CRDs are not installed are one note on stderr. A policy that
wants a node pool fails all three.

The namespace carries the skip label, so the session's webhook leaves these objects as they are
created. Needs KUBEBUILDER_ASSETS (docs/install.md); skipped with that message otherwise.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.kit.envtest import ControlPlane

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
POLICY = "e2e-audit-batch-pool"
POOL = "e2e.novasphere.dev/batch-pool"
POLICY_YAML = f"""\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: {POLICY}
spec:
  match:
    kinds: [Job, CronJob, kubevirt.io/VirtualMachine]
  placement:
    nodeSelector:
      {POOL}: batch
"""
TEMPLATE = {"metadata": {"labels": {"app": "report"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}}
# (group, version, plural, object): created through the API server as a user would.
OBJECTS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("batch", "v1", "jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "backup"},
                             "spec": {"template": TEMPLATE}}),
    ("batch", "v1beta1", "cronjobs", {
        "apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 1 * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}}}),
    ("kubevirt.io", "v1", "virtualmachines", {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "db"},
        "spec": {"runStrategy": "Halted", "template": {
            "metadata": {"labels": {"app": "db"}},
            "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}}}}}),
]


def test_a_live_audit_reports_a_job_a_cron_job_and_a_vm_that_a_policy_would_change(
        control_plane: ControlPlane, cluster: Any, skipped_namespace: str, tmp_path: Path) -> None:
    for group, version, plural, obj in OBJECTS:
        cluster.objects.create_namespaced_custom_object(group, version, skipped_namespace, plural, obj)
    (tmp_path / "policy.yaml").write_text(POLICY_YAML)
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "kubeconfig")
    argv = [sys.executable, "-m", "webhook", "audit", "--kubeconfig", str(kubeconfig),
            "--policies", str(tmp_path / "policy.yaml"), "-o", "json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_WEBHOOK_")}

    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env, cwd=ROOT)

    print(done.stderr)
    assert done.returncode == 1, done.stderr
    ours = [r for r in json.loads(done.stdout)["results"] if r["resource"]["namespace"] == skipped_namespace]
    failing = {(r["resource"]["apiVersion"], r["resource"]["kind"], r["resource"]["name"], r["rule"]): r
               for r in ours if r["policy"] == POLICY and r["result"] == "fail"}
    assert sorted(failing) == [("batch/v1", "Job", "backup", "nodeSelector"),
                               ("batch/v1beta1", "CronJob", "nightly", "nodeSelector"),
                               ("kubevirt.io/v1", "VirtualMachine", "db", "nodeSelector")]
    paths = {kind: failing[(api_version, kind, name, "nodeSelector")]["patch"][0]["path"]
             for api_version, kind, name, _ in failing}
    assert paths == {"Job": "/spec/template/spec/nodeSelector",
                     "CronJob": "/spec/jobTemplate/spec/template/spec/nodeSelector",
                     "VirtualMachine": "/spec/template/spec/nodeSelector"}
    # Each carries its uid as the API server stored it.
    stored = cluster.objects.get_namespaced_custom_object("batch", "v1beta1", skipped_namespace, "cronjobs", "nightly")
    assert failing[("batch/v1beta1", "CronJob", "nightly", "nodeSelector")]["resource"]["uid"] == \
        stored["metadata"]["uid"]
    # The VirtualMachine's CRD is installed, the other custom kinds' are not: one note, no error.
    assert ("note: not served by the API server, so none to audit: kubevirt.io/VirtualMachineInstance, "
            "kubevirt.io/VirtualMachineInstanceReplicaSet, pool.kubevirt.io/VirtualMachinePool, "
            "vm.novasphere.dev/Wukong") in done.stderr.splitlines()
    assert "error:" not in done.stderr
