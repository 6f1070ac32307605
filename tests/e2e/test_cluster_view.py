"""The cluster view end to end: ``placement-webhook serve --kubeconfig ... --cluster-view on`` watching
a real kube-apiserver's Namespaces, Nodes and PriorityClasses while the API server calls it.

The webhook of this module is a second one, registered under its own MutatingWebhookConfiguration
that only selects namespaces labelled ``VIEW_LABEL``; those namespaces also carry the
``placement.novasphere.dev/skip`` label, so the session's other webhook (test_api_server) never
touches them. The offline tests at the end check the same expectations against ``admission.admit``
with a static view, so they run everywhere; the rest needs KUBEBUILDER_ASSETS.

The view is eventually consistent, so every wait below is bounded and polls with dry-run creates
(the API server calls mutating webhooks on dry-run requests when they declare ``sideEffects: None``).
"""
from __future__ import annotations

import copy
import functools
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.e2e_workloads import pod_spec, workload
from tests.kit.envtest import ControlPlane, Webhook, wait_until, webhook_configuration
from webhook import ANNOTATION_SKIP
from webhook.cluster.view import StaticClusterView
from webhook.engine import admission, review
from webhook.policy import loader

WAIT = 30.0  # seconds: every wait on the view is bounded by this
VIEW_LABEL = "e2e.novasphere.dev/cluster-view"
TEAM_LABEL = "e2e.novasphere.dev/team"
SUITE_LABEL = "e2e.novasphere.dev/suite"
POOL_LABEL = "e2e.novasphere.dev/pool"
HOSTNAME = "kubernetes.io/hostname"
HEARTBEAT = "e2e.novasphere.dev/heartbeat"
LATE_CLASS = "e2e-late-priority"
ROLLOUT_POOL = "cluster-view-rollout"
RESOURCES = ("namespaces", "nodes", "priorityclasses")

POLICIES_YAML = f"""\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {{name: cv-team-blue}}
spec:
  match:
    kinds: [Deployment]
    namespaceSelector: {{matchLabels: {{{TEAM_LABEL}: blue}}}}
  placement:
    nodeSelector: {{{POOL_LABEL}: blue}}
---
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {{name: cv-late-priority}}
spec:
  match:
    kinds: [Deployment]
    namespaceSelector: {{matchLabels: {{{SUITE_LABEL}: priority}}}}
  scheduling:
    priorityClassName: {LATE_CLASS}
    preemptionPolicy: Never
---
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata: {{name: cv-safe-rollout}}
spec:
  match:
    kinds: [Deployment]
    namespaceSelector: {{matchLabels: {{{SUITE_LABEL}: rollout}}}}
  placement:
    nodeSelector: {{{POOL_LABEL}: {ROLLOUT_POOL}}}
    podAntiAffinity: {{spread: required}}
  rollout: {{mode: safe}}
"""


# --- what the tests look at ---------------------------------------------------------------------


def in_blue_pool(obj: dict[str, Any]) -> bool:
    return (pod_spec(obj).get("nodeSelector") or {}).get(POOL_LABEL) == "blue"


def strategy_of(obj: dict[str, Any]) -> tuple[Any, Any]:
    rolling = ((obj["spec"].get("strategy") or {}).get("rollingUpdate")) or {}
    return rolling.get("maxSurge"), rolling.get("maxUnavailable")


def spread_terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    anti = (pod_spec(obj).get("affinity") or {}).get("podAntiAffinity") or {}
    return list(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def revision_scoped(obj: dict[str, Any]) -> bool:
    """The engine's spread term is scoped to one revision (rule 3's matchLabelKeys form)."""
    return any("pod-template-hash" in (t.get("matchLabelKeys") or ()) for t in spread_terms(obj))


def missing_class_warning(warnings: list[str]) -> bool:
    return any(f"PriorityClass {LATE_CLASS} does not exist in the cluster" in w for w in warnings)


def deployment(name: str) -> dict[str, Any]:
    return workload("Deployment", name)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# --- the webhook with a cluster view ------------------------------------------------------------


def view_webhook_configuration(server: Webhook) -> dict[str, Any]:
    """The chart's configuration under another name, selecting only this module's namespaces."""
    config = webhook_configuration(url=server.url, ca_bundle=server.ca_bundle)
    config["metadata"] = {"name": "e2e-cluster-view"}
    (hook,) = config["webhooks"]
    hook["name"] = "cluster-view.placement.novasphere.dev"
    hook["namespaceSelector"] = {"matchLabels": {VIEW_LABEL: "true"}}
    return config


class View:
    """The webhook under test and what the tests need of its cluster view."""

    def __init__(self, cluster: Any, server: Webhook, beacon: str) -> None:
        self.cluster = cluster
        self.server = server
        self.beacon = beacon  # the namespace, node and PriorityClass heartbeats touch
        self._fresh_at = 0.0

    def wait_synced(self) -> None:
        """Every informer completed its first list (the metric the server exports per resource)."""
        for resource in RESOURCES:
            wait_until(functools.partial(self._synced, resource),
                       what=f"placement_webhook_cluster_view_synced{{resource={resource!r}}} 1", timeout=WAIT)

    def _synced(self, resource: str) -> bool:
        return self.server.view_metric("synced", resource) == 1.0

    def _events(self, resource: str) -> float:
        return self.server.view_metric("events_total", resource) or 0.0

    def _heard(self, resource: str, since: float) -> bool:
        return self._events(resource) > since

    def heartbeat(self, *, timeout: float = WAIT) -> None:
        """Make the API server say something on every watch, and wait until the view heard it.

        The server forgets its view after --cluster-view-max-age (30 s here) without word from
        the API server. Without kubelets nothing changes Nodes or PriorityClasses, and the API
        server's own watch bookmarks come about once a minute (cacheWatcher.nextBookmarkTime:
        "roughly every minute", and 2 s before the watch's deadline), so a quiet resource
        would go stale mid-test. Touching an annotation sends a MODIFIED event on each watch."""
        before = {r: self._events(r) for r in RESOURCES}
        patch = {"namespaces": self.cluster.core.patch_namespace, "nodes": self.cluster.core.patch_node,
                 "priorityclasses": self.cluster.scheduling.patch_priority_class}

        def stamp(resources: list[str]) -> None:
            body = {"metadata": {"annotations": {HEARTBEAT: str(time.time_ns())}}}
            for resource in resources:
                patch[resource](self.beacon, body, _content_type="application/merge-patch+json")

        def heard_all() -> bool:
            unheard = [r for r in RESOURCES if not self._heard(r, before[r])]
            # A stamp can go unheard for good: after a watch gets 410 Gone the informer relists,
            # and a relist replaces the store without counting an event (as client-go's Replace
            # does), so a stamp that landed inside the relist is never an event. Stamp again: the
            # next one reaches the new watch.
            stamp(unheard)
            return not unheard

        stamp(list(RESOURCES))
        wait_until(heard_all, what="the cluster view to receive a heartbeat on every watch", timeout=timeout, interval=2.0)
        self._fresh_at = time.monotonic()

    def keep_fresh(self) -> None:
        """A heartbeat when the last one is older than a third of the view's max age."""
        if time.monotonic() - self._fresh_at > self.server.view_max_age / 3:
            self.heartbeat()

    def dry_run(self, namespace: str, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        self.keep_fresh()
        answer: tuple[dict[str, Any], list[str]] = self.cluster.create_warned(namespace, copy.deepcopy(obj), dry_run=True)
        return answer

    def until(self, namespace: str, obj: dict[str, Any], check: Callable[[dict[str, Any], list[str]], bool],
              *, what: str) -> None:
        """Dry-run ``obj`` until the answer passes ``check``; fails after WAIT seconds with ``what``
        and the last answer's strategy, nodeSelector and warnings."""
        last: list[tuple[dict[str, Any], list[str]]] = []

        def passes() -> bool:
            last[:] = [self.dry_run(namespace, obj)]
            return check(*last[0])

        try:
            wait_until(passes, what=what, timeout=WAIT, interval=0.5)
        except TimeoutError as exc:
            seen, warnings = last[0] if last else ({"spec": {"template": {"spec": {}}}}, [])
            raise AssertionError(f"{exc}; last dry run: nodeSelector={pod_spec(seen).get('nodeSelector')}, "
                                 f"strategy={seen['spec'].get('strategy')}, warnings={warnings}") from None


def _namespace(cluster: Any, **labels: str) -> str:
    """A namespace this module's webhook selects and the session's other webhook skips."""
    return str(cluster.create_namespace(labels={VIEW_LABEL: "true", ANNOTATION_SKIP: "true", **labels}))


def _node(cluster: Any, name: str, **labels: str) -> None:
    """A Node object, no kubelet behind it. The TaintNodesAtCreation admission plugin
    (plugin/pkg/admission/nodetaint, TaintNodesByCondition in older releases; on by default)
    gives every new Node the node.kubernetes.io/not-ready:NoSchedule taint, on CREATE only, and
    no node lifecycle controller runs here to lift it. The taints are cleared with a patch, as
    that controller does once a node is Ready: with it no pod without a toleration fits."""
    cluster.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
    cluster.core.patch_node(name, [{"op": "add", "path": "/spec/taints", "value": []}],
                            _content_type="application/json-patch+json")


def _priority_class(cluster: Any, name: str, value: int, **fields: Any) -> None:
    cluster.scheduling.create_priority_class(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value, **fields}
    )


@pytest.fixture(scope="module")
def view(control_plane: ControlPlane, cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[View]:
    workdir = tmp_path_factory.mktemp("webhook-cluster-view")
    policies = workdir / "policies"
    policies.mkdir()
    (policies / "cluster-view.yaml").write_text(POLICIES_YAML)
    beacon = unique("e2e-beacon")
    _namespace_named(cluster, beacon)
    _node(cluster, beacon)  # no hostname or pool label: it never counts as a topology domain
    _priority_class(cluster, beacon, 1)
    server = Webhook(workdir=workdir, policies=policies, kubeconfig=control_plane.write_kubeconfig(workdir / "kubeconfig"))
    server.start()
    config = view_webhook_configuration(server)
    try:
        cluster.admission.create_mutating_webhook_configuration(config)
        watched = View(cluster, server, beacon)
        watched.wait_synced()
        watched.heartbeat()
        yield watched
    finally:
        _delete_quietly(lambda: cluster.admission.delete_mutating_webhook_configuration(config["metadata"]["name"]))
        server.stop()


def _namespace_named(cluster: Any, name: str) -> None:
    cluster.core.create_namespace({"metadata": {"name": name}})


def _delete_quietly(delete: Callable[[], Any]) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        delete()
    except ApiException as exc:
        if exc.status != 404:
            raise


# --- (a) (b) namespaceSelector ------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_a_namespace_selector_places_workloads_of_matching_namespaces_only(cluster: Any, view: View) -> None:
    # Created before the blue one: a watch delivers events in resourceVersion order, so once the
    # view knows the blue namespace it knows this one too, and "not placed" below is a decision.
    other = _namespace(cluster, **{TEAM_LABEL: "green"})
    blue = _namespace(cluster, **{TEAM_LABEL: "blue"})
    view.until(blue, deployment("probe"), lambda obj, _w: in_blue_pool(obj),
               what=f"the view to know namespace {blue} and the policy to place its Deployment")
    view.keep_fresh()
    cluster.create(blue, deployment("web"))
    cluster.create(other, deployment("web"))
    assert in_blue_pool(cluster.get(blue, "Deployment", "web"))
    assert not in_blue_pool(cluster.get(other, "Deployment", "web"))


@pytest.mark.e2e
@pytest.mark.slow
def test_a_namespace_relabelled_while_serving_is_seen_by_the_next_create(cluster: Any, view: View) -> None:
    namespace = _namespace(cluster, **{TEAM_LABEL: "green"})
    marker = _namespace(cluster, **{TEAM_LABEL: "blue"})  # created after: known means both known
    view.until(marker, deployment("probe"), lambda obj, _w: in_blue_pool(obj), what=f"the view to know {marker}")
    assert not in_blue_pool(view.dry_run(namespace, deployment("before"))[0])

    cluster.core.patch_namespace(namespace, {"metadata": {"labels": {TEAM_LABEL: "blue"}}},
                                 _content_type="application/merge-patch+json")
    view.until(namespace, deployment("probe"), lambda obj, _w: in_blue_pool(obj),
               what=f"the view to see namespace {namespace} relabelled team=blue")
    cluster.create(namespace, deployment("after"))
    assert in_blue_pool(cluster.get(namespace, "Deployment", "after"))

    cluster.core.patch_namespace(namespace, {"metadata": {"labels": {TEAM_LABEL: "green"}}},
                                 _content_type="application/merge-patch+json")
    view.until(namespace, deployment("probe"), lambda obj, _w: not in_blue_pool(obj),
               what=f"the view to see namespace {namespace} relabelled back to team=green")


# --- (c) a PriorityClass created later -----------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_a_priority_class_created_after_the_warning_is_known_to_the_next_admission(cluster: Any, view: View) -> None:
    namespace = _namespace(cluster, **{SUITE_LABEL: "priority"})

    def warned(obj: dict[str, Any], warnings: list[str]) -> bool:
        # The policy applies (its namespace is known), so its class check ran and said so.
        return pod_spec(obj).get("priorityClassName") == LATE_CLASS and missing_class_warning(warnings)

    view.until(namespace, deployment("probe"), warned,
               what=f'the warning "PriorityClass {LATE_CLASS} does not exist in the cluster"')
    view.keep_fresh()
    created, warnings = cluster.create_warned(namespace, deployment("before"))
    assert missing_class_warning(warnings), warnings
    assert "preemptionPolicy" not in pod_spec(created)  # written only for a class the view knows

    _priority_class(cluster, LATE_CLASS, 1000, preemptionPolicy="Never", description="e2e: created late")
    try:
        view.until(namespace, deployment("probe"), lambda obj, w: not missing_class_warning(w)
                   and pod_spec(obj).get("preemptionPolicy") == "Never",
                   what=f"the view to know PriorityClass {LATE_CLASS}")
        view.keep_fresh()
        created, warnings = cluster.create_warned(namespace, deployment("after"))
        assert not missing_class_warning(warnings), warnings
        assert pod_spec(created).get("priorityClassName") == LATE_CLASS
        assert pod_spec(created).get("preemptionPolicy") == "Never"
    finally:
        _delete_quietly(lambda: cluster.scheduling.delete_priority_class(LATE_CLASS))


# --- (d) safe rollouts count the nodes -----------------------------------------------------------


@pytest.fixture
def rollout_nodes(cluster: Any, view: View) -> Iterator[list[str]]:
    """Three schedulable nodes, each its own kubernetes.io/hostname domain, in the policy's pool."""
    names = [unique("e2e-node") for _ in range(3)]
    for name in names:
        _node(cluster, name, **{HOSTNAME: name, POOL_LABEL: ROLLOUT_POOL})
    try:
        yield names
    finally:
        for name in names:
            _delete_quietly(functools.partial(cluster.core.delete_node, name))


def _cordoned_expectation(control_plane: ControlPlane) -> tuple[tuple[Any, Any], bool]:
    """Rule 3 of a safe rollout with too few domains: maxSurge 0 / maxUnavailable 1 before 1.31.
    From 1.31 (MatchLabelKeysInPodAffinity beta, on by default; the server's --match-label-keys
    auto reads the version) the engine scopes its spread term to one revision instead, after which
    surging is safe again: maxSurge 1 / maxUnavailable 0 with matchLabelKeys [pod-template-hash]."""
    if control_plane.server_version() >= (1, 31):
        return (1, 0), True
    return (0, 1), False


@pytest.mark.e2e
@pytest.mark.slow
def test_a_safe_rollout_surges_only_while_a_spare_node_is_schedulable(
    cluster: Any, control_plane: ControlPlane, view: View, rollout_nodes: list[str]
) -> None:
    namespace = _namespace(cluster, **{SUITE_LABEL: "rollout"})
    # Rule 2: three eligible hostname domains for two replicas leave room for one surge pod.
    # Not revision-scoped: from 1.31 a view without these nodes also gives (1, 0), but scoped.
    view.until(namespace, deployment("probe"), lambda obj, _w: strategy_of(obj) == (1, 0) and not revision_scoped(obj),
               what="maxSurge 1/maxUnavailable 0 with three schedulable nodes for two replicas")
    view.keep_fresh()
    cluster.create(namespace, deployment("roomy"))
    roomy = cluster.get(namespace, "Deployment", "roomy")
    assert strategy_of(roomy) == (1, 0) and spread_terms(roomy) and not revision_scoped(roomy)

    # A cordoned node fails the NodeUnschedulable filter: two domains left for two replicas.
    cluster.core.patch_node(rollout_nodes[0], {"spec": {"unschedulable": True}},
                            _content_type="application/merge-patch+json")
    wanted, scoped = _cordoned_expectation(control_plane)
    view.until(namespace, deployment("probe"), lambda obj, _w: revision_scoped(obj) == scoped and strategy_of(obj) == wanted,
               what=f"maxSurge/maxUnavailable {wanted} once node {rollout_nodes[0]} is cordoned")
    view.keep_fresh()
    cluster.create(namespace, deployment("tight"))
    tight = cluster.get(namespace, "Deployment", "tight")
    assert strategy_of(tight) == wanted and revision_scoped(tight) == scoped


# --- (e) readiness never depends on the API server ----------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_readyz_stays_200_while_the_api_server_is_stopped(control_plane: ControlPlane, view: View) -> None:
    errors_before = _view_errors(view.server)
    with control_plane.apiserver_stopped():
        # The informers notice (their watches break and reconnects fail): the outage is real.
        wait_until(lambda: _view_errors(view.server) > errors_before,
                   what="the cluster view to count a failed list or watch", timeout=WAIT)
        deadline = time.monotonic() + 10.0  # a few of the informers' backoff steps (0.8 s doubling)
        while time.monotonic() < deadline:
            assert view.server.readyz() == (200, 200), "/readyz must not depend on the API server"
            time.sleep(0.5)
    # Back: the watches resume (or relist) and the view hears the API server again. The informers
    # back off 0.8 s doubling to a 30 s cap with up to 100% jitter (the reflector's backoff
    # manager), so the next attempt may be a minute away.
    view.heartbeat(timeout=90.0)


def _view_errors(server: Webhook) -> float:
    return sum(server.view_metric("errors_total", r) or 0.0 for r in RESOURCES)


# --- the same expectations offline, against admission.admit and a static view --------------------


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder: Path = tmp_path_factory.mktemp("cluster-view-policies")
    (folder / "cluster-view.yaml").write_text(POLICIES_YAML)
    return loader.load([folder])


def _admit(policies: Any, namespace: str, view: StaticClusterView) -> Any:
    request = review.request_for_object(deployment("web"), namespace=namespace)
    return admission.admit(request, policies=policies, cluster=view)


def _pool_node(name: str, *, cordoned: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {HOSTNAME: name, POOL_LABEL: ROLLOUT_POOL}},
            "spec": {"unschedulable": cordoned}}


def test_offline_the_namespace_selector_follows_the_namespace_labels(policies: Any) -> None:
    view = StaticClusterView(namespaces={"blue": {TEAM_LABEL: "blue"}, "green": {TEAM_LABEL: "green"}})
    assert in_blue_pool(_admit(policies, "blue", view).object)
    assert not in_blue_pool(_admit(policies, "green", view).object)


def test_offline_an_unknown_priority_class_warns_and_a_known_one_gets_its_preemption_policy(policies: Any) -> None:
    namespaces = {"prio": {SUITE_LABEL: "priority"}}
    missing = _admit(policies, "prio", StaticClusterView(namespaces=namespaces))
    assert missing_class_warning(missing.warnings) and "preemptionPolicy" not in pod_spec(missing.object)
    known = StaticClusterView(namespaces=namespaces, priority_classes={LATE_CLASS: {"value": 1000, "preemptionPolicy": "Never"}})
    outcome = _admit(policies, "prio", known)
    assert not missing_class_warning(outcome.warnings) and pod_spec(outcome.object)["preemptionPolicy"] == "Never"


@pytest.mark.parametrize(("match_label_keys", "wanted", "scoped"), [(False, (0, 1), False), (True, (1, 0), True)],
                         ids=["before-1.31", "from-1.31"])
def test_offline_a_cordoned_node_takes_away_the_room_to_surge(
    policies: Any, match_label_keys: bool, wanted: tuple[int, int], scoped: bool
) -> None:
    namespaces = {"roll": {SUITE_LABEL: "rollout"}}
    nodes = [_pool_node("n1"), _pool_node("n2"), _pool_node("n3")]
    roomy = _admit(policies, "roll", StaticClusterView(namespaces=namespaces, nodes=nodes, match_label_keys=match_label_keys))
    assert strategy_of(roomy.object) == (1, 0) and not revision_scoped(roomy.object)
    nodes[0] = _pool_node("n1", cordoned=True)
    tight = _admit(policies, "roll", StaticClusterView(namespaces=namespaces, nodes=nodes, match_label_keys=match_label_keys))
    assert strategy_of(tight.object) == wanted and revision_scoped(tight.object) == scoped


def test_the_view_configuration_selects_only_this_module_s_namespaces(tmp_path: Path) -> None:
    server = Webhook(workdir=tmp_path, policies=tmp_path)
    (tmp_path / "webhook-pki").mkdir()
    (tmp_path / "webhook-pki" / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----")
    (hook,) = view_webhook_configuration(server)["webhooks"]
    assert hook["namespaceSelector"] == {"matchLabels": {VIEW_LABEL: "true"}}
    assert hook["clientConfig"]["url"] == server.url and hook["sideEffects"] == "None"


def test_the_webhook_is_started_with_the_cluster_view(tmp_path: Path) -> None:
    argv = Webhook(workdir=tmp_path, policies=tmp_path, kubeconfig=tmp_path / "kubeconfig")._argv()
    assert {f"--kubeconfig={tmp_path / 'kubeconfig'}", "--cluster-view=on", "--cluster-view-max-age=30"} <= set(argv)
    assert not any(a.startswith("--kubeconfig") for a in Webhook(workdir=tmp_path, policies=tmp_path)._argv())
