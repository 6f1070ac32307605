"""The training run of the profile-guided compiled build (``setup.py``).

    python _build_backend/pgo_training.py      # with the instrumented build importable

It drives the server's review path -- ``review.parse`` from bytes, ``admission.admit``,
``review.respond_body`` and the log fields -- over the kinds, operations and policy features
admission meets in a cluster, so that the compiler learns which branches are the common
ones (and which are error paths) from the work the server really does. Everything it needs
is generated here: the image's builder stage sees only the package and this folder.
"""
from __future__ import annotations

import copy
import itertools
import json
import sys
from typing import Any

import webhook
from webhook.engine import admission
from webhook.policy import loader
from webhook.engine import review
from webhook.files import documents as yamlsrc

ROUNDS = 10

# One policy per feature, each matching some of the objects below (``{i}`` varies names,
# weights and keys so that a set of many behaves like the ones teams write).
POLICIES = (
    """
  order: {order}
  match: {{kinds: [Deployment, StatefulSet], selector: {{matchLabels: {{tier: web}}}}}}
  placement:
    nodeAffinity:
      preferred: [{{weight: {weight}, preference: {{matchExpressions: [{{key: example.com/pool-{i}, operator: In, values: [a, b]}}]}}}}]
    podAntiAffinity: {{spread: preferred}}
""",
    """
  order: {order}
  match: {{kinds: [Deployment, StatefulSet, Pod, kubevirt.io/v1/VirtualMachine], namespaces: ["team-*", prod]}}
  placement:
    nodeAntiAffinity:
      required: [{{matchExpressions: [{{key: maintenance, operator: In, values: ["true"]}}]}}]
      preferred: [{{weight: {weight}, preference: {{matchExpressions: [{{key: example.com/draining-{i}, operator: Exists}}]}}}}]
""",
    """
  order: {order}
  match: {{kinds: [Deployment], selector: {{matchLabels: {{tier: web}}}}}}
  placement:
    podAntiAffinity: {{spread: required}}
    capacity: {{prefer: spot, provider: aks}}
  rollout: {{mode: safe}}
""",
    """
  order: {order}
  match: {{kinds: [StatefulSet, Job, CronJob], excludeNamespaces: [kube-system]}}
  onConflict: keep
  placement:
    nodeSelector: {{disktype: ssd}}
    nodeAffinity:
      required: [{{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [zone-a, zone-b]}}]}}]
    tolerations: [{{key: dedicated, operator: Equal, value: db, effect: NoSchedule}}]
    resources:
      preferredCPU: {{weight: 80, threshold: "70%"}}
      requiredResources: [{{resourceType: memory, minAvailable: 4Gi}}]
  scheduling: {{priorityClassName: high-priority, schedulerName: default-scheduler}}
""",
    """
  order: {order}
  match: {{kinds: [kubevirt.io/v1/VirtualMachine], annotations: {{example.com/gpu: "*"}}}}
  enforcement: audit
  placement:
    resources: {{requiredResources: [{{resourceType: gpu, minAvailable: "1"}}]}}
  vm: {{evictionStrategy: LiveMigrate}}
""",
)


def policy_set(count: int) -> Any:
    docs = []
    for i in range(count):
        body = POLICIES[i % len(POLICIES)].format(i=i, order=i % 7, weight=1 + i % 100)
        docs.append(f"apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\n"
                    f"metadata:\n  name: training-{i:04d}\nspec:{body}")
    return loader.load_documents(yamlsrc.load_text("---\n".join(docs), file="<pgo training>"))


def pod_spec(i: int, *, affinity: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": f"c{c}", "image": f"registry.example.com/app-{c}:1.{i}", "env": [{"name": f"E{k}", "value": "v" * 30} for k in range(12)],
             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}, "ports": [{"containerPort": 8080 + c}]}
            for c in range(2)
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
    }
    if affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]
    return spec


def objects(i: int) -> list[dict[str, Any]]:
    labels = {"app": f"app-{i}", "tier": "web" if i % 3 else "db"}
    meta = {"name": f"app-{i}", "namespace": f"team-{i % 5}", "labels": labels, "annotations": {"example.com/gpu": "1"}}
    template = {"metadata": {"labels": dict(labels)}, "spec": pod_spec(i, affinity=i % 2 == 0)}
    selector = {"matchLabels": {"app": f"app-{i}"}}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": 3, "selector": selector, "template": template,
                  "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
         "spec": {"replicas": 3, "serviceName": "db", "selector": selector, "template": template}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, "name": f"pod-{i}"}, "spec": pod_spec(i, affinity=i % 2 == 1)},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
         "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}}},
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta,
         "spec": {"running": True, "template": {"metadata": {"labels": dict(labels)},
                                                "spec": {"domain": {"devices": {}}, "volumes": []}}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"key": "value"}},  # not handled
    ]


def review_body(obj: dict[str, Any], *, operation: str, api_version: str, uid: int) -> bytes:
    group, _, version = obj["apiVersion"].rpartition("/")
    request: dict[str, Any] = {
        "uid": f"00000000-0000-0000-0000-{uid:012d}", "operation": operation,
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"], "object": obj,
    }
    if operation == "UPDATE":
        request["oldObject"] = copy.deepcopy(obj)
    return json.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "request": request}).encode()


def main() -> int:
    if not webhook.compiled_build():
        print("pgo_training: the compiled build is not importable from here", file=sys.stderr)
        return 1
    sets = [policy_set(10), policy_set(200)]
    cases = itertools.product(
        [obj for i in range(8) for obj in objects(i)], ("CREATE", "UPDATE"), review.API_VERSIONS
    )
    bodies = [review_body(obj, operation=op, api_version=version, uid=n) for n, (obj, op, version) in enumerate(cases)]
    patched = 0
    for _ in range(ROUNDS):
        for policies in sets:
            for body in bodies:
                request = review.parse(body)
                outcome = admission.admit(request, policies=policies)
                _answer, patch_bytes = review.respond_body(request, outcome)
                review.log_fields(request, outcome, patch_bytes, 0.001)
                patched += outcome.result == "patched"
    if not patched:  # a workload that patches nothing would train the wrong branches
        print("pgo_training: no review was patched", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
