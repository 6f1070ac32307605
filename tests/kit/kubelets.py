"""The kubelets of nodes that have none: a test's thread that does, through the API, what a
kubelet would do for the pods of one namespace on its nodes.

No kubelet runs in the control planes of the e2e and fault tiers, so a pod bound to a node
would stay Pending and a deleted one Terminating for ever. Every ``interval`` seconds the thread
lists the namespace's pods, marks each one bound to one of its nodes Running and Ready (what a
kubelet reports once the containers run and pass their readiness probe), and removes the
terminating ones at once (what a kubelet does once their containers have stopped). While
``recording``, it also samples which pods labelled ``app`` are Ready, as the disruption
controller counts them; while ``hold`` is set it starts nothing (a slow image pull), so a test
decides when a replacement becomes Ready.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.kit.envtest import ControlPlane, raw_json

MERGE_PATCH = "application/merge-patch+json"


def is_ready(pod: Mapping[str, Any]) -> bool:
    """Counted as healthy by the disruption controller: not being deleted, and Ready."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def running_status() -> dict[str, Any]:
    """What a kubelet reports once the containers run and pass their readiness probe."""
    now = now_rfc3339()
    return {"phase": "Running", "startTime": now,
            "conditions": [{"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                           for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]}


@dataclass(frozen=True)
class Sample:
    at: float
    ready: tuple[str, ...]  # names of the app's Ready pods
    pods: tuple[tuple[str, str, bool], ...]  # (name, node, terminating) of every pod of the app


def fewest_ready(samples: list[Sample]) -> int:
    return min((len(s.ready) for s in samples), default=0)


class Kubelets(threading.Thread):
    """The kubelets of ``nodes`` for the pods of ``namespace``; see the module docstring."""

    def __init__(self, control_plane: ControlPlane, namespace: str, nodes: tuple[str, ...], *, app: str,
                 interval: float = 0.1) -> None:
        super().__init__(name="fake-kubelets", daemon=True)
        from kubernetes import client

        self.api_client = control_plane.api_client()  # its own: the test's thread has the other one
        self.core: Any = client.CoreV1Api(self.api_client)
        self.namespace = namespace
        self.nodes = frozenset(nodes)
        self.app = app
        self.interval = interval
        self.recording = threading.Event()
        self.hold = threading.Event()
        self.halt = threading.Event()
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self.marked: list[str] = []

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - reported by the test, never a dead thread
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self.halt.wait(self.interval)

    def pods(self) -> list[dict[str, Any]]:
        listed = raw_json(self.core.list_namespaced_pod(self.namespace, _preload_content=False))
        return list(listed.get("items") or ())

    def step(self) -> None:
        pods = self.pods()
        if self.recording.is_set():
            self.samples.append(self.sample(pods))
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") in self.nodes:  # else not bound yet, or not here
                self.tend(pod)

    def sample(self, pods: list[dict[str, Any]]) -> Sample:
        mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("app") == self.app]
        return Sample(time.monotonic(), tuple(sorted(p["metadata"]["name"] for p in mine if is_ready(p))),
                      tuple(sorted((p["metadata"]["name"], p["spec"].get("nodeName") or "",
                                    bool(p["metadata"].get("deletionTimestamp"))) for p in mine)))

    def tend(self, pod: Mapping[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        name = pod["metadata"]["name"]
        try:
            if pod["metadata"].get("deletionTimestamp"):
                raw_json(self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0,
                                                         _preload_content=False))
            elif not is_ready(pod) and not self.hold.is_set():
                raw_json(self.core.patch_namespaced_pod_status(name, self.namespace, {"status": running_status()},
                                                               _content_type=MERGE_PATCH, _preload_content=False))
                self.marked.append(name)
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone meanwhile, or changed meanwhile: next round
                raise

    def stop(self) -> None:
        self.halt.set()
        if self.ident is not None:  # started
            self.join(10)
        self.api_client.close()


def tear_down(core: Any, objects: Any, *, namespace: str, app: str, budget: tuple[str, str], kubelets: Kubelets,
              nodes: Iterable[str]) -> None:
    """Undo a scenario of a Deployment ``app`` under a PodDisruptionBudget ``app`` (``budget``:
    its group and version) on ``nodes`` tended by ``kubelets``: the garbage collector removes the
    ReplicaSet and its pods and the kubelets finish them (after 30 s they are deleted at once),
    then the kubelets stop and the nodes go."""
    from tests.kit.envtest import quietly, wait_until

    def pods() -> list[Any]:
        listed = raw_json(core.list_namespaced_pod(namespace, label_selector=f"app={app}", _preload_content=False))
        return list(listed.get("items") or ())

    quietly(lambda: objects.delete_namespaced_custom_object("apps", "v1", namespace, "deployments", app,
                                                            propagation_policy="Background"))
    quietly(lambda: objects.delete_namespaced_custom_object(*budget, namespace, "poddisruptionbudgets", app))
    try:
        wait_until(lambda: not pods(), what="the Deployment's pods to go", timeout=30)
    except TimeoutError:
        quietly(lambda: raw_json(core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0,
                                                                       _preload_content=False)))
    finally:
        kubelets.stop()
    for name in nodes:
        quietly(lambda name=name: raw_json(core.delete_node(name, _preload_content=False)))  # type: ignore[misc]
