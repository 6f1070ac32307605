"""The node labeler the chart runs with ``labeler.enabled``: ``placement-webhook label-nodes`` in a
leader-elected Deployment, with its own ServiceAccount and the least RBAC it needs."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import TLS_MODES
from tests.chart.test_kubernetes_schemas import _validate_all
from tests.chart.test_pod_security import restricted_violations
from tests.kit.chart import ChartWorkload, granted, group_resource, selects
from webhook.cluster import cache
from webhook.cluster.snapshot import POD_PATH
from webhook.labeler.controller import METRICS_PATH
from webhook.labeler.values import LABELS
from webhook.runtime import leader

helm = pytest.importorskip("helm_python")

NAMESPACE = "placement-system"
NAME = "pw-placement-webhook-label-nodes"  # <release>-placement-webhook-label-nodes
ON: dict[str, Any] = {"labeler": {"enabled": True}}
EVERYTHING: dict[str, Any] = {
    "labeler": {
        "enabled": True,
        "source": "metrics",
        "intervalSeconds": 30,
        "rate": 2.5,
        "steps": {"usage": 10, "cpu": 250, "memory": 512, "storage": 2048},
        "gpuResources": ["nvidia.com/gpu", "example.com/tpu"],
        "leaderElection": {"leaseDurationSeconds": 30, "renewDeadlineSeconds": 20, "retryPeriodSeconds": 4},
        "metricsPort": 9090,
        "logLevel": "debug",
        "extraArgs": ["--sync-timeout=120"],
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "serviceAccount": {"annotations": {"example.com/owner": "platform"}},
    },
    "imagePullSecrets": [{"name": "registry"}],
}

# The cluster-wide rules, literally: nothing more, nothing less.
CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["list", "watch"]},
]
METRICS_RULE = {"apiGroups": ["metrics.k8s.io"], "resources": ["nodes"], "verbs": ["list"]}
LEASE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [NAME], "verbs": ["get", "update"]},
]


# --- helpers ----------------------------------------------------------------------------------


LABELER_WORKLOAD = ChartWorkload(NAME, "label-nodes", "label-nodes")
labeler_objects = LABELER_WORKLOAD.objects
named = LABELER_WORKLOAD.named
deployment = LABELER_WORKLOAD.deployment
pod_spec = LABELER_WORKLOAD.pod_spec
container = LABELER_WORKLOAD.container
parse = LABELER_WORKLOAD.parse


@pytest.fixture(scope="module")
def on(render: Callable[..., Any]) -> Any:
    return render(ON)


@pytest.fixture(scope="module")
def everything(render: Callable[..., Any]) -> Any:
    return render(EVERYTHING)


# --- off by default ---------------------------------------------------------------------------


def test_the_labeler_is_disabled_by_default_and_nothing_of_it_renders(default: Any, chart_dir: Path) -> None:
    assert yaml.safe_load((chart_dir / "values.yaml").read_text())["labeler"]["enabled"] is False
    assert labeler_objects(default) == []
    assert not [o for o in default.objects if "label-nodes" in o["metadata"]["name"]]
    assert not default.of_kind("Role") and not default.of_kind("RoleBinding") and not default.of_kind("ClusterRole")
    assert len(default.of_kind("Deployment")) == 1
    assert "label-nodes" not in default.notes


def test_labeler_settings_without_enabled_render_nothing_of_it(render: Callable[..., Any]) -> None:
    settings = {k: v for k, v in EVERYTHING["labeler"].items() if k != "enabled"}
    assert labeler_objects(render({"labeler": settings})) == []


# --- the Deployment ---------------------------------------------------------------------------


def test_enabled_it_renders_a_two_replica_deployment_that_elects_a_leader_on_a_lease_in_the_release_namespace(on: Any) -> None:
    assert deployment(on)["spec"]["replicas"] == 2
    assert deployment(on)["metadata"]["namespace"] == NAMESPACE
    args = container(on)["args"]
    assert "--leader-elect" in args
    assert f"--lease-namespace={NAMESPACE}" in args
    assert f"--lease-name={NAME}" in args
    env = {e["name"]: e for e in container(on)["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_enabled_it_renders_its_deployment_rbac_service_account_and_pdb_beside_the_webhook(render: Callable[..., Any]) -> None:
    tls = TLS_MODES["secret"]  # no generated certificate: two renders compare equal
    on, off = render({**tls, **ON}), render(tls)
    kinds = sorted(o["kind"] for o in labeler_objects(on))
    assert kinds == sorted(["Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                            "PodDisruptionBudget"])
    assert all(o["metadata"]["name"] == NAME for o in labeler_objects(on))
    assert [o for o in on.objects if o not in labeler_objects(on)] == off.objects  # the webhook is untouched


def test_the_container_flags_are_ones_placement_webhook_label_nodes_accepts(on: Any) -> None:
    args = parse(container(on))
    assert (args.leader_elect, args.lease_namespace, args.lease_name) == (True, NAMESPACE, NAME)
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (15.0, 10.0, 2.0)
    assert (args.interval, args.source, args.rate, args.metrics_port, args.log_level) == (60.0, "requests", 10.0, 8080, "info")
    assert (args.usage_step, args.cpu_step, args.memory_step, args.storage_step) == (5, 100, 256, 1024)
    assert args.gpu_resources is None  # the command's default GPU resources
    assert not (args.once or args.dry_run) and args.kubeconfig is None  # follows, with the service account


def test_every_labeler_value_reaches_the_command_line_as_a_flag_it_accepts(everything: Any) -> None:
    args = parse(container(everything))
    assert (args.source, args.interval, args.rate) == ("metrics", 30.0, 2.5)
    assert (args.usage_step, args.cpu_step, args.memory_step, args.storage_step) == (10, 250, 512, 2048)
    assert args.gpu_resources == ["nvidia.com/gpu", "example.com/tpu"]
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (30.0, 20.0, 4.0)
    assert (args.metrics_port, args.log_level, args.sync_timeout) == (9090, "debug", 120.0)


@pytest.mark.parametrize(("value", "flag"), [(0.5, "--interval=0.5"), (3600, "--interval=3600"), (86400.0, "--interval=86400")])
def test_numbers_are_written_as_plain_decimals(render: Callable[..., Any], value: float, flag: str) -> None:
    rendered = render({"labeler": {"enabled": True, "intervalSeconds": value}})
    assert flag in container(rendered)["args"]
    parse(container(rendered))


def test_the_command_replaces_the_image_entrypoint_which_runs_serve(on: Any, root: Path) -> None:
    assert '["placement-webhook", "serve"]' in (root / "Dockerfile").read_text()
    assert container(on)["command"] == ["placement-webhook", "label-nodes"]
    assert not any(a in {"serve", "label-nodes"} for a in container(on)["args"])


def test_it_runs_the_webhook_image(render: Callable[..., Any]) -> None:
    digest = "sha256:" + "b" * 64
    rendered = render({**ON, "image": {"digest": digest}})
    webhook = named(rendered, "Deployment", "pw-placement-webhook")["spec"]["template"]["spec"]["containers"][0]
    assert container(rendered)["image"] == webhook["image"] == f"ghcr.io/novasphere/placement-webhook@{digest}"
    assert container(rendered)["imagePullPolicy"] == webhook["imagePullPolicy"]


def test_probes_use_the_metrics_port_healthz_for_liveness_and_readyz_for_readiness(everything: Any) -> None:
    c = container(everything)
    assert [(p["name"], p["containerPort"]) for p in c["ports"]] == [("metrics", 9090)]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTP"}
    assert parse(c).metrics_port == 9090


def test_the_two_replicas_prefer_distinct_nodes(on: Any) -> None:
    (term,) = pod_spec(on)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment(on)["spec"]["selector"]["matchLabels"]


def test_pod_settings_come_from_the_labeler_values(render: Callable[..., Any], everything: Any) -> None:
    spec = pod_spec(everything)
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "role", "operator": "In", "values": ["infra"]}]}]}}}
    assert pod_spec(render({"labeler": {"enabled": True, "affinity": affinity}}))["affinity"] == affinity
    assert container(everything)["resources"] == {"requests": {"cpu": "20m", "memory": "96Mi"}, "limits": {"memory": "384Mi"}}


def test_neither_workload_selects_the_other_s_pods(on: Any) -> None:
    labeler_pods = deployment(on)["spec"]["template"]["metadata"]["labels"]
    webhook = named(on, "Deployment", "pw-placement-webhook")
    webhook_pods = webhook["spec"]["template"]["metadata"]["labels"]
    webhook_selectors = [webhook["spec"]["selector"]["matchLabels"], on.one("Service")["spec"]["selector"],
                         named(on, "PodDisruptionBudget", "pw-placement-webhook")["spec"]["selector"]["matchLabels"]]
    assert not any(selects(s, labeler_pods) for s in webhook_selectors)
    labeler_selectors = [deployment(on)["spec"]["selector"]["matchLabels"],
                         named(on, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]]
    assert not any(selects(s, webhook_pods) for s in labeler_selectors)
    assert all(selects(s, labeler_pods) for s in labeler_selectors)


def test_the_labeler_pod_is_not_placed_by_the_webhook(on: Any) -> None:
    assert deployment(on)["spec"]["template"]["metadata"]["annotations"]["placement.novasphere.dev/skip"] == "true"


# --- pod security -----------------------------------------------------------------------------


def test_the_labeler_pod_passes_the_restricted_profile_with_the_webhook_s_security_settings(on: Any) -> None:
    assert restricted_violations(pod_spec(on)) == []
    webhook = named(on, "Deployment", "pw-placement-webhook")["spec"]["template"]["spec"]
    assert pod_spec(on)["securityContext"] == webhook["securityContext"]
    assert container(on)["securityContext"] == webhook["containers"][0]["securityContext"]
    context = container(on)["securityContext"]
    assert context["runAsNonRoot"] is True and context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_spec(on)["securityContext"]["runAsNonRoot"] is True
    assert "/tmp" in {m["mountPath"] for m in container(on)["volumeMounts"]}


def test_only_the_labeler_pod_mounts_an_api_token(on: Any) -> None:
    assert pod_spec(on)["automountServiceAccountToken"] is True
    assert named(on, "ServiceAccount")["automountServiceAccountToken"] is False
    webhook = named(on, "Deployment", "pw-placement-webhook")["spec"]["template"]["spec"]
    assert webhook["automountServiceAccountToken"] is False  # the cluster view is still off


# --- RBAC -------------------------------------------------------------------------------------


def test_the_cluster_role_is_exactly_the_least_the_labeler_needs(on: Any) -> None:
    assert named(on, "ClusterRole")["rules"] == CLUSTER_RULES


def test_the_metrics_rule_is_there_only_with_the_metrics_source(render: Callable[..., Any], on: Any) -> None:
    assert METRICS_RULE not in named(on, "ClusterRole")["rules"]
    metrics = render({"labeler": {"enabled": True, "source": "metrics"}})
    assert named(metrics, "ClusterRole")["rules"] == [*CLUSTER_RULES, METRICS_RULE]
    assert named(metrics, "Role")["rules"] == LEASE_RULES


def test_the_lease_role_is_namespaced_and_its_get_and_update_are_restricted_to_the_lease_name(on: Any) -> None:
    role = named(on, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == LEASE_RULES
    (named_rule,) = [r for r in role["rules"] if "resourceNames" in r]
    assert named_rule["resourceNames"] == [parse(container(on)).lease_name]
    assert not [v for g, r, v in granted(named(on, "ClusterRole")["rules"]) if r == "leases"]


def test_the_rbac_covers_every_api_call_of_the_labeler_and_grants_nothing_else(render: Callable[..., Any]) -> None:
    """Derived from the code: the shared cache's informers, the pod informer, the metrics read,
    the label PATCH (webhook/labeler/writes.py) and the Lease calls (webhook/runtime/leader.py)."""
    watched = {group_resource(path) for path, _ in cache.RESOURCES.values()} | {group_resource(POD_PATH)}
    needed = {(g, r, v) for g, r in watched for v in ("list", "watch")} | {("", "nodes", "patch")}
    rendered = render({"labeler": {"enabled": True, "source": "metrics"}})
    assert granted(named(rendered, "ClusterRole")["rules"]) == needed | {(*group_resource(METRICS_PATH), "list")}
    lease_group = leader.API_VERSION.split("/")[0]
    assert granted(named(rendered, "Role")["rules"]) == {(lease_group, "leases", v) for v in ("create", "get", "update")}


def test_the_bindings_grant_the_roles_to_the_labeler_service_account_only(on: Any) -> None:
    account = pod_spec(on)["serviceAccountName"]
    assert account == named(on, "ServiceAccount")["metadata"]["name"] == NAME
    webhook_account = named(on, "Deployment", "pw-placement-webhook")["spec"]["template"]["spec"]["serviceAccountName"]
    assert account != webhook_account
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = named(on, kind)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": NAME}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    assert named(on, "RoleBinding")["metadata"]["namespace"] == NAMESPACE


def test_an_existing_service_account_is_used_instead_of_a_created_one(render: Callable[..., Any]) -> None:
    rendered = render({"labeler": {"enabled": True, "serviceAccount": {"create": False, "name": "labeler-sa"}}})
    assert not [o for o in rendered.of_kind("ServiceAccount") if o["metadata"]["name"] in {NAME, "labeler-sa"}]
    assert pod_spec(rendered)["serviceAccountName"] == "labeler-sa"
    assert named(rendered, "ClusterRoleBinding")["subjects"][0]["name"] == "labeler-sa"
    assert named(rendered, "RoleBinding")["subjects"][0]["name"] == "labeler-sa"


def test_long_release_names_keep_the_suffix_and_the_lease_name_in_step(render: Callable[..., Any]) -> None:
    rendered = render({"fullnameOverride": "x" * 70, **ON})
    name = "x" * 51 + "-label-nodes"
    assert len(name) == 63
    assert {o["metadata"]["name"] for o in labeler_objects(rendered)} == {name}
    (only,) = named(rendered, "Deployment", name)["spec"]["template"]["spec"]["containers"]
    assert parse(only).lease_name == name
    assert named(rendered, "Role", name)["rules"][1]["resourceNames"] == [name]


# --- the PodDisruptionBudget ------------------------------------------------------------------


def test_a_pdb_keeps_one_labeler_through_drains(on: Any) -> None:
    pdb = named(on, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment(on)["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("labeler", [{"replicaCount": 1}, {"podDisruptionBudget": {"enabled": False}}])
def test_no_pdb_for_a_single_replica_or_when_disabled(render: Callable[..., Any], labeler: dict[str, Any]) -> None:
    rendered = render({"labeler": {"enabled": True, **labeler}})
    assert not [o for o in rendered.of_kind("PodDisruptionBudget") if o["metadata"]["name"] == NAME]


# --- validity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [ON, EVERYTHING, {"labeler": {"enabled": True, "replicaCount": 1}}],
                         ids=["defaults", "everything", "one-replica"])
def test_every_rendered_object_validates_strictly(render: Callable[..., Any], values: dict[str, Any]) -> None:
    rendered = render(values)
    assert labeler_objects(rendered)
    assert _validate_all(rendered.objects) == []


def test_namespaced_labeler_objects_sit_in_the_release_namespace_and_names_stay_unique(everything: Any) -> None:
    for obj in labeler_objects(everything):
        if obj["kind"] not in {"ClusterRole", "ClusterRoleBinding"}:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
    keys = [(o["kind"], o["metadata"]["name"]) for o in everything.objects]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("values", [ON, {"labeler": {"enabled": True, "source": "metrics"}}, {**ON, "clusterView": {"enabled": True}}])
def test_helm_lint_reports_no_errors_or_warnings(chart_dir: Path, values: dict[str, Any]) -> None:
    report = helm.lint(chart_dir, values, strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [] and report["errors"] == []


@pytest.mark.parametrize(
    ("labeler", "complaint"),
    [
        ({"enabeld": True}, "enabeld"),
        ({"enabled": True, "steps": {"gpu": 1}}, "gpu"),
        ({"enabled": True, "leaderElection": {"leaseDuration": 15}}, "leaseDuration"),
        ({"enabled": True, "serviceAccount": {"automount": True}}, "automount"),
        ({"enabled": True, "podDisruptionBudget": {"maxUnavailable": 1}}, "maxUnavailable"),
        ({"enabled": True, "source": "prometheus"}, "source"),
        ({"enabled": True, "intervalSeconds": 0}, "intervalSeconds"),
        ({"enabled": True, "rate": -1}, "rate"),
        ({"enabled": True, "steps": {"usage": 0}}, "usage"),
        ({"enabled": True, "gpuResources": ["gpu"]}, "gpuResources"),
        ({"enabled": True, "logLevel": "INFO"}, "logLevel"),
        ({"enabled": True, "metricsPort": 0}, "metricsPort"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_the_values_schema_rejects(render: Callable[..., Any], labeler: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmError) as err:
        render({"labeler": labeler})
    assert "at '/labeler" in str(err.value) and complaint in str(err.value)


@pytest.mark.parametrize(
    ("election", "complaint"),
    [
        ({"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10}, "leaseDurationSeconds (10) must be greater than renewDeadlineSeconds (10)"),
        ({"renewDeadlineSeconds": 5, "retryPeriodSeconds": 5}, "renewDeadlineSeconds (5) must be greater than 1.2 x retryPeriodSeconds (5)"),
    ],
)
def test_lease_timings_label_nodes_would_refuse_fail_the_render(render: Callable[..., Any], election: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmError) as err:
        render({"labeler": {"enabled": True, "leaderElection": election}})
    assert complaint in str(err.value)


def test_the_default_lease_timings_are_ones_the_leader_elector_accepts(on: Any) -> None:
    args = parse(container(on))
    leader.LeaderElectionConfig(namespace=args.lease_namespace, name=args.lease_name, identity="pod",
                                lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                                retry_period=args.retry_period)


# --- NOTES.txt --------------------------------------------------------------------------------


def test_notes_show_how_to_check_the_labeler_only_when_it_runs(on: Any, default: Any) -> None:
    assert f"rollout status deployment/{NAME}" in on.notes
    assert f"-L {','.join(LABELS[i] for i in (0, 3, 4, 6))}" in on.notes
    assert f"{NAMESPACE}/{NAME}" in on.notes
    assert "Node labeler" not in default.notes
