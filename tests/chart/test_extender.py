"""The scheduler extender the chart runs with ``extender.enabled``: ``placement-webhook extender`` in a
Deployment behind a Service kube-scheduler calls, with its own ServiceAccount, read-only RBAC, a
serving certificate made like the webhook's in each TLS mode, and the ``extenders:`` entry for the
KubeSchedulerConfiguration in NOTES.txt."""
from __future__ import annotations

import base64
import ipaddress
import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from tests.chart.conftest import TLS_MODES
from tests.chart.test_kubernetes_schemas import _validate_all
from tests.chart.test_pod_security import restricted_violations
from tests.chart.test_tls import _signed_by
from tests.kit.chart import ChartWorkload, granted, group_resource, selects
from webhook.cluster import cache
from webhook.commands import extender as extender_command
from webhook.spot import config as spot_config
from webhook.spot.config import SpotConfig

helm = pytest.importorskip("helm_python")

NAMESPACE = "placement-system"
NAME = "pw-placement-webhook-extender"  # <release>-placement-webhook-extender
WEBHOOK = "pw-placement-webhook"
LABELER = "pw-placement-webhook-label-nodes"
COMPONENT = "scheduler-extender"
ON: dict[str, Any] = {"extender": {"enabled": True}}
SERVICE_NAMES = [NAME, f"{NAME}.{NAMESPACE}", f"{NAME}.{NAMESPACE}.svc", f"{NAME}.{NAMESPACE}.svc.cluster.local"]
# The SpotConfig docstring's example (webhook/spot/config.py), every field set.
FULL_CONFIG: dict[str, Any] = {
    "provider": "karpenter",
    "reclaim": {"taints": ["example.com/reclaim"], "labels": {"example.com/state": "draining"},
                "annotations": {"example.com/reclaim-at": ""}, "notReadySeconds": 120},
    "critical": {"priorityThreshold": 1000000, "annotation": "placement.novasphere.dev/critical",
                 "requireOnDemand": False},
    "interruptible": {"annotation": "placement.novasphere.dev/interruptible"},
    "interruptions": {"windowSeconds": 3600, "penalty": 2,
                      "poolLabels": ["node.kubernetes.io/instance-type", "topology.kubernetes.io/zone"]},
    "cost": {"factor": 0.3, "prices": [{"instanceType": "m5.large", "capacity": "spot", "hourly": 0.035},
                                       {"instanceType": "m5.large", "capacity": "on-demand", "hourly": 0.096}]},
}
EVERYTHING: dict[str, Any] = {
    "extender": {
        "enabled": True,
        "replicaCount": 3,
        "port": 9443,
        "urlPrefix": "/scheduler",
        "filterVerb": "filter-spot",
        "prioritizeVerb": "score",
        "weight": 8,
        "nodeCacheCapable": False,
        "config": FULL_CONFIG,
        "service": {"port": 443, "clusterIP": "10.96.0.50"},
        "preStopSeconds": 3,
        "logLevel": "debug",
        "extraArgs": ["--max-request-bytes=67108864"],
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "serviceAccount": {"annotations": {"example.com/owner": "platform"}},
    },
    "imagePullSecrets": [{"name": "registry"}],
}
# The cluster-wide rules, literally: nothing more, nothing less.
CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["list", "watch"]},
]
# TLS mode values with what the extender needs in each (secret mode: a Secret of its own).
EXTENDER_TLS = {mode: {**values, **ON} for mode, values in TLS_MODES.items()}
EXTENDER_TLS["secret"] = {**TLS_MODES["secret"], "extender": {"enabled": True, "tls": {"secretName": "my-extender-tls"}}}


# --- helpers ----------------------------------------------------------------------------------


WORKLOAD = ChartWorkload(NAME, COMPONENT, "extender")
extender_objects = WORKLOAD.objects
named = WORKLOAD.named
deployment = WORKLOAD.deployment
pod_spec = WORKLOAD.pod_spec
container = WORKLOAD.container
parse = WORKLOAD.parse


def mounted_files(rendered: Any) -> dict[str, tuple[str, str, str]]:
    """Path in the container -> (source kind, object name, key) for the extender's projected volume."""
    mounts = {m["name"]: m["mountPath"] for m in container(rendered)["volumeMounts"]}
    files: dict[str, tuple[str, str, str]] = {}
    for volume in pod_spec(rendered)["volumes"]:
        if "projected" not in volume:
            continue
        for source in volume["projected"]["sources"]:
            ((kind, spec),) = source.items()
            for item in spec["items"]:
                files[f"{mounts[volume['name']]}/{item['path']}"] = (kind, spec["name"], item["key"])
    return files


def notes_stanza(notes: str) -> dict[str, Any]:
    """The ``extenders:`` block NOTES.txt prints, as YAML."""
    lines = notes.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "extenders:")
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    loaded: dict[str, Any] = yaml.safe_load(textwrap.dedent("\n".join(lines[start:end])))
    return loaded


def notes_stanza_text(notes: str) -> str:
    return notes.split("extenders:", 1)[1].split("\n\n", 1)[0]


def certificate(secret: dict[str, Any], key: str = "tls.crt") -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(secret["data"][key]))


def config_map_config(rendered: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(named(rendered, "ConfigMap")["data"]["config.yaml"])
    return loaded


@pytest.fixture(scope="module")
def on(render: Callable[..., Any]) -> Any:
    return render(ON)


@pytest.fixture(scope="module")
def everything(render: Callable[..., Any]) -> Any:
    return render(EVERYTHING)


# --- off by default ---------------------------------------------------------------------------


def test_the_extender_is_disabled_by_default_and_nothing_of_it_renders(default: Any, chart_dir: Path) -> None:
    assert yaml.safe_load((chart_dir / "values.yaml").read_text())["extender"]["enabled"] is False
    assert extender_objects(default) == []
    assert not [o for o in default.objects if "extender" in o["metadata"]["name"]]
    assert "extenders:" not in default.notes and "Scheduler extender" not in default.notes


def test_extender_settings_without_enabled_render_nothing_of_it(render: Callable[..., Any]) -> None:
    settings = {k: v for k, v in EVERYTHING["extender"].items() if k != "enabled"}
    rendered = render({"extender": settings})
    assert extender_objects(rendered) == []
    assert "extenders:" not in rendered.notes


# --- the objects ------------------------------------------------------------------------------


def test_enabled_it_renders_its_objects_beside_an_untouched_webhook(render: Callable[..., Any]) -> None:
    tls = EXTENDER_TLS["secret"]  # no generated certificate: two renders compare equal
    on, off = render(tls), render(TLS_MODES["secret"])
    kinds = sorted(o["kind"] for o in extender_objects(on))
    assert kinds == sorted(["Deployment", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                            "PodDisruptionBudget"])
    assert all(o["metadata"]["name"] == NAME for o in extender_objects(on))
    assert [o for o in on.objects if o not in extender_objects(on)] == off.objects


def test_a_config_adds_a_config_map_and_self_signed_mode_a_certificate_secret(everything: Any) -> None:
    kinds = sorted(o["kind"] for o in extender_objects(everything))
    assert kinds == sorted(["Deployment", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                            "PodDisruptionBudget", "ConfigMap", "Secret"])
    assert named(everything, "Secret", f"{NAME}-tls")["type"] == "kubernetes.io/tls"


def test_two_replicas_in_the_release_namespace_running_the_extender_verb_of_the_webhook_image(render: Callable[..., Any]) -> None:
    digest = "sha256:" + "c" * 64
    rendered = render({**ON, "image": {"digest": digest}})
    assert deployment(rendered)["spec"]["replicas"] == 2
    assert deployment(rendered)["metadata"]["namespace"] == NAMESPACE
    webhook = named(rendered, "Deployment", WEBHOOK)["spec"]["template"]["spec"]["containers"][0]
    assert container(rendered)["image"] == webhook["image"] == f"ghcr.io/novasphere/placement-webhook@{digest}"
    assert container(rendered)["imagePullPolicy"] == webhook["imagePullPolicy"]


def test_the_command_replaces_the_image_entrypoint_which_runs_serve(on: Any, root: Path) -> None:
    assert '["placement-webhook", "serve"]' in (root / "Dockerfile").read_text()
    assert container(on)["command"] == ["placement-webhook", "extender"]
    assert not any(a in {"serve", "extender"} for a in container(on)["args"])


def test_the_container_flags_are_ones_placement_webhook_extender_accepts(on: Any) -> None:
    args = parse(container(on))
    assert (args.port, args.url_prefix, args.filter_verb, args.prioritize_verb) == (8888, "/", "filter", "prioritize")
    assert (args.tls_cert, args.tls_key) == ("/etc/placement-extender/tls/tls.crt", "/etc/placement-extender/tls/tls.key")
    assert args.config is None  # the built-in SpotConfig
    assert (args.log_level, args.host) == ("info", "0.0.0.0")
    # In the pod: the cluster view through the service account, not a kubeconfig, and no stanza printing.
    assert not args.no_cluster and args.kubeconfig is None and args.print_scheduler_config is None


def test_every_extender_value_reaches_the_command_line_as_a_flag_it_accepts(everything: Any) -> None:
    args = parse(container(everything))
    assert (args.port, args.url_prefix, args.filter_verb, args.prioritize_verb) == (9443, "/scheduler", "filter-spot", "score")
    assert (args.config, args.log_level, args.max_request_bytes) == ("/etc/placement-extender/config.yaml", "debug", 67108864)
    assert deployment(everything)["spec"]["replicas"] == 3


def test_the_mounted_files_are_the_ones_the_flags_name(everything: Any) -> None:
    args = parse(container(everything))
    files = mounted_files(everything)
    assert files[args.config] == ("configMap", NAME, "config.yaml")
    assert files[args.tls_cert] == ("secret", f"{NAME}-tls", "tls.crt")
    assert files[args.tls_key] == ("secret", f"{NAME}-tls", "tls.key")
    assert not [m for m in container(everything)["volumeMounts"] if "subPath" in m]  # updated in place on renewal


def test_probes_use_the_serving_port_healthz_for_liveness_and_readyz_for_readiness(everything: Any) -> None:
    c = container(everything)
    assert [(p["name"], p["containerPort"]) for p in c["ports"]] == [("https", 9443)]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}


def test_without_tls_it_serves_plain_http_and_makes_no_certificate(render: Callable[..., Any]) -> None:
    for mode in ("self-signed", "cert-manager"):
        rendered = render({**TLS_MODES[mode], "extender": {"enabled": True, "tls": {"enabled": False}}})
        args = parse(container(rendered))
        assert args.tls_cert is None and args.tls_key is None
        c = container(rendered)
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http", "scheme": "HTTP"}
        assert c["livenessProbe"]["httpGet"]["scheme"] == "HTTP"
        assert [p["name"] for p in named(rendered, "Service")["spec"]["ports"]] == ["http"]
        assert not [o for o in extender_objects(rendered) if o["kind"] in {"Secret", "Certificate"}]
        assert not [v for v in pod_spec(rendered)["volumes"] if "projected" in v]
        stanza = notes_stanza(rendered.notes)
        assert stanza["extenders"][0]["urlPrefix"] == f"http://{NAME}.{NAMESPACE}.svc:8888"
        assert "enableHTTPS" not in stanza["extenders"][0] and "tlsConfig" not in stanza["extenders"][0]


def test_the_service_reaches_the_extender_pods_only_on_the_serving_port(everything: Any) -> None:
    service = named(everything, "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["clusterIP"] == "10.96.0.50"
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}]
    pod_labels = deployment(everything)["spec"]["template"]["metadata"]["labels"]
    assert selects(service["spec"]["selector"], pod_labels)


def test_the_service_port_defaults_to_8888_and_no_fixed_cluster_ip(on: Any) -> None:
    spec = named(on, "Service")["spec"]
    assert spec["ports"][0]["port"] == 8888 and "clusterIP" not in spec


def test_no_other_workload_selects_the_extender_s_pods_nor_it_theirs(render: Callable[..., Any]) -> None:
    rendered = render({**ON, "labeler": {"enabled": True}})
    extender_pods = deployment(rendered)["spec"]["template"]["metadata"]["labels"]
    others = [(WEBHOOK, named(rendered, "Service", WEBHOOK)["spec"]["selector"]),
              (WEBHOOK, named(rendered, "PodDisruptionBudget", WEBHOOK)["spec"]["selector"]["matchLabels"]),
              (WEBHOOK, named(rendered, "Deployment", WEBHOOK)["spec"]["selector"]["matchLabels"]),
              (LABELER, named(rendered, "PodDisruptionBudget", LABELER)["spec"]["selector"]["matchLabels"]),
              (LABELER, named(rendered, "Deployment", LABELER)["spec"]["selector"]["matchLabels"])]
    assert not [name for name, selector in others if selects(selector, extender_pods)]
    own = [deployment(rendered)["spec"]["selector"]["matchLabels"], named(rendered, "Service")["spec"]["selector"],
           named(rendered, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]]
    assert all(selects(s, extender_pods) for s in own)
    for name in (WEBHOOK, LABELER):
        pods = named(rendered, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert not any(selects(s, pods) for s in own), name
    assert extender_pods["app.kubernetes.io/name"] == "placement-webhook-extender"


def test_the_two_replicas_prefer_distinct_nodes(on: Any) -> None:
    (term,) = pod_spec(on)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment(on)["spec"]["selector"]["matchLabels"]


def test_pod_settings_come_from_the_extender_values(render: Callable[..., Any], everything: Any) -> None:
    spec = pod_spec(everything)
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "role", "operator": "In", "values": ["infra"]}]}]}}}
    assert pod_spec(render({"extender": {"enabled": True, "affinity": affinity}}))["affinity"] == affinity
    assert container(everything)["resources"] == {"requests": {"cpu": "50m", "memory": "96Mi"}, "limits": {"memory": "384Mi"}}


def test_the_pod_keeps_serving_while_its_endpoint_leaves_the_service(on: Any, everything: Any) -> None:
    assert container(on)["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert pod_spec(on)["terminationGracePeriodSeconds"] > 5
    assert container(everything)["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "3"]
    strategy = deployment(on)["spec"]["strategy"]["rollingUpdate"]
    assert strategy == {"maxUnavailable": 0, "maxSurge": 1}


def test_the_extender_pod_is_not_placed_by_the_webhook(on: Any) -> None:
    assert deployment(on)["spec"]["template"]["metadata"]["annotations"]["placement.novasphere.dev/skip"] == "true"


# --- the SpotConfig ---------------------------------------------------------------------------


def test_the_config_map_holds_a_spot_config_the_extender_loads(everything: Any, tmp_path: Path) -> None:
    data = config_map_config(everything)
    assert data["apiVersion"] == "placement.novasphere.dev/v1alpha1" and data["kind"] == "SpotConfig"
    model = SpotConfig.model_validate(data)
    assert model.model_dump() == SpotConfig.model_validate(FULL_CONFIG).model_dump()
    path = tmp_path / "config.yaml"
    path.write_text(named(everything, "ConfigMap")["data"]["config.yaml"])
    loaded = spot_config.load(path)  # the loader the extender runs: strict YAML, one document
    assert loaded.provider == "karpenter" and loaded.critical.priority_threshold == 1000000
    assert loaded.cost.factor == 0.3 and loaded.price("m5.large", "spot") == 0.035


def test_numbers_from_a_values_file_survive_the_round_trip(render: Callable[..., Any], tmp_path: Path) -> None:
    """Helm reads values files' numbers as floats; a priority threshold must still come out an integer."""
    values = helm.values_from_yaml(textwrap.dedent("""\
        extender:
          enabled: true
          config:
            critical: {priorityThreshold: 2000000000}
            interruptions: {windowSeconds: 7200, penalty: 3}
            cost: {factor: 1, prices: [{instanceType: m5.large, capacity: spot, hourly: 1}]}
        """))
    data = config_map_config(render(values))
    model = SpotConfig.model_validate(data)
    assert model.critical.priority_threshold == 2000000000 and model.interruptions.window_seconds == 7200
    assert "e+" not in named(render(values), "ConfigMap")["data"]["config.yaml"]


def test_without_a_config_there_is_no_config_map_and_no_config_flag(on: Any) -> None:
    assert not [o for o in extender_objects(on) if o["kind"] == "ConfigMap"]
    assert "checksum/config" not in deployment(on)["spec"]["template"]["metadata"]["annotations"]


def test_a_changed_config_rolls_the_pods(render: Callable[..., Any]) -> None:
    """The extender reads its configuration once, at start."""
    def checksum(config: dict[str, Any]) -> str:
        rendered = render({"extender": {"enabled": True, "config": config}})
        value: str = deployment(rendered)["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value
    assert checksum({"provider": "eks"}) != checksum({"provider": "gke"})
    assert checksum({"provider": "eks"}) == checksum({"provider": "eks"})


def _walk(model: dict[str, Any], chart: dict[str, Any], defs: dict[str, Any], at: str) -> list[str]:
    """Where the chart's values schema and the SpotConfig model disagree on field names."""
    if "$ref" in model:
        model = defs[model["$ref"].rsplit("/", 1)[1]]
    branches = [b for b in model.get("anyOf", model.get("oneOf", [])) if b.get("type") != "null"]
    if branches and "properties" not in model:
        chart_branches = [b for b in chart.get("oneOf", chart.get("anyOf", [])) if "properties" in b] or [chart]
        model_objects = [b for b in branches if "$ref" in b or "properties" in b]
        return [p for m, c in zip(model_objects, chart_branches, strict=False) for p in _walk(m, c, defs, at)]
    problems: list[str] = []
    if "properties" in model:
        if set(model["properties"]) != set(chart.get("properties", {})):
            problems.append(f"{at}: model {sorted(model['properties'])} != chart {sorted(chart.get('properties', {}))}")
        if chart.get("additionalProperties") is not False:
            problems.append(f"{at}: the chart accepts unknown keys")
        for key in set(model["properties"]) & set(chart.get("properties", {})):
            problems += _walk(model["properties"][key], chart["properties"][key], defs, f"{at}.{key}")
    elif model.get("type") == "array" and "items" in model:
        problems += _walk(model["items"], chart.get("items", {}), defs, f"{at}[]")
    return problems


def test_the_values_schema_of_extender_config_has_exactly_the_spot_config_fields(chart_dir: Path) -> None:
    chart = json.loads((chart_dir / "values.schema.json").read_text())["properties"]["extender"]["properties"]["config"]
    model = spot_config.schema()
    assert _walk(model, chart, model["$defs"], "extender.config") == []


# --- RBAC and the service account -------------------------------------------------------------


def test_the_cluster_role_is_exactly_list_and_watch_on_nodes_namespaces_and_priorityclasses(on: Any) -> None:
    assert named(on, "ClusterRole")["rules"] == CLUSTER_RULES


def test_the_rbac_covers_every_list_and_watch_of_the_cluster_view_and_grants_nothing_else(on: Any) -> None:
    """Derived from the code: the extender's cluster view is the shared cache's informers."""
    watched = {group_resource(path) for path, _ in cache.RESOURCES.values()}
    assert granted(named(on, "ClusterRole")["rules"]) == {(g, r, v) for g, r in watched for v in ("list", "watch")}
    assert not on.of_kind("Role") and not on.of_kind("RoleBinding")  # it writes nothing, elects no leader


def test_the_binding_grants_the_role_to_the_extender_service_account_only(on: Any) -> None:
    account = pod_spec(on)["serviceAccountName"]
    assert account == named(on, "ServiceAccount")["metadata"]["name"] == NAME
    assert account != named(on, "Deployment", WEBHOOK)["spec"]["template"]["spec"]["serviceAccountName"]
    binding = named(on, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]


def test_only_the_extender_pod_mounts_an_api_token(on: Any) -> None:
    assert pod_spec(on)["automountServiceAccountToken"] is True
    assert named(on, "ServiceAccount")["automountServiceAccountToken"] is False
    assert named(on, "Deployment", WEBHOOK)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_an_existing_service_account_is_used_instead_of_a_created_one(render: Callable[..., Any]) -> None:
    rendered = render({"extender": {"enabled": True, "serviceAccount": {"create": False, "name": "extender-sa"}}})
    assert not [o for o in rendered.of_kind("ServiceAccount") if o["metadata"]["name"] in {NAME, "extender-sa"}]
    assert pod_spec(rendered)["serviceAccountName"] == "extender-sa"
    assert named(rendered, "ClusterRoleBinding")["subjects"][0]["name"] == "extender-sa"


def test_service_account_annotations_are_applied(everything: Any) -> None:
    assert named(everything, "ServiceAccount")["metadata"]["annotations"] == {"example.com/owner": "platform"}


# --- pod security -----------------------------------------------------------------------------


def test_the_extender_pod_passes_the_restricted_profile_with_the_webhook_s_security_settings(everything: Any) -> None:
    assert restricted_violations(pod_spec(everything)) == []
    webhook = named(everything, "Deployment", WEBHOOK)["spec"]["template"]["spec"]
    assert pod_spec(everything)["securityContext"] == webhook["securityContext"]
    assert container(everything)["securityContext"] == webhook["containers"][0]["securityContext"]
    assert container(everything)["securityContext"]["readOnlyRootFilesystem"] is True
    assert "/tmp" in {m["mountPath"] for m in container(everything)["volumeMounts"]}


# --- the PodDisruptionBudget ------------------------------------------------------------------


def test_a_pdb_keeps_an_extender_through_drains(on: Any) -> None:
    pdb = named(on, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment(on)["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("extender", [{"replicaCount": 1}, {"podDisruptionBudget": {"enabled": False}}])
def test_no_pdb_for_a_single_replica_or_when_disabled(render: Callable[..., Any], extender: dict[str, Any]) -> None:
    rendered = render({"extender": {"enabled": True, **extender}})
    assert not [o for o in rendered.of_kind("PodDisruptionBudget") if o["metadata"]["name"] == NAME]


# --- TLS in each mode -------------------------------------------------------------------------


def test_self_signed_mode_generates_a_ca_and_a_certificate_for_the_extender_service(on: Any) -> None:
    secret = named(on, "Secret", f"{NAME}-tls")
    ca, cert = certificate(secret, "ca.crt"), certificate(secret)
    assert _signed_by(cert, ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == SERVICE_NAMES
    assert names.get_values_for_type(x509.IPAddress) == []
    assert secret["metadata"]["annotations"]["placement.novasphere.dev/certificate-for"] == ",".join(SERVICE_NAMES)
    # The CA key stays in the Secret (a new certificate from the same CA when the names change);
    # the pod mounts only its own certificate and key.
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert sorted(key for kind, name, key in mounted_files(on).values() if name == f"{NAME}-tls") == ["tls.crt", "tls.key"]
    webhook = named(on, "Secret", f"{WEBHOOK}-tls")
    assert webhook["data"]["ca.crt"] != secret["data"]["ca.crt"]  # a CA of its own; the webhook's is untouched


def test_a_fixed_cluster_ip_is_in_the_certificate(everything: Any) -> None:
    cert = certificate(named(everything, "Secret", f"{NAME}-tls"))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.96.0.50")]
    assert set(SERVICE_NAMES) <= set(names.get_values_for_type(x509.DNSName))


def test_cert_manager_mode_issues_the_extender_certificate_from_the_chart_ca(render: Callable[..., Any]) -> None:
    rendered = render({**TLS_MODES["cert-manager"], "extender": {"enabled": True, "service": {"clusterIP": "10.96.0.50"}}})
    cert = named(rendered, "Certificate")["spec"]
    assert cert["secretName"] == f"{NAME}-tls"
    assert cert["dnsNames"] == SERVICE_NAMES and cert["ipAddresses"] == ["10.96.0.50"]
    assert cert["issuerRef"] == {"name": f"{WEBHOOK}-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert named(rendered, "Issuer", f"{WEBHOOK}-ca")["spec"] == {"ca": {"secretName": f"{WEBHOOK}-ca"}}
    assert "server auth" in cert["usages"] and cert["privateKey"]["rotationPolicy"] == "Always"
    assert not [o for o in rendered.of_kind("Secret") if o["metadata"]["name"] == f"{NAME}-tls"]
    assert mounted_files(rendered)["/etc/placement-extender/tls/tls.crt"] == ("secret", f"{NAME}-tls", "tls.crt")


def test_cert_manager_with_an_existing_issuer_uses_it_for_the_extender_too(render: Callable[..., Any]) -> None:
    rendered = render(EXTENDER_TLS["cert-manager-issuer"])
    ref = {"name": "corp-ca", "kind": "ClusterIssuer"}
    assert named(rendered, "Certificate")["spec"]["issuerRef"] == ref
    assert named(rendered, "Certificate", f"{WEBHOOK}-serving")["spec"]["issuerRef"] == ref
    assert "ipAddresses" not in named(rendered, "Certificate")["spec"]


def test_secret_mode_needs_a_secret_for_the_extender(render: Callable[..., Any]) -> None:
    with pytest.raises(helm.HelmError) as err:
        render({**TLS_MODES["secret"], **ON})
    assert "extender.tls.secretName is required with tls.mode=secret" in str(err.value)
    rendered = render(EXTENDER_TLS["secret"])
    assert not [o for o in extender_objects(rendered) if o["kind"] in {"Secret", "Certificate"}]
    assert mounted_files(rendered)["/etc/placement-extender/tls/tls.key"] == ("secret", "my-extender-tls", "tls.key")
    assert "kubectl" not in notes_stanza_text(rendered.notes)  # the CA is yours: no Secret of the chart to read it from


def test_an_extender_secret_name_wins_in_every_mode(render: Callable[..., Any]) -> None:
    for mode in ("self-signed", "cert-manager"):
        rendered = render({**TLS_MODES[mode], "extender": {"enabled": True, "tls": {"secretName": "corp-extender-tls"}}})
        assert not [o for o in extender_objects(rendered) if o["kind"] in {"Secret", "Certificate"}]
        assert mounted_files(rendered)["/etc/placement-extender/tls/tls.crt"] == ("secret", "corp-extender-tls", "tls.crt")


# --- NOTES.txt: the KubeSchedulerConfiguration entry ------------------------------------------


def test_notes_print_the_extenders_entry_the_command_prints(on: Any) -> None:
    (entry,) = notes_stanza(on.notes)["extenders"]
    url = f"https://{NAME}.{NAMESPACE}.svc:8888"
    assert entry == extender_command.stanza(url, filter_verb="filter", prioritize_verb="prioritize", weight=5,
                                            node_cache_capable=True)
    assert entry["ignorable"] is True and entry["nodeCacheCapable"] is True and entry["httpTimeout"] == "5s"
    assert entry["enableHTTPS"] is True and entry["tlsConfig"] == {"caFile": "/etc/kubernetes/placement-extender/ca.crt"}
    assert f"get secret {NAME}-tls -o jsonpath='{{.data.ca\\.crt}}'" in on.notes
    assert f"rollout status deployment/{NAME}" in on.notes


def test_notes_follow_the_values_as_the_command_would(everything: Any) -> None:
    (entry,) = notes_stanza(everything.notes)["extenders"]
    assert entry == extender_command.stanza("https://10.96.0.50:443", filter_verb="filter-spot", prioritize_verb="score",
                                            weight=8, node_cache_capable=False, prefix="/scheduler")
    assert entry["urlPrefix"] == "https://10.96.0.50:443/scheduler"
    assert "ClusterFirstWithHostNet" not in everything.notes  # a fixed address needs no cluster DNS


def test_notes_warn_that_a_host_network_scheduler_cannot_resolve_the_service_name(on: Any) -> None:
    assert "ClusterFirstWithHostNet" in on.notes and "extender.service.clusterIP" in on.notes


def test_the_printed_weight_and_verbs_are_ones_the_scheduler_accepts(on: Any) -> None:
    (entry,) = notes_stanza(on.notes)["extenders"]
    assert isinstance(entry["weight"], int) and entry["weight"] > 0  # a prioritizeVerb needs a positive weight
    assert not {"bindVerb", "preemptVerb", "managedResources"} & set(entry)


# --- validity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", sorted(EXTENDER_TLS))
def test_every_rendered_object_validates_strictly_in_each_tls_mode(render: Callable[..., Any], mode: str) -> None:
    rendered = render(EXTENDER_TLS[mode])
    assert extender_objects(rendered)
    assert _validate_all(rendered.objects) == []
    keys = [(o["kind"], o["metadata"]["name"]) for o in rendered.objects]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("values", [EVERYTHING, {"extender": {"enabled": True, "replicaCount": 1, "tls": {"enabled": False}}}],
                         ids=["everything", "one-replica-plain-http"])
def test_every_rendered_object_validates_strictly(render: Callable[..., Any], values: dict[str, Any]) -> None:
    rendered = render(values)
    assert _validate_all(rendered.objects) == []
    for obj in extender_objects(rendered):
        if obj["kind"] not in {"ClusterRole", "ClusterRoleBinding"}:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]


def test_long_release_names_keep_the_suffix(render: Callable[..., Any]) -> None:
    rendered = render({"fullnameOverride": "x" * 70, **ON})
    name = "x" * 54 + "-extender"
    assert len(name) == 63
    assert {o["metadata"]["name"] for o in extender_objects(rendered)} == {name, f"{name}-tls"}
    assert named(rendered, "Secret", f"{name}-tls")["type"] == "kubernetes.io/tls"


@pytest.mark.parametrize("values", [ON, {**ON, **TLS_MODES["cert-manager"]}, EVERYTHING])
def test_helm_lint_reports_no_errors_or_warnings(chart_dir: Path, values: dict[str, Any]) -> None:
    report = helm.lint(chart_dir, values, strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [] and report["errors"] == []


@pytest.mark.parametrize(
    ("extender", "complaint"),
    [
        ({"enabeld": True}, "enabeld"),
        ({"enabled": True, "tls": {"mode": "self-signed"}}, "mode"),
        ({"enabled": True, "service": {"type": "NodePort"}}, "type"),
        ({"enabled": True, "service": {"clusterIP": "None"}}, "clusterIP"),
        ({"enabled": True, "podDisruptionBudget": {"minAvailable": 1}}, "minAvailable"),
        ({"enabled": True, "serviceAccount": {"automount": True}}, "automount"),
        ({"enabled": True, "config": {"provdier": "eks"}}, "provdier"),
        ({"enabled": True, "config": {"provider": "azure"}}, "provider"),
        ({"enabled": True, "config": {"reclaim": {"taint": ["x"]}}}, "taint"),
        ({"enabled": True, "config": {"cost": {"factor": 2}}}, "factor"),
        ({"enabled": True, "config": {"cost": {"prices": [{"instanceType": "m5.large", "capacity": "spot"}]}}}, "hourly"),
        ({"enabled": True, "config": {"kind": "PlacementPolicy"}}, "kind"),
        ({"enabled": True, "port": 0}, "port"),
        ({"enabled": True, "weight": 0}, "weight"),
        ({"enabled": True, "urlPrefix": "scheduler"}, "urlPrefix"),
        ({"enabled": True, "filterVerb": "a/b"}, "filterVerb"),
        ({"enabled": True, "logLevel": "INFO"}, "logLevel"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_the_values_schema_rejects(render: Callable[..., Any], extender: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmError) as err:
        render({"extender": extender})
    assert "at '/extender" in str(err.value) and complaint in str(err.value)


# --- docs -------------------------------------------------------------------------------------


def test_the_extender_docs_cite_only_files_that_exist(root: Path) -> None:
    text = (root / "docs" / "extender.md").read_text()
    cited = set(re.findall(r"`((?:webhook|tests|charts|docs)/[A-Za-z0-9_./-]+)`", text))
    cited |= {f"docs/{m}" for m in re.findall(r"\]\(([A-Za-z0-9_-]+\.md)(?:#[^)]*)?\)", text)}
    assert cited, "the page cites the code it describes"
    assert sorted(p for p in cited if not (root / p).exists()) == []
    assert "(extender.md" in (root / "docs" / "install.md").read_text()  # the install guide links here


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", markdown, flags=re.DOTALL), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", ["extender.md", "install.md"])
def test_the_links_between_the_extender_and_install_docs_reach_their_headings(root: Path, page: str) -> None:
    docs = root / "docs"
    broken = []
    for target, anchor in re.findall(r"\]\(([A-Za-z0-9_-]*\.md)?#([^)]+)\)", (docs / page).read_text()):
        if anchor not in _anchors((docs / (target or page)).read_text()):
            broken.append(f"{target or page}#{anchor}")
    assert broken == []
