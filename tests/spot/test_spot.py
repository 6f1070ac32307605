"""Spot facts: capacity by provider, reclaim signals, pod classes, and the SpotConfig file."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from webhook.kube.capacity import PROVIDERS, capacity_requirement
from webhook.scheduler.nodeaffinity import terms_match
from webhook.spot import config as spot_config
from webhook.spot.config import SpotConfig
from webhook.spot.nodes import ON_DEMAND, SPOT, UNKNOWN, Detector, ReclaimSignal, capacity, classify, pool

NOW = 1_800_000_000.0


def node(name: str = "n", labels: dict[str, str] | None = None, *, taints: list[dict[str, Any]] | None = None,
         ready: str | None = None, since: str = "2027-01-15T08:00:00Z", annotations: dict[str, str] | None = None,
         ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = annotations
    status: dict[str, Any] = {}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "lastTransitionTime": since}]
    return {"metadata": meta, "spec": {"taints": taints or []}, "status": status}


@pytest.mark.parametrize(("provider", "labels", "expected"), [
    ("generic", {"node.kubernetes.io/capacity": "spot"}, SPOT),
    ("generic", {"node.kubernetes.io/capacity": "on-demand"}, ON_DEMAND),
    ("generic", {}, UNKNOWN),  # the generic provider marks both: an unlabelled node is neither
    ("eks", {"eks.amazonaws.com/capacityType": "SPOT"}, SPOT),
    ("eks", {"eks.amazonaws.com/capacityType": "spot"}, UNKNOWN),  # values are compared as written
    ("gke", {"cloud.google.com/gke-spot": "true"}, SPOT),
    ("gke", {}, ON_DEMAND),  # GKE marks only spot nodes
    ("aks", {"kubernetes.azure.com/scalesetpriority": "spot"}, SPOT),
    ("karpenter", {"karpenter.sh/capacity-type": "reserved"}, UNKNOWN),
])
def test_capacity_follows_the_providers_label(provider: str, labels: dict[str, str], expected: str) -> None:
    assert capacity(node(labels=labels), SpotConfig.model_validate({"provider": provider})) == expected


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_node_is_spot_to_the_controller_exactly_when_admissions_spot_requirement_selects_it(provider: str) -> None:
    # One provider table (kube.capacity) for both: what a policy's capacity writes and how the
    # spot controller and extender classify the node it lands on.
    entry = PROVIDERS[provider]
    config = SpotConfig.model_validate({"provider": provider})
    for value in (None, "other", *entry["spot"], *entry["onDemand"]):
        n = node(labels={} if value is None else {entry["label"]: value})
        for want, kind in (("spot", SPOT), ("on-demand", ON_DEMAND)):
            selected = terms_match([{"matchExpressions": [capacity_requirement(entry, want)]}], n)
            assert (capacity(n, config) == kind) is selected, (value, want)


def test_an_explicit_provider_is_read_like_a_named_one() -> None:
    config = SpotConfig.model_validate({"provider": {"label": "example.com/lifecycle", "spot": ["preemptible"],
                                                     "onDemand": []}})
    assert capacity(node(labels={"example.com/lifecycle": "preemptible"}), config) == SPOT
    assert capacity(node(), config) == ON_DEMAND


@pytest.mark.parametrize("key", ["aws-node-termination-handler/spot-itn", "karpenter.sh/disrupted",
                                 "karpenter.sh/disruption", "cloud.google.com/impending-node-termination"])
def test_the_interruption_handlers_taints_mark_a_node_for_reclaim(key: str) -> None:
    marked = node(taints=[{"key": key, "value": "x", "effect": "NoSchedule"}])
    assert Detector(SpotConfig()).reclaim(marked, NOW) == f"taint {key}"


def test_a_configured_label_annotation_or_taint_marks_a_node_too() -> None:
    config = SpotConfig.model_validate({"reclaim": {"taints": ["example.com/reclaim"],
                                                    "labels": {"example.com/state": "draining"},
                                                    "annotations": {"example.com/reclaim-at": ""}}})
    detector = Detector(config)
    assert detector.reclaim(node(taints=[{"key": "example.com/reclaim", "effect": "NoExecute"}]), NOW)
    assert detector.reclaim(node(labels={"example.com/state": "draining"}), NOW) == "label example.com/state"
    assert detector.reclaim(node(labels={"example.com/state": "active"}), NOW) is None
    assert detector.reclaim(node(annotations={"example.com/reclaim-at": "soon"}), NOW) == "annotation example.com/reclaim-at"


def test_a_spot_node_not_ready_past_the_bound_is_taken_as_reclaimed_and_an_on_demand_one_is_not() -> None:
    detector = Detector(SpotConfig())
    spot = {"node.kubernetes.io/capacity": "spot"}
    long_ago = "2027-01-15T07:00:00Z"  # NOW is 2027-01-15T08:00:00Z
    assert detector.reclaim(node(labels=spot, ready="Unknown", since=long_ago), NOW) == "spot node not Ready for 3600 s"
    assert detector.reclaim(node(labels=spot, ready="False", since="2027-01-15T07:59:30Z"), NOW) is None
    assert detector.reclaim(node(labels={"node.kubernetes.io/capacity": "on-demand"}, ready="False",
                                 since=long_ago), NOW) is None
    assert detector.reclaim(node(labels=spot, ready="True", since=long_ago), NOW) is None


def test_a_reclaim_signal_names_the_node_its_kind_what_said_so_and_when_it_was_seen() -> None:
    detector = Detector(SpotConfig())
    itn = node("spot-7", taints=[{"key": "aws-node-termination-handler/spot-itn", "value": "evt-1",
                                  "effect": "NoSchedule"}])
    signal = detector.signal(itn, NOW)
    assert signal == ReclaimSignal("spot-7", "SPOT_ITN", "taint aws-node-termination-handler/spot-itn", NOW)
    assert signal.notice is None and signal.deadline(120.0) == NOW + 120.0, "no notice: the configured timeout"
    karpenter = node(taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    assert detector.signal(karpenter, NOW).kind == "KARPENTER_DISRUPTION"  # type: ignore[union-attr]
    gone = node(labels={"node.kubernetes.io/capacity": "spot"}, ready="Unknown", since="2027-01-15T07:00:00Z")
    assert detector.signal(gone, NOW) == ReclaimSignal("n", "NOT_READY", "spot node not Ready for 3600 s", NOW)
    assert detector.signal(node(), NOW) is None


def test_a_configured_annotation_or_label_holding_a_time_is_the_providers_notice() -> None:
    config = SpotConfig.model_validate({"reclaim": {"labels": {"example.com/reclaim-at": ""},
                                                    "annotations": {"example.com/terminate-at": ""}}})
    detector = Detector(config)
    at = detector.signal(node(annotations={"example.com/terminate-at": "2027-01-15T08:01:30Z"}), NOW)
    assert at is not None and at.kind == "CONFIGURED" and at.notice == NOW + 90
    assert at.deadline(3600.0) == NOW + 90, "the provider's notice, not the configured timeout"
    unix = detector.signal(node(labels={"example.com/reclaim-at": "1800000045"}), NOW)  # labels hold no colons
    assert unix is not None and unix.notice == NOW + 45
    marker = detector.signal(node(labels={"example.com/reclaim-at": "true"}), NOW)
    assert marker is not None and marker.notice is None and marker.deadline(120.0) == NOW + 120


def pod(**spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations", {})
    return {"metadata": {"name": "p", "namespace": "x", "annotations": annotations}, "spec": spec}


def test_priority_at_the_threshold_makes_a_pod_critical() -> None:
    config = SpotConfig.model_validate({"critical": {"priorityThreshold": 1000}})
    assert classify(pod(priority=1000), config).critical
    assert not classify(pod(priority=999), config).critical
    named = classify(pod(priorityClassName="gold"), config, {"gold": {"value": 5000}})
    assert named.critical and named.why == "priority 5000 >= 1000"


def test_interruptible_by_annotation_toleration_or_affinity_for_spot() -> None:
    aks = SpotConfig.model_validate({"provider": "aks"})
    tolerating = pod(tolerations=[{"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal",
                                   "value": "spot", "effect": "NoSchedule"}])
    assert classify(tolerating, aks).why == "tolerates the spot taint"
    wants_spot = pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [
            {"key": "node.kubernetes.io/capacity", "operator": "In", "values": ["spot"]}]}}]}})
    assert classify(wants_spot, SpotConfig()).interruptible
    annotated = pod(annotations={"placement.novasphere.dev/interruptible": "true"})
    assert classify(annotated, SpotConfig()).interruptible
    assert classify(pod(), SpotConfig()).why == ""


def test_pools_are_the_values_of_the_pool_labels() -> None:
    labels = {"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "a"}
    assert pool(node(labels=labels), SpotConfig()) == ("m5.large", "a")


def test_a_broken_config_reports_every_error_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "spot.yaml"
    path.write_text("apiVersion: placement.novasphere.dev/v1alpha1\nkind: SpotConfig\n"
                    "provider: karpentr\ncritical:\n  priorityTreshold: 5\ncost:\n  factor: 2\n")
    with pytest.raises(spot_config.SpotConfigError) as raised:
        spot_config.load(path)
    text = [str(e) for e in raised.value.errors]
    assert any(t.startswith(f"{path}:3: provider") for t in text), text
    assert any(t.startswith(f"{path}:5: critical.priorityTreshold") and 'did you mean "priorityThreshold"' in t
               for t in text), text
    assert any(t.startswith(f"{path}:7: cost.factor") for t in text), text


def test_a_price_given_twice_is_an_error_at_the_second(tmp_path: Path) -> None:
    path = tmp_path / "spot.yaml"
    path.write_text("cost:\n  prices:\n  - {instanceType: m5.large, capacity: spot, hourly: 0.03}\n"
                    "  - {instanceType: m5.large, capacity: spot, hourly: 0.04}\n")
    with pytest.raises(spot_config.SpotConfigError, match=r":4: cost.prices\[1\]: m5.large spot is priced twice"):
        spot_config.load(path)


def test_no_file_is_the_defaults_and_an_unreadable_one_an_error(tmp_path: Path) -> None:
    assert spot_config.load(None) == SpotConfig()
    (tmp_path / "bad.yaml").write_text("cost: [\n")
    with pytest.raises(spot_config.SpotConfigError, match="bad.yaml:"):
        spot_config.load(tmp_path / "bad.yaml")
