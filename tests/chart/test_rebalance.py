"""The rebalancer the chart runs with ``rebalance.enabled``: ``placement-webhook rebalance`` in a
leader-elected Deployment, with its own ServiceAccount, exactly the RBAC it uses (derived from the
calls it makes, and checked against them by running the container's command line), and its
SpotConfig in a ConfigMap."""
from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import TLS_MODES
from tests.chart.test_extender import FULL_CONFIG
from tests.chart.test_kubernetes_schemas import _validate_all
from tests.chart.test_pod_security import restricted_violations
from tests.chart.test_spot_controller import allowed, request_attributes
from tests.cluster.conftest import until
from tests.kit.chart import ChartWorkload, granted, group_resource
from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import pdb
from tests.rebalance.conftest import ON_DEMAND_NODE, SPOT_NODES, capacity_node, replica_set, web
from webhook.cluster import cache
from webhook.cluster.config import ClusterConfig
from webhook.cluster.pods import POD_PATH
from webhook.commands import common
from webhook.commands import rebalance as rebalance_command
from webhook.rebalance import component
from webhook.runtime import leader
from webhook.spot import config as spot_config

helm = pytest.importorskip("helm_python")

NAMESPACE = "placement-system"
NAME = "pw-placement-webhook-rebalance"  # <release>-placement-webhook-rebalance
COMPONENT = "rebalance"
ON: dict[str, Any] = {"rebalance": {"enabled": True}}
EVERYTHING: dict[str, Any] = {
    "rebalance": {
        "enabled": True,
        "replicaCount": 2,
        "interval": "2m30s",
        "maxEvictionsPerInterval": 2,
        "minGain": 25,
        "excludeNamespaces": ["kube-system", "monitoring"],
        "provider": "karpenter",
        "config": FULL_CONFIG,
        "leaderElection": {"leaseDurationSeconds": 30, "renewDeadlineSeconds": 20, "retryPeriodSeconds": 4},
        "metricsPort": 9090,
        "logLevel": "debug",
        "extraArgs": ["--sync-timeout=120"],
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"karpenter.sh/capacity-type": "on-demand"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        "serviceAccount": {"annotations": {"example.com/owner": "platform"}},
    },
}

# The cluster-wide rules, literally: nothing more, nothing less.
CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "pods", "namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["replicasets", "deployments", "statefulsets"], "verbs": ["list", "watch"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["list", "watch"]},
]

WORKLOAD = ChartWorkload(NAME, COMPONENT, "rebalance")
objects, named, deployment = WORKLOAD.objects, WORKLOAD.named, WORKLOAD.deployment
pod_spec, container, parse = WORKLOAD.pod_spec, WORKLOAD.container, WORKLOAD.parse


@pytest.fixture(scope="module")
def on(render: Callable[..., Any]) -> Any:
    return render(ON)


@pytest.fixture(scope="module")
def everything(render: Callable[..., Any]) -> Any:
    return render(EVERYTHING)


def test_the_rebalancer_is_disabled_by_default_and_nothing_of_it_renders(default: Any, chart_dir: Path) -> None:
    assert yaml.safe_load((chart_dir / "values.yaml").read_text())["rebalance"]["enabled"] is False
    assert objects(default) == [] and not [o for o in default.objects if "rebalance" in o["metadata"]["name"]]


def test_its_settings_without_enabled_render_nothing_of_it(render: Callable[..., Any]) -> None:
    assert objects(render({"rebalance": {k: v for k, v in EVERYTHING["rebalance"].items() if k != "enabled"}})) == []


def test_enabled_it_renders_its_objects_beside_an_untouched_webhook(render: Callable[..., Any]) -> None:
    tls = TLS_MODES["secret"]  # no generated certificate: two renders compare equal
    on, off = render({**tls, **ON}), render(tls)
    assert sorted(o["kind"] for o in objects(on)) == sorted(
        ["Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"])
    assert all(o["metadata"]["name"] == NAME for o in objects(on))
    assert [o for o in on.objects if o not in objects(on)] == off.objects


def test_a_config_adds_a_config_map_holding_a_spot_config_the_command_loads(everything: Any, tmp_path: Path) -> None:
    text = named(everything, "ConfigMap")["data"]["config.yaml"]
    (tmp_path / "config.yaml").write_text(text)
    loaded = spot_config.load(tmp_path / "config.yaml")
    assert loaded.provider == FULL_CONFIG.get("provider", loaded.provider)
    mounts = {m["name"]: m["mountPath"] for m in container(everything)["volumeMounts"]}
    assert f"{mounts['config']}/config.yaml" == parse(container(everything)).config


def test_by_default_one_replica_elects_a_leader_on_a_lease_in_the_release_namespace(on: Any) -> None:
    args = parse(container(on))
    assert deployment(on)["spec"]["replicas"] == 1
    assert (args.leader_elect, args.lease_namespace, args.lease_name) == (True, NAMESPACE, NAME)
    assert (args.interval, args.max_evictions, args.min_gain, args.exclude_namespaces) == (60.0, 5, 10, ["kube-system"])
    assert args.provider is None and args.config is None and not args.dry_run and args.kubeconfig is None
    assert (args.metrics_port, args.log_level) == (8080, "info")
    leader.LeaderElectionConfig(namespace=args.lease_namespace, name=args.lease_name, identity="pod",
                                lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                                retry_period=args.retry_period)


def test_every_value_reaches_the_command_line_as_a_flag_it_accepts(everything: Any) -> None:
    args = parse(container(everything))
    assert (args.interval, args.max_evictions, args.min_gain) == (150.0, 2, 25)
    assert (args.exclude_namespaces, args.provider) == (["kube-system", "monitoring"], "karpenter")
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (30.0, 20.0, 4.0)
    assert (args.metrics_port, args.log_level, args.sync_timeout) == (9090, "debug", 120.0)
    spec = pod_spec(everything)
    assert deployment(everything)["spec"]["replicas"] == 2 and spec["priorityClassName"] == "system-cluster-critical"
    assert spec["nodeSelector"] == {"karpenter.sh/capacity-type": "on-demand"} and spec["tolerations"]
    assert spec["affinity"] == EVERYTHING["rebalance"]["affinity"]


@pytest.mark.parametrize(("value", "flag", "seconds"), [(90, "--interval=90", 90.0), (0.5, "--interval=0.5", 0.5),
                                                        ("5m", "--interval=5m", 300.0)])
def test_an_interval_is_a_number_of_seconds_or_a_duration(render: Callable[..., Any], value: Any, flag: str,
                                                          seconds: float) -> None:
    rendered = render({"rebalance": {"enabled": True, "interval": value}})
    assert flag in container(rendered)["args"] and parse(container(rendered)).interval == seconds


def test_the_cluster_role_is_exactly_what_the_code_lists_and_watches_and_writes(on: Any) -> None:
    assert named(on, "ClusterRole")["rules"] == CLUSTER_RULES
    watched = {group_resource(path) for path, _ in cache.RESOURCES.values()} | {group_resource(POD_PATH)}
    watched |= {("apps", name) for name in component.WORKLOADS} | {("policy", "poddisruptionbudgets")}
    needed = {(g, r, v) for g, r in watched for v in ("list", "watch")}
    needed |= {("", "pods/eviction", "create"), ("", "events", "create")}
    assert granted(named(on, "ClusterRole")["rules"]) == needed
    role = named(on, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    lease_group = leader.API_VERSION.split("/")[0]
    assert granted(role["rules"]) == {(lease_group, "leases", v) for v in ("create", "get", "update")}
    assert [r["resourceNames"] for r in role["rules"] if "resourceNames" in r] == [[NAME]]


async def test_running_the_chart_s_command_every_api_call_is_granted_and_every_grant_is_used(
        on: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The container's own command line against a v1.20 fake API server (budgets in
    policy/v1beta1): a pass moves one of four interruptible replicas from on-demand to spot with a
    Rebalanced Event, SIGTERM stops it and releases the Lease. Every request is then checked
    against the rendered rules as the RBAC authorizer would."""
    cluster_rules, role_rules = named(on, "ClusterRole")["rules"], named(on, "Role")["rules"]
    args = parse(container(on))
    args.metrics_port = 0
    handlers: dict[int, Callable[[], None]] = {}
    monkeypatch.setattr(asyncio.get_running_loop(), "add_signal_handler",
                        lambda sig, callback, *a: handlers.__setitem__(sig, lambda: callback(*a)))
    async with FakeApiServer("1.20.2", bookmark_interval=0.2, pdb_controller=True) as server:
        server.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                     capacity_node(ON_DEMAND_NODE, "on-demand"), *(capacity_node(n, "spot") for n in SPOT_NODES),
                     replica_set("rs-1", 4), *(web(f"web-{i}") for i in range(1, 5)),
                     pdb("web", "shop", match={"app": "web"}, max_unavailable=1, api_version="policy/v1beta1")])
        server.sync_pdbs()
        spot = spot_config.load(args.config)
        config = common.controller_config(args, ClusterConfig(server.url))
        task = asyncio.create_task(rebalance_command._main(config, spot, rebalance_command.settings(args, spot),
                                                           sys.stdout))
        try:
            await until(lambda: any(e.get("reason") == "Rebalanced" for e in server.list_objects("Event", "shop")),
                        timeout=15.0, what="a move")
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
    non_resource = {r.path for r, a in attributes if a is None}
    assert {"/api/v1", "/apis/policy"} <= non_resource <= {"/version", "/api", "/api/v1", "/apis", "/apis/policy"}


def test_only_its_service_account_is_bound_and_only_its_pod_mounts_a_token(on: Any) -> None:
    account = pod_spec(on)["serviceAccountName"]
    assert account == NAME and pod_spec(on)["automountServiceAccountToken"] is True
    assert named(on, "ServiceAccount")["automountServiceAccountToken"] is False
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert named(on, kind)["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]


@pytest.mark.parametrize("values", [ON, EVERYTHING], ids=["defaults", "everything"])
def test_its_pod_passes_the_restricted_profile_and_every_object_validates_strictly(
        render: Callable[..., Any], values: dict[str, Any]) -> None:
    rendered = render(values)
    assert restricted_violations(pod_spec(rendered)) == []
    assert _validate_all(rendered.objects) == []


def test_names_stay_unique_beside_every_other_component(render: Callable[..., Any]) -> None:
    rendered = render({**EVERYTHING, "labeler": {"enabled": True}, "extender": {"enabled": True},
                       "spotController": {"enabled": True}})
    keys = [(o["kind"], o["metadata"]["name"]) for o in rendered.objects]
    assert len(keys) == len(set(keys))
    for obj in objects(rendered):
        assert obj["kind"] in {"ClusterRole", "ClusterRoleBinding"} or obj["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize(("values", "complaint"), [
    ({"enabeld": True}, "enabeld"),
    ({"enabled": True, "interval": "1d"}, "interval"),
    ({"enabled": True, "interval": 0}, "interval"),
    ({"enabled": True, "maxEvictionsPerInterval": 0}, "maxEvictionsPerInterval"),
    ({"enabled": True, "minGain": "ten"}, "minGain"),
    ({"enabled": True, "excludeNamespaces": ["Kube_System"]}, "excludeNamespaces"),
    ({"enabled": True, "config": {"provdier": "eks"}}, "provdier"),
    ({"enabled": True, "leaderElection": {"leaseDuration": 15}}, "leaseDuration"),
])
def test_the_values_schema_rejects(render: Callable[..., Any], values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmError) as err:
        render({"rebalance": values})
    assert "at '/rebalance" in str(err.value) and complaint in str(err.value)


def test_lease_timings_the_command_would_refuse_fail_the_render(render: Callable[..., Any]) -> None:
    with pytest.raises(helm.HelmError) as err:
        render({"rebalance": {"enabled": True, "leaderElection": {"leaseDurationSeconds": 10,
                                                                    "renewDeadlineSeconds": 10}}})
    assert "rebalance.leaderElection.leaseDurationSeconds (10) must be greater than renewDeadlineSeconds (10)" in \
        str(err.value)
