"""The spot controller the chart runs with ``spotController.enabled``: ``placement-webhook spot-controller``
in a leader-elected Deployment, with its own ServiceAccount, the least RBAC it needs (derived from the
calls it makes, and checked against them by running it), and its SpotConfig in a ConfigMap."""
from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.chart.conftest import TLS_MODES
from tests.chart.test_extender import FULL_CONFIG, _anchors, _walk
from tests.chart.test_kubernetes_schemas import _validate_all
from tests.chart.test_pod_security import restricted_violations
from tests.cluster.conftest import until
from tests.kit.chart import ChartWorkload, granted, group_resource, selects
from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node, pod
from webhook.cluster import cache
from webhook.cluster.config import ClusterConfig
from webhook.cluster.snapshot import POD_PATH
from webhook.commands import common
from webhook.commands import spot_controller as spot_command
from webhook.runtime import leader
from webhook.spot import config as spot_config
from webhook.spot.config import SpotConfig

helm = pytest.importorskip("helm_python")

NAMESPACE = "placement-system"
NAME = "pw-placement-webhook-spot-controller"  # <release>-placement-webhook-spot-controller
WEBHOOK = "pw-placement-webhook"
LABELER = "pw-placement-webhook-label-nodes"
EXTENDER = "pw-placement-webhook-extender"
COMPONENT = "spot-controller"
ON: dict[str, Any] = {"spotController": {"enabled": True}}
EVERYTHING: dict[str, Any] = {
    "spotController": {
        "enabled": True,
        "replicaCount": 3,
        "provider": "karpenter",
        "drainTimeoutSeconds": 90.5,
        "excludeNamespaces": ["kube-system", "monitoring"],
        "config": FULL_CONFIG,
        "leaderElection": {"leaseDurationSeconds": 30, "renewDeadlineSeconds": 20, "retryPeriodSeconds": 4},
        "metricsPort": 9090,
        "logLevel": "debug",
        "extraArgs": ["--sync-timeout=120"],
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"karpenter.sh/capacity-type": "on-demand"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "serviceAccount": {"annotations": {"example.com/owner": "platform"}},
    },
    "imagePullSecrets": [{"name": "registry"}],
}

# The cluster-wide rules, literally: nothing more, nothing less.
CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["list", "watch"]},
]
LEASE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [NAME], "verbs": ["get", "update"]},
]


# --- helpers ----------------------------------------------------------------------------------


WORKLOAD = ChartWorkload(NAME, COMPONENT, "spot-controller")
spot_objects = WORKLOAD.objects
named = WORKLOAD.named
deployment = WORKLOAD.deployment
pod_spec = WORKLOAD.pod_spec
container = WORKLOAD.container
parse = WORKLOAD.parse


def mounted_files(rendered: Any) -> dict[str, tuple[str, str]]:
    """Path in the container -> (ConfigMap name, key) for the controller's configMap volumes."""
    mounts = {m["name"]: m["mountPath"] for m in container(rendered)["volumeMounts"]}
    return {f"{mounts[v['name']]}/{item['path']}": (v["configMap"]["name"], item["key"])
            for v in pod_spec(rendered)["volumes"] if "configMap" in v for item in v["configMap"]["items"]}


def config_text(rendered: Any) -> str:
    text: str = named(rendered, "ConfigMap")["data"]["config.yaml"]
    return text


@pytest.fixture(scope="module")
def on(render: Callable[..., Any]) -> Any:
    return render(ON)


@pytest.fixture(scope="module")
def everything(render: Callable[..., Any]) -> Any:
    return render(EVERYTHING)


# --- off by default ---------------------------------------------------------------------------


def test_the_spot_controller_is_disabled_by_default_and_nothing_of_it_renders(default: Any, chart_dir: Path) -> None:
    assert yaml.safe_load((chart_dir / "values.yaml").read_text())["spotController"]["enabled"] is False
    assert spot_objects(default) == []
    assert not [o for o in default.objects if "spot-controller" in o["metadata"]["name"]]
    assert "Spot controller" not in default.notes and "spot-controller" not in default.notes


def test_spot_controller_settings_without_enabled_render_nothing_of_it(render: Callable[..., Any]) -> None:
    settings = {k: v for k, v in EVERYTHING["spotController"].items() if k != "enabled"}
    rendered = render({"spotController": settings})
    assert spot_objects(rendered) == []
    assert "Spot controller" not in rendered.notes


# --- the objects ------------------------------------------------------------------------------


def test_enabled_it_renders_its_objects_beside_an_untouched_webhook(render: Callable[..., Any]) -> None:
    tls = TLS_MODES["secret"]  # no generated certificate: two renders compare equal
    on, off = render({**tls, **ON}), render(tls)
    kinds = sorted(o["kind"] for o in spot_objects(on))
    assert kinds == sorted(["Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                            "PodDisruptionBudget"])
    assert all(o["metadata"]["name"] == NAME for o in spot_objects(on))
    assert [o for o in on.objects if o not in spot_objects(on)] == off.objects  # the webhook is untouched


def test_a_config_adds_a_config_map(everything: Any) -> None:
    kinds = sorted(o["kind"] for o in spot_objects(everything))
    assert kinds == sorted(["Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                            "PodDisruptionBudget", "ConfigMap"])


def test_enabled_it_renders_a_two_replica_deployment_that_elects_a_leader_on_a_lease_in_the_release_namespace(on: Any) -> None:
    assert deployment(on)["spec"]["replicas"] == 2
    assert deployment(on)["metadata"]["namespace"] == NAMESPACE
    args = container(on)["args"]
    assert "--leader-elect" in args
    assert f"--lease-namespace={NAMESPACE}" in args
    assert f"--lease-name={NAME}" in args
    assert "--drain-timeout=120" in args
    env = {e["name"]: e for e in container(on)["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_the_container_flags_are_ones_placement_webhook_spot_controller_accepts(on: Any) -> None:
    args = parse(container(on))
    assert (args.leader_elect, args.lease_namespace, args.lease_name) == (True, NAMESPACE, NAME)
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (15.0, 10.0, 2.0)
    assert (args.drain_timeout, args.exclude_namespaces) == (120.0, [])
    assert args.provider is None and args.config is None  # the built-in SpotConfig, its generic provider
    assert (args.metrics_port, args.metrics_host, args.log_level) == (8080, "0.0.0.0", "info")
    # In the pod: it follows the cluster with the service account, acting on it.
    assert not args.dry_run and args.kubeconfig is None and args.context is None


def test_every_spot_controller_value_reaches_the_command_line_as_a_flag_it_accepts(everything: Any) -> None:
    raw = container(everything)["args"]
    assert [a for a in raw if a.startswith("--exclude-namespace")] == [
        "--exclude-namespace=kube-system", "--exclude-namespace=monitoring"]  # repeated, once each
    args = parse(container(everything))
    assert (args.provider, args.drain_timeout, args.exclude_namespaces) == ("karpenter", 90.5, ["kube-system", "monitoring"])
    assert args.config == "/etc/placement-spot/config.yaml"
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (30.0, 20.0, 4.0)
    assert (args.metrics_port, args.log_level, args.sync_timeout) == (9090, "debug", 120.0)
    assert deployment(everything)["spec"]["replicas"] == 3


@pytest.mark.parametrize(("value", "flag"), [(0.5, "--drain-timeout=0.5"), (3600, "--drain-timeout=3600"),
                                             (86400.0, "--drain-timeout=86400")])
def test_numbers_are_written_as_plain_decimals(render: Callable[..., Any], value: float, flag: str) -> None:
    rendered = render({"spotController": {"enabled": True, "drainTimeoutSeconds": value}})
    assert flag in container(rendered)["args"]
    parse(container(rendered))


def test_the_command_replaces_the_image_entrypoint_which_runs_serve(on: Any, root: Path) -> None:
    assert '["placement-webhook", "serve"]' in (root / "Dockerfile").read_text()
    assert container(on)["command"] == ["placement-webhook", "spot-controller"]
    assert not any(a in {"serve", "spot-controller"} for a in container(on)["args"])


def test_it_runs_the_webhook_image(render: Callable[..., Any]) -> None:
    digest = "sha256:" + "d" * 64
    rendered = render({**ON, "image": {"digest": digest}})
    webhook = named(rendered, "Deployment", WEBHOOK)["spec"]["template"]["spec"]["containers"][0]
    assert container(rendered)["image"] == webhook["image"] == f"ghcr.io/novasphere/placement-webhook@{digest}"
    assert container(rendered)["imagePullPolicy"] == webhook["imagePullPolicy"]


def test_probes_use_the_metrics_port_healthz_for_liveness_and_readyz_for_readiness(everything: Any) -> None:
    c = container(everything)
    assert [(p["name"], p["containerPort"]) for p in c["ports"]] == [("metrics", 9090)]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTP"}
    assert parse(c).metrics_port == 9090


def test_the_replicas_prefer_distinct_nodes(on: Any) -> None:
    (term,) = pod_spec(on)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment(on)["spec"]["selector"]["matchLabels"]


def test_pod_settings_come_from_the_spot_controller_values(render: Callable[..., Any], everything: Any) -> None:
    spec = pod_spec(everything)
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["nodeSelector"] == {"karpenter.sh/capacity-type": "on-demand"}
    assert spec["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "NotIn",
                                                     "values": ["spot"]}]}]}}}
    assert pod_spec(render({"spotController": {"enabled": True, "affinity": affinity}}))["affinity"] == affinity
    assert container(everything)["resources"] == {"requests": {"cpu": "20m", "memory": "96Mi"}, "limits": {"memory": "384Mi"}}


def test_no_other_workload_selects_the_spot_controller_s_pods_nor_it_theirs(render: Callable[..., Any]) -> None:
    rendered = render({**ON, "labeler": {"enabled": True}, "extender": {"enabled": True}})
    spot_pods = deployment(rendered)["spec"]["template"]["metadata"]["labels"]
    others = [(WEBHOOK, named(rendered, "Service", WEBHOOK)["spec"]["selector"]),
              (WEBHOOK, named(rendered, "PodDisruptionBudget", WEBHOOK)["spec"]["selector"]["matchLabels"]),
              (WEBHOOK, named(rendered, "Deployment", WEBHOOK)["spec"]["selector"]["matchLabels"]),
              (LABELER, named(rendered, "PodDisruptionBudget", LABELER)["spec"]["selector"]["matchLabels"]),
              (LABELER, named(rendered, "Deployment", LABELER)["spec"]["selector"]["matchLabels"]),
              (EXTENDER, named(rendered, "Service", EXTENDER)["spec"]["selector"]),
              (EXTENDER, named(rendered, "PodDisruptionBudget", EXTENDER)["spec"]["selector"]["matchLabels"]),
              (EXTENDER, named(rendered, "Deployment", EXTENDER)["spec"]["selector"]["matchLabels"])]
    assert not [name for name, selector in others if selects(selector, spot_pods)]
    own = [deployment(rendered)["spec"]["selector"]["matchLabels"],
           named(rendered, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
           pod_spec(rendered)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
           ["podAffinityTerm"]["labelSelector"]["matchLabels"]]
    assert all(selects(s, spot_pods) for s in own)
    for name in (WEBHOOK, LABELER, EXTENDER):
        pods = named(rendered, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert not any(selects(s, pods) for s in own), name
    assert spot_pods["app.kubernetes.io/name"] == "placement-webhook-spot-controller"


def test_the_spot_controller_pod_is_not_placed_by_the_webhook(on: Any) -> None:
    assert deployment(on)["spec"]["template"]["metadata"]["annotations"]["placement.novasphere.dev/skip"] == "true"


# --- the SpotConfig ---------------------------------------------------------------------------


def test_the_config_map_holds_a_spot_config_the_controller_loads(everything: Any, tmp_path: Path) -> None:
    data = yaml.safe_load(config_text(everything))
    assert data["apiVersion"] == "placement.novasphere.dev/v1alpha1" and data["kind"] == "SpotConfig"
    model = SpotConfig.model_validate(data)
    assert model.model_dump() == SpotConfig.model_validate(FULL_CONFIG).model_dump()
    path = tmp_path / "config.yaml"
    path.write_text(config_text(everything))
    loaded = spot_config.load(path)  # the loader `spot-controller --config` runs: strict YAML, one document
    assert loaded.provider == "karpenter" and loaded.reclaim.taints == ["example.com/reclaim"]
    assert loaded.reclaim.not_ready_seconds == 120


def test_the_mounted_file_is_the_one_the_config_flag_names(everything: Any) -> None:
    args = parse(container(everything))
    assert mounted_files(everything) == {args.config: (NAME, "config.yaml")}
    mount = next(m for m in container(everything)["volumeMounts"] if m["mountPath"] == "/etc/placement-spot")
    assert mount["readOnly"] is True and "subPath" not in mount


def test_numbers_from_a_values_file_survive_the_round_trip(render: Callable[..., Any]) -> None:
    """Helm reads values files' numbers as floats; integers must still come out integers."""
    values = helm.values_from_yaml(textwrap.dedent("""\
        spotController:
          enabled: true
          drainTimeoutSeconds: 300
          config:
            reclaim: {notReadySeconds: 90}
            critical: {priorityThreshold: 2000000000}
        """))
    rendered = render(values)
    model = SpotConfig.model_validate(yaml.safe_load(config_text(rendered)))
    assert model.reclaim.not_ready_seconds == 90 and model.critical.priority_threshold == 2000000000
    assert "e+" not in config_text(rendered)
    assert "--drain-timeout=300" in container(rendered)["args"]


def test_without_a_config_there_is_no_config_map_no_mount_and_no_config_flag(on: Any) -> None:
    assert not [o for o in spot_objects(on) if o["kind"] == "ConfigMap"]
    assert "checksum/config" not in deployment(on)["spec"]["template"]["metadata"]["annotations"]
    assert mounted_files(on) == {} and parse(container(on)).config is None


def test_a_changed_config_rolls_the_pods(render: Callable[..., Any]) -> None:
    """The controller reads its configuration once, at start."""
    def checksum(config: dict[str, Any]) -> str:
        rendered = render({"spotController": {"enabled": True, "config": config}})
        value: str = deployment(rendered)["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value
    assert checksum({"provider": "eks"}) != checksum({"provider": "gke"})
    assert checksum({"provider": "eks"}) == checksum({"provider": "eks"})


def test_the_values_schema_of_spot_controller_config_is_the_spot_config_model(chart_dir: Path) -> None:
    schema = json.loads((chart_dir / "values.schema.json").read_text())
    ref = schema["properties"]["spotController"]["properties"]["config"]
    assert ref == {"$ref": "#/properties/extender/properties/config"}  # one copy of the SpotConfig schema
    target = schema
    for part in ref["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    model = spot_config.schema()
    assert _walk(model, target, model["$defs"], "spotController.config") == []


# --- RBAC and the service account -------------------------------------------------------------


def test_the_cluster_role_is_exactly_the_least_the_controller_needs(on: Any) -> None:
    assert named(on, "ClusterRole")["rules"] == CLUSTER_RULES


def test_the_lease_role_is_namespaced_and_its_get_and_update_are_restricted_to_the_lease_name(on: Any) -> None:
    role = named(on, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == LEASE_RULES
    (named_rule,) = [r for r in role["rules"] if "resourceNames" in r]
    assert named_rule["resourceNames"] == [parse(container(on)).lease_name]
    assert not [v for g, r, v in granted(named(on, "ClusterRole")["rules"]) if r == "leases"]


def test_nothing_beyond_it_is_granted(on: Any) -> None:
    """No budgets (the API server enforces them on eviction), no pod deletes, no GET of single
    objects, no non-resource URLs (discovery is every authenticated user's), no wildcards."""
    rules = named(on, "ClusterRole")["rules"] + named(on, "Role")["rules"]
    triples = granted(rules)
    assert not [t for t in triples if t[1] == "poddisruptionbudgets"]
    assert not [t for t in triples if t[2] in {"delete", "deletecollection", "*"} or "*" in t[:2]]
    assert not [t for t in granted(named(on, "ClusterRole")["rules"]) if t[2] == "get"]
    assert not [r for r in rules if "nonResourceURLs" in r]


def test_the_rbac_covers_the_informers_writes_and_lease_calls_of_the_code(on: Any) -> None:
    """Derived from the code: the shared cache's informers plus the pod informer (list, watch), the
    node merge PATCH, the Eviction subresource, core/v1 Events, the Lease calls of leader.py."""
    watched = {group_resource(path) for path, _ in cache.RESOURCES.values()} | {group_resource(POD_PATH)}
    needed = {(g, r, v) for g, r in watched for v in ("list", "watch")}
    needed |= {("", "nodes", "patch"), ("", "pods/eviction", "create"), ("", "events", "create")}
    assert granted(named(on, "ClusterRole")["rules"]) == needed
    lease_group = leader.API_VERSION.split("/")[0]
    assert granted(named(on, "Role")["rules"]) == {(lease_group, "leases", v) for v in ("create", "get", "update")}


# The request attributes the API server's RBAC authorizer sees (k8s.io/apiserver RequestInfoFactory).
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_attributes(method: str, path: str, query: dict[str, str]) -> dict[str, str] | None:
    """(group, resource[/subresource], verb, namespace, name) of a resource request; None for a
    non-resource URL (discovery, /version)."""
    parts = [p for p in urlsplit(path).path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    if method == "GET":
        verb = "watch" if query.get("watch") in {"true", "1"} else ("get" if name else "list")
    else:
        verb = VERBS[method] if name or method != "DELETE" else "deletecollection"
    return {"group": group, "resource": resource, "verb": verb, "namespace": namespace, "name": name}


def allowed(attrs: dict[str, str], cluster_rules: list[dict[str, Any]], role_rules: list[dict[str, Any]]) -> bool:
    def matches(rule: dict[str, Any]) -> bool:
        return (attrs["group"] in rule["apiGroups"] and attrs["resource"] in rule["resources"]
                and attrs["verb"] in rule["verbs"]
                and ("resourceNames" not in rule or attrs["name"] in rule["resourceNames"]))
    return any(matches(r) for r in cluster_rules) or (attrs["namespace"] == NAMESPACE and any(matches(r) for r in role_rules))


def test_the_request_attributes_read_like_the_api_server_s() -> None:
    assert request_attributes("GET", "/api/v1/pods", {"watch": "true"}) == {
        "group": "", "resource": "pods", "verb": "watch", "namespace": "", "name": ""}
    assert (request_attributes("POST", "/api/v1/namespaces/shop/pods/web-1/eviction", {}) or {})["resource"] == "pods/eviction"
    assert request_attributes("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/x", {}) == {
        "group": "coordination.k8s.io", "resource": "leases", "verb": "update", "namespace": NAMESPACE, "name": "x"}
    assert (request_attributes("GET", "/api/v1/namespaces", {}) or {})["verb"] == "list"
    assert request_attributes("GET", "/api/v1", {}) is None and request_attributes("GET", "/version", {}) is None


async def test_running_the_chart_s_command_every_api_call_is_granted_and_every_grant_is_used(
        on: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The container's own command line, run against the fake API server (metrics off, its port is
    the test's): a node with a reclaim signal is cordoned and drained, the signal goes away and the
    node is uncordoned, SIGTERM stops it and releases the Lease. Every request is then checked
    against the rendered rules as the RBAC authorizer would."""
    cluster_rules, role_rules = named(on, "ClusterRole")["rules"], named(on, "Role")["rules"]
    args = parse(container(on))
    args.metrics_port = 0
    # The command stops on SIGTERM through the loop's signal handler: keep the handler, send no signal.
    handlers: dict[int, Callable[[], None]] = {}
    monkeypatch.setattr(asyncio.get_running_loop(), "add_signal_handler",
                        lambda sig, callback, *a: handlers.__setitem__(sig, lambda: callback(*a)))
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs-1", "controller": True}
    itn = {"key": "aws-node-termination-handler/spot-itn", "value": "e", "effect": "NoSchedule"}
    async with FakeApiServer("1.31.0", bookmark_interval=0.2) as server:
        server.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                     node("spot-1", taints=[itn]), node("od-1"),
                     pod("web-1", "shop", node_name="spot-1", owner=owner),
                     pod("web-2", "shop", node_name="spot-1", owner=owner)])

        def reasons() -> set[str]:
            return {str(e.get("reason")) for ns in ("default", "shop") for e in server.list_objects("Event", ns)}

        config = common.controller_config(args, ClusterConfig(server.url))
        task = asyncio.create_task(spot_command._main(config, spot_config.load(args.config), spot_command.settings(args)))
        try:
            await until(lambda: "Drained" in reasons(), timeout=15.0, what="the drain")
            assert server.get_object("Pod", "web-1", "shop") is None and server.get_object("Pod", "web-2", "shop") is None
            server.patch_object("Node", "spot-1", {"spec": {"taints": None}})
            await until(lambda: "SpotReclaimCancelled" in reasons(), timeout=15.0, what="the false alarm")
            assert not (server.get_object("Node", "spot-1") or {})["spec"].get("unschedulable")
        finally:
            if signal.SIGTERM in handlers:
                handlers[signal.SIGTERM]()  # as the kubelet stops the pod
            else:
                task.cancel()
            exit_code = None
            with contextlib.suppress(asyncio.CancelledError):
                exit_code = await asyncio.wait_for(task, 15.0)
        assert exit_code == 0
        lease = server.get_object("Lease", NAME, NAMESPACE)
        assert lease is not None and not lease["spec"].get("holderIdentity")  # released on SIGTERM
        requests = list(server.requests)

    attributes = [(r, request_attributes(r.method, r.path, r.query)) for r in requests]
    denied = [f"{r.method} {r.path}" for r, a in attributes if a is not None and not allowed(a, cluster_rules, role_rules)]
    assert denied == []
    used = {(a["group"], a["resource"], a["verb"]) for _, a in attributes if a is not None}
    assert used == granted(cluster_rules) | granted(role_rules)  # nothing granted goes unused
    assert ("", "nodes", "get") not in used and not [u for u in used if u[1] == "poddisruptionbudgets"]
    # Non-resource URLs: discovery of /api/v1 (the Eviction version) and /version, which the
    # default system:discovery and system:public-info-viewer ClusterRoles allow every authenticated user.
    non_resource = {r.path for r, a in attributes if a is None}
    assert "/api/v1" in non_resource
    assert non_resource <= {"/version", "/api", "/api/v1", "/apis"} | {p for p in non_resource if p.startswith("/apis/")}


def test_the_bindings_grant_the_roles_to_the_spot_controller_service_account_only(on: Any) -> None:
    account = pod_spec(on)["serviceAccountName"]
    assert account == named(on, "ServiceAccount")["metadata"]["name"] == NAME
    assert account != named(on, "Deployment", WEBHOOK)["spec"]["template"]["spec"]["serviceAccountName"]
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = named(on, kind)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": NAME}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    assert named(on, "RoleBinding")["metadata"]["namespace"] == NAMESPACE


def test_only_the_spot_controller_pod_mounts_an_api_token(on: Any) -> None:
    assert pod_spec(on)["automountServiceAccountToken"] is True
    assert named(on, "ServiceAccount")["automountServiceAccountToken"] is False
    assert named(on, "Deployment", WEBHOOK)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_an_existing_service_account_is_used_instead_of_a_created_one(render: Callable[..., Any]) -> None:
    rendered = render({"spotController": {"enabled": True, "serviceAccount": {"create": False, "name": "spot-sa"}}})
    assert not [o for o in rendered.of_kind("ServiceAccount") if o["metadata"]["name"] in {NAME, "spot-sa"}]
    assert pod_spec(rendered)["serviceAccountName"] == "spot-sa"
    assert named(rendered, "ClusterRoleBinding")["subjects"][0]["name"] == "spot-sa"
    assert named(rendered, "RoleBinding")["subjects"][0]["name"] == "spot-sa"


def test_service_account_annotations_are_applied(everything: Any) -> None:
    assert named(everything, "ServiceAccount")["metadata"]["annotations"] == {"example.com/owner": "platform"}


def test_long_release_names_keep_the_suffix_and_the_lease_name_in_step(render: Callable[..., Any]) -> None:
    rendered = render({"fullnameOverride": "x" * 70, **ON})
    name = "x" * 47 + "-spot-controller"
    assert len(name) == 63
    assert {o["metadata"]["name"] for o in spot_objects(rendered)} == {name}
    (only,) = named(rendered, "Deployment", name)["spec"]["template"]["spec"]["containers"]
    assert parse(only).lease_name == name
    assert named(rendered, "Role", name)["rules"][1]["resourceNames"] == [name]


# --- pod security -----------------------------------------------------------------------------


@pytest.mark.parametrize("values", [ON, EVERYTHING], ids=["defaults", "everything"])
def test_the_spot_controller_pod_passes_the_restricted_profile_with_the_webhook_s_security_settings(
        render: Callable[..., Any], values: dict[str, Any]) -> None:
    rendered = render(values)
    assert restricted_violations(pod_spec(rendered)) == []
    webhook = named(rendered, "Deployment", WEBHOOK)["spec"]["template"]["spec"]
    assert pod_spec(rendered)["securityContext"] == webhook["securityContext"]
    assert container(rendered)["securityContext"] == webhook["containers"][0]["securityContext"]
    context = container(rendered)["securityContext"]
    assert context["runAsNonRoot"] is True and context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "/tmp" in {m["mountPath"] for m in container(rendered)["volumeMounts"]}


# --- the PodDisruptionBudget ------------------------------------------------------------------


def test_a_pdb_keeps_one_spot_controller_through_drains(on: Any) -> None:
    pdb = named(on, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment(on)["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("spot", [{"replicaCount": 1}, {"podDisruptionBudget": {"enabled": False}}])
def test_no_pdb_for_a_single_replica_or_when_disabled(render: Callable[..., Any], spot: dict[str, Any]) -> None:
    rendered = render({"spotController": {"enabled": True, **spot}})
    assert not [o for o in rendered.of_kind("PodDisruptionBudget") if o["metadata"]["name"] == NAME]
    assert "--leader-elect" in container(rendered)["args"]  # a rollout still overlaps two pods


# --- validity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [ON, EVERYTHING, {"spotController": {"enabled": True, "replicaCount": 1}}],
                         ids=["defaults", "everything", "one-replica"])
def test_every_rendered_object_validates_strictly(render: Callable[..., Any], values: dict[str, Any]) -> None:
    rendered = render(values)
    assert spot_objects(rendered)
    assert _validate_all(rendered.objects) == []


def test_namespaced_objects_sit_in_the_release_namespace_and_names_stay_unique(render: Callable[..., Any]) -> None:
    rendered = render({**EVERYTHING, "labeler": {"enabled": True}, "extender": {"enabled": True}})
    for obj in spot_objects(rendered):
        if obj["kind"] not in {"ClusterRole", "ClusterRoleBinding"}:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
    keys = [(o["kind"], o["metadata"]["name"]) for o in rendered.objects]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("values", [ON, EVERYTHING, {**ON, "labeler": {"enabled": True}, "extender": {"enabled": True}}],
                         ids=["defaults", "everything", "with-the-other-components"])
def test_helm_lint_reports_no_errors_or_warnings(chart_dir: Path, values: dict[str, Any]) -> None:
    report = helm.lint(chart_dir, values, strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [] and report["errors"] == []


@pytest.mark.parametrize(
    ("spot", "complaint"),
    [
        ({"enabeld": True}, "enabeld"),
        ({"enabled": True, "leaderElection": {"leaseDuration": 15}}, "leaseDuration"),
        ({"enabled": True, "serviceAccount": {"automount": True}}, "automount"),
        ({"enabled": True, "podDisruptionBudget": {"maxUnavailable": 1}}, "maxUnavailable"),
        ({"enabled": True, "drainTimeout": 60}, "drainTimeout"),
        ({"enabled": True, "drainTimeoutSeconds": 0}, "drainTimeoutSeconds"),
        ({"enabled": True, "provider": "azure"}, "provider"),
        ({"enabled": True, "excludeNamespaces": "kube-system"}, "excludeNamespaces"),
        ({"enabled": True, "excludeNamespaces": ["Kube_System"]}, "excludeNamespaces"),
        ({"enabled": True, "excludeNamespaces": ["a", "a"]}, "excludeNamespaces"),
        ({"enabled": True, "config": {"provdier": "eks"}}, "provdier"),
        ({"enabled": True, "config": {"provider": "azure"}}, "provider"),
        ({"enabled": True, "config": {"reclaim": {"taint": ["x"]}}}, "taint"),
        ({"enabled": True, "config": {"reclaim": {"notReadySeconds": -1}}}, "notReadySeconds"),
        ({"enabled": True, "config": {"cost": {"factor": 2}}}, "factor"),
        ({"enabled": True, "config": {"kind": "PlacementPolicy"}}, "kind"),
        ({"enabled": True, "logLevel": "INFO"}, "logLevel"),
        ({"enabled": True, "metricsPort": 0}, "metricsPort"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_the_values_schema_rejects(render: Callable[..., Any], spot: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmError) as err:
        render({"spotController": spot})
    assert "at '/spotController" in str(err.value) and complaint in str(err.value)


@pytest.mark.parametrize(
    ("election", "complaint"),
    [
        ({"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10}, "leaseDurationSeconds (10) must be greater than renewDeadlineSeconds (10)"),
        ({"renewDeadlineSeconds": 5, "retryPeriodSeconds": 5}, "renewDeadlineSeconds (5) must be greater than 1.2 x retryPeriodSeconds (5)"),
    ],
)
def test_lease_timings_the_controller_would_refuse_fail_the_render(render: Callable[..., Any], election: dict[str, Any],
                                                                   complaint: str) -> None:
    with pytest.raises(helm.HelmError) as err:
        render({"spotController": {"enabled": True, "leaderElection": election}})
    assert f"spotController.leaderElection.{complaint}" in str(err.value)


def test_the_default_lease_timings_are_ones_the_leader_elector_accepts(on: Any) -> None:
    args = parse(container(on))
    leader.LeaderElectionConfig(namespace=args.lease_namespace, name=args.lease_name, identity="pod",
                                lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                                retry_period=args.retry_period)


# --- NOTES.txt --------------------------------------------------------------------------------


def test_notes_show_how_to_check_the_spot_controller(on: Any) -> None:
    assert f"rollout status deployment/{NAME}" in on.notes
    assert f"kubectl -n {NAMESPACE} get lease {NAME} -o jsonpath='{{.spec.holderIdentity}}" in on.notes
    assert f"port-forward deployment/{NAME} 8080:8080" in on.notes
    assert "localhost:8080/metrics" in on.notes and "placement_webhook_spot_" in on.notes
    assert "docs/spot-controller.md" in on.notes


def test_notes_warn_when_nothing_keeps_it_off_spot_nodes(on: Any, everything: Any) -> None:
    assert "Nothing keeps the spot controller off spot nodes" in on.notes
    assert "Nothing keeps the spot controller off spot nodes" not in everything.notes
    assert "localhost:9090/metrics" in everything.notes


# --- docs -------------------------------------------------------------------------------------


def test_the_install_guide_documents_every_spot_controller_value(root: Path, chart_dir: Path) -> None:
    text = (root / "docs" / "install.md").read_text()
    assert "## Spot controller" in text and "(spot-controller.md" in text
    keys = yaml.safe_load((chart_dir / "values.yaml").read_text())["spotController"]
    assert sorted(k for k in keys if f"`spotController.{k}" not in text) == []
    assert "poddisruptionbudgets" in text  # why the issue's list names them and the chart does not grant them


def test_the_install_guide_lists_the_rules_the_chart_grants(root: Path, on: Any) -> None:
    section = (root / "docs" / "install.md").read_text().split("## Spot controller", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]*)` \| ([^|]+) \| ([^|]+) \|", section, flags=re.MULTILINE)
    documented = {(g.strip('"'), r.strip(), v.strip()) for g, resources, verbs in rows
                  for r in re.findall(r"`([^`]+)`", resources) for v in re.findall(r"`([^`]+)`", verbs)}
    assert granted(named(on, "ClusterRole")["rules"]) <= documented


def test_the_links_from_the_install_guide_to_the_spot_controller_page_reach_its_headings(root: Path) -> None:
    docs = root / "docs"
    links = re.findall(r"\]\(spot-controller\.md#([^)]+)\)", (docs / "install.md").read_text())
    assert sorted(a for a in links if a not in _anchors((docs / "spot-controller.md").read_text())) == []
