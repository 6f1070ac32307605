"""``placement-webhook label-nodes`` against a real API server (the e2e tier).

Nodes are created through the API with their allocatable written to ``status`` (no kubelet runs
here), pods are bound to them by ``spec.nodeName`` at creation (no scheduler is needed), and the
labeler runs as a user runs it: ``placement-webhook label-nodes --once --kubeconfig FILE`` in its
own process. Nodes are cluster-scoped and shared with the other tests of the session: the
labeler labels every node it sees, and these tests look only at their own.
"""
from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.envtest import ROOT, ControlPlane
from tests.kit.envtest import raw_json as _json
from webhook import ANNOTATION_SKIP
from webhook.labeler.values import PREFIX

MERGE_PATCH = "application/merge-patch+json"




def label_nodes(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", "label-nodes", "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)


class World:
    """Two nodes of this test's own, a namespace, and pods bound to the nodes."""

    def __init__(self, cluster: Any) -> None:
        self.core = cluster.core
        suffix = uuid.uuid4().hex[:6]
        self.namespace = str(cluster.create_namespace(labels={ANNOTATION_SKIP: "true"}))
        self.nodes = [f"e2e-label-{suffix}-a", f"e2e-label-{suffix}-b"]
        self.foreign = {"team.example.com/owner": "storage"}  # a label the labeler must not touch
        for name, gpus in zip(self.nodes, (0, 2), strict=True):
            body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(self.foreign)}}
            _json(self.core.create_node(body, _preload_content=False))
            allocatable = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110"}
            if gpus:
                allocatable["nvidia.com/gpu"] = str(gpus)
            status = {"capacity": allocatable, "allocatable": allocatable}
            _json(self.core.patch_node_status(name, {"status": status}, _content_type=MERGE_PATCH,
                                              _preload_content=False))

    def bind(self, name: str, node: str, *, cpu: str, gpus: int = 0) -> None:
        requests = {"cpu": cpu, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
        limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}  # extended resources need limit == request
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": self.namespace},
               "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                        "resources": {"requests": requests, "limits": limits}}]}}
        _json(self.core.create_namespaced_pod(self.namespace, pod, _preload_content=False))

    def delete(self, name: str) -> None:
        # No kubelet confirms a graceful deletion here: delete at once.
        _json(self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0, _preload_content=False))

    def labels(self, node: str) -> dict[str, str]:
        return dict(_json(self.core.read_node(node, _preload_content=False))["metadata"].get("labels") or {})

    def tear_down(self) -> None:
        from kubernetes.client.exceptions import ApiException

        for name in self.nodes:
            try:
                self.core.delete_node(name, _preload_content=False)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def world(cluster: Any) -> Iterator[World]:
    created = World(cluster)
    try:
        yield created
    finally:
        created.tear_down()


@pytest.fixture
def kubeconfig(control_plane: ControlPlane, tmp_path: Path) -> Path:
    return control_plane.write_kubeconfig(tmp_path / "kubeconfig")


def test_labels_appear_a_second_pass_writes_nothing_and_a_deleted_pod_moves_a_step(
        world: World, kubeconfig: Path) -> None:
    a, b = world.nodes
    world.bind("web-1", a, cpu="1")
    world.bind("train-1", b, cpu="500m", gpus=1)

    first = label_nodes(kubeconfig, "--once")
    assert first.returncode == 0, first.stderr
    labels_a, labels_b = world.labels(a), world.labels(b)
    assert labels_a[PREFIX + "cpu-available"] == "3000" and labels_a[PREFIX + "cpu-usage"] == "25"
    assert labels_a[PREFIX + "gpu-available"] == "0" and labels_b[PREFIX + "gpu-available"] == "1"
    assert labels_b[PREFIX + "cpu-available"] == "3500"
    assert all(labels_a[k] == v for k, v in world.foreign.items()), "a label it does not own is kept"

    second = label_nodes(kubeconfig, "--once")
    assert second.returncode == 0 and " 0 written" in second.stderr, second.stderr
    assert world.labels(a) == labels_a and world.labels(b) == labels_b

    world.delete("web-1")
    third = label_nodes(kubeconfig, "--once")
    assert third.returncode == 0, third.stderr
    assert world.labels(a)[PREFIX + "cpu-available"] == "4000" and world.labels(a)[PREFIX + "cpu-usage"] == "0"
    assert world.labels(b) == labels_b


def test_the_writes_are_owned_by_the_labelers_field_manager(world: World, kubeconfig: Path) -> None:
    done = label_nodes(kubeconfig, "--once")
    assert done.returncode == 0, done.stderr
    node = _json(world.core.read_node(world.nodes[0], _preload_content=False))
    managers = {entry.get("manager") for entry in node["metadata"].get("managedFields") or ()}
    assert "label-nodes" in managers


def test_a_dry_run_shows_the_labels_and_writes_none(world: World, kubeconfig: Path) -> None:
    done = label_nodes(kubeconfig, "--dry-run")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert [world.nodes[0], "cpu-available", "-", "4000", "write"] in rows
    assert PREFIX + "cpu-available" not in world.labels(world.nodes[0])
