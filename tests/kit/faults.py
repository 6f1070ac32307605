"""What the fault tier's tests share besides fixtures (tests/faults/conftest.py): the labels that
choose a namespace's failurePolicy and team, the policies its webhook serves, and how to wait
for the API server to call it."""
from __future__ import annotations

import uuid
from typing import Any

from tests.kit.e2e_workloads import placed, workload
from tests.kit.envtest import Cluster, Webhook, wait_until, webhook_configuration

FAILURE_POLICY_LABEL = "faults.novasphere.dev/failure-policy"
TEAM_LABEL = "faults.novasphere.dev/team"
TEAM_POOL_LABEL = "faults.novasphere.dev/team-pool"
# The e2e tier's policy (every Deployment and StatefulSet gets a node pool and spread), and one
# the cluster view decides: Deployments of namespaces labelled team=blue get the blue pool.
TEAM_POLICY_YAML = f"""\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {{name: faults-team-blue}}
spec:
  match:
    kinds: [Deployment]
    namespaceSelector: {{matchLabels: {{{TEAM_LABEL}: blue}}}}
  placement:
    nodeSelector: {{{TEAM_POOL_LABEL}: blue}}
"""
# The server's own default (``--cluster-view-max-age``): the view outlives an API server restart.
VIEW_MAX_AGE = 120


def fault_namespace(cluster: Cluster, *, failure_policy: str, **labels: str) -> str:
    """A new namespace sent to the webhook registered with ``failure_policy`` (Fail or Ignore)."""
    return cluster.create_namespace(labels={FAILURE_POLICY_LABEL: failure_policy, **labels})


def registered(server: Webhook, failure_policy: str) -> dict[str, Any]:
    """The chart's MutatingWebhookConfiguration with ``failure_policy``, for this tier's
    namespaces labelled with it (and the chart's own exclusions)."""
    config = webhook_configuration(url=server.url, ca_bundle=server.ca_bundle,
                                   values={"webhook": {"url": server.url, "failurePolicy": failure_policy}})
    config["metadata"] = {"name": f"faults-{failure_policy.lower()}"}
    (hook,) = config["webhooks"]
    hook["name"] = f"{failure_policy.lower()}.faults.placement.novasphere.dev"
    selector = hook.setdefault("namespaceSelector", {})
    selector.setdefault("matchLabels", {})[FAILURE_POLICY_LABEL] = failure_policy
    assert hook["failurePolicy"] == failure_policy
    return config


def wait_for_mutation(cluster: Cluster, namespace: str) -> None:
    """The API server loads webhook configurations asynchronously: dry-run until they bite."""
    wait_until(lambda: placed(cluster.create(namespace, workload("Deployment", f"warm-{uuid.uuid4().hex[:6]}"),
                                             dry_run=True)),
               what=f"the API server to call the webhook for namespace {namespace}", timeout=60, interval=0.5)


# The figures the tier's tests report (lost reviews, recovery times, memory growth), printed as they
# come (``-s`` shows them) and again in the run's terminal summary (tests/faults/conftest.py), so a
# CI log has them without ``-s``.
FIGURES: list[str] = []


def figure(line: str) -> None:
    print(f"\n{line}", end="")
    FIGURES.append(line)
