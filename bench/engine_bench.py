"""Engine throughput: typical Deployments per second through `admission.admit`, in process.

    python bench/engine_bench.py [--seconds 3] [--check]

The JSON is already decoded, as in the server after `review.parse`. Policy sets of 50 and 1,000
policies are generated the way platform teams write them: a few cluster-wide policies plus many
per-team ones spread over kinds and namespaces. A baseline in the same process (a JSON
round-trip of the same object, the cheapest thing a webhook must do anyway) gives a
machine-independent ratio next to the absolute figures.

Targets (issue 2): >= 5,000 Deployments/s at 50 policies, >= 2,000/s at 1,000 policies.
`--check` exits 1 when a target is missed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webhook.engine import admission, review
from webhook.files import documents
from webhook.policy import loader
from webhook.policy.policyset import PolicySet

TARGETS = {50: 5000.0, 1000: 2000.0}
KINDS = ["Deployment", "StatefulSet", "kubevirt.io/v1/VirtualMachine", "DaemonSet", "Job"]


def typical_deployment(i: int) -> dict[str, Any]:
    """A ~8 KiB Deployment like the ones in the corpus: several containers, probes, env, volumes."""
    containers = []
    for c in range(3):
        containers.append(
            {
                "name": f"c{c}",
                "image": f"registry.example.com/team/app-{c}:1.{i % 7}.{c}",
                "ports": [{"containerPort": 8080 + c, "name": f"http-{c}", "protocol": "TCP"}],
                "env": [{"name": f"ENV_{k}", "value": f"value-{k}-{'x' * 40}"} for k in range(24)],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080 + c}, "periodSeconds": 5},
                "livenessProbe": {"httpGet": {"path": "/live", "port": 8080 + c}, "periodSeconds": 10},
                "volumeMounts": [{"name": f"v{v}", "mountPath": f"/data/{v}"} for v in range(3)],
            }
        )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"web-{i}",
            "namespace": f"team-{i % 40}",
            "labels": {"app": f"web-{i}", "tier": "web", "team": f"team-{i % 40}"},
            "annotations": {"example.com/owner": f"team-{i % 40}", "deployment.kubernetes.io/revision": "3"},
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": f"web-{i}"}},
            "template": {
                "metadata": {"labels": {"app": f"web-{i}", "tier": "web", "version": "v1"}},
                "spec": {
                    "containers": containers,
                    "volumes": [{"name": f"v{v}", "emptyDir": {}} for v in range(3)],
                    "serviceAccountName": "web",
                },
            },
        },
    }


def policy_yaml(i: int) -> str:
    """One generated policy: a few cluster-wide ones, the rest belong to one team each."""
    kind = KINDS[i % len(KINDS)]
    if i < 10:
        match = f"kinds: [{kind}]\n    selector: {{matchLabels: {{tier: web}}}}"
    else:
        match = f"kinds: [{kind}]\n    namespaces: [team-{i % 40}]\n    names: [\"web-{i}*\"]"
    return f"""apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: policy-{i:04d}
spec:
  order: {i % 7}
  match:
    {match}
  placement:
    nodeAffinity:
      preferred:
      - weight: {1 + i % 100}
        preference:
          matchExpressions:
          - {{key: example.com/pool-{i % 13}, operator: In, values: [a, b]}}
    podAntiAffinity:
      spread: preferred
"""


def policy_set(count: int) -> PolicySet:
    text = "---\n".join(policy_yaml(i) for i in range(count))
    return loader.load_documents(documents.load_text(text, file=f"<generated {count}>"))


def rate(fn: Callable[[], Any], *, seconds: float, batch: int = 200) -> float:
    """Calls per second of `fn`, best of several rounds (the least disturbed by the machine)."""
    rounds = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(rounds) < 3:
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        rounds.append(batch / (time.perf_counter() - start))
    return max(rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    objects = [typical_deployment(i) for i in range(64)]
    size = statistics.mean(len(json.dumps(o)) for o in objects)
    requests = [review.request_for_object(o) for o in objects]
    it = iter(range(1 << 62))

    def baseline() -> None:
        json.loads(json.dumps(objects[next(it) % len(objects)]))

    base = rate(baseline, seconds=args.seconds)
    print(f"typical Deployment: {size / 1024:.1f} KiB of JSON")
    print(f"baseline (JSON round-trip of the object): {base:,.0f}/s")
    missed = False
    for count, target in TARGETS.items():
        policies = policy_set(count)
        patched = sum(admission.admit(r, policies=policies).result == "patched" for r in requests)

        def one(policies: PolicySet = policies) -> None:
            admission.admit(requests[next(it) % len(requests)], policies=policies)

        per_second = rate(one, seconds=args.seconds)
        ok = per_second >= target
        missed |= not ok
        print(
            f"{count:>5} policies: {per_second:>8,.0f} Deployments/s "
            f"({per_second / base:.2f}x baseline, {1e6 / per_second:.0f} us each, "
            f"{patched}/{len(requests)} patched) target {target:,.0f}/s {'ok' if ok else 'MISSED'}"
        )
    return 1 if (missed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
