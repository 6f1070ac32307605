"""The rolling update as the Deployment controller performs it, each new pod placed by the model."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.builders import ONE_PER_NODE, deployment, nodes, running
from webhook.scheduler import Cluster
from webhook.scheduler.rollouts import rolling_update


def test_adding_one_per_node_spread_with_surge_one_and_none_unavailable_is_stuck() -> None:
    cluster = Cluster.from_objects(nodes(2), running(2, 2))
    verdict = rolling_update(deployment(affinity=ONE_PER_NODE), cluster)
    assert not verdict.completes
    assert verdict.pending_pod is not None and verdict.pending_pod.startswith("web-")
    # The FitError, then DefaultPreemption: the old pods have no lower priority to evict.
    assert verdict.message == ("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. "
                               "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    assert verdict.min_available == 2  # stuck, but nothing was taken down
    assert "stuck after 1 step:" in verdict.summary()


def test_the_same_change_with_none_surged_and_one_unavailable_completes() -> None:
    cluster = Cluster.from_objects(nodes(2), running(2, 2))
    verdict = rolling_update(deployment(surge=0, unavailable=1, affinity=ONE_PER_NODE), cluster)
    assert verdict.completes, verdict.summary()
    assert (len(verdict.steps), verdict.min_available) == (4, 1)
    assert verdict.summary() == "the rollout completes in 4 steps with at least 1 of 2 replicas available"
    assert verdict.cluster is not None
    on = sorted(n.name for p, n in verdict.cluster.pods())
    assert on == ["n0", "n1"]  # one new pod per node, old ones gone


def test_a_spare_node_lets_the_surge_pod_land_and_the_rollout_finish_with_all_available() -> None:
    cluster = Cluster.from_objects(nodes(3), running(2, 2))
    verdict = rolling_update(deployment(affinity=ONE_PER_NODE), cluster)
    assert verdict.completes and verdict.min_available == 2


@settings(max_examples=60, deadline=None)
@given(replicas=st.integers(1, 12), surge=st.one_of(st.integers(0, 4), st.sampled_from(["0%", "10%", "25%", "50%"])),
       unavailable=st.one_of(st.integers(0, 4), st.sampled_from(["0%", "10%", "25%", "100%"])),
       count_nodes=st.integers(1, 4))
def test_without_constraints_every_rollout_completes_within_its_budgets(
        replicas: int, surge: Any, unavailable: Any, count_nodes: int) -> None:
    cluster = Cluster.from_objects(nodes(count_nodes), running(replicas, count_nodes))
    verdict = rolling_update(deployment(replicas, surge=surge, unavailable=unavailable), cluster)
    assert verdict.completes, verdict.summary()
    assert verdict.min_available >= replicas - verdict.max_unavailable
    assert all(step.pods <= replicas + verdict.max_surge for step in verdict.steps)
    assert verdict.cluster is not None
    assert not [p for p, _ in verdict.cluster.pods() if p.labels.get("pod-template-hash") == "old"]
    assert sum(1 for _ in verdict.cluster.pods()) == replicas


def test_a_template_no_node_can_take_is_stuck_with_the_node_affinity_message() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}
    verdict = rolling_update(deployment(affinity=affinity), Cluster.from_objects(nodes(2), running(2, 2)))
    assert not verdict.completes
    assert verdict.message.startswith("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")


def test_recreate_takes_every_old_pod_down_before_the_new_ones_land() -> None:
    cluster = Cluster.from_objects(nodes(2), running(2, 2))
    verdict = rolling_update(deployment(affinity=ONE_PER_NODE, strategy="Recreate"), cluster)
    assert verdict.completes and verdict.min_available == 0
    # recreate.go: scale the old ReplicaSets down, wait until no old pod runs, then scale up.
    first, second = verdict.steps
    assert (len(first.deleted), first.created, first.available) == (2, (), 0)
    assert len(second.created) == len(second.placed) == 2


def test_pods_of_other_workloads_are_not_old_pods() -> None:
    other = {"metadata": {"name": "db-0", "namespace": "default", "labels": {"app": "db"}},
             "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "i"}]}}
    cluster = Cluster.from_objects(nodes(2), [*running(2, 2), other])
    verdict = rolling_update(deployment(surge=0, unavailable=1, affinity=ONE_PER_NODE), cluster)
    assert verdict.completes
    assert all("db-0" not in s.deleted for s in verdict.steps)
