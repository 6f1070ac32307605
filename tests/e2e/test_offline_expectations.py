"""What the end-to-end tier expects, checked without an API server so it runs everywhere:
the tier's policy loads, ``admission.admit`` does to its workloads what the tier asserts, the
chart's webhook configuration is the one the tier registers, and the tier skips cleanly.
"""
from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.kit.e2e_workloads import (
    LATER_POLICY_YAML,
    POLICY_NAME,
    POLICY_YAML,
    RESOURCES,
    RESTARTED_AT,
    placed,
    tolerates_later,
    untouched,
    workload,
)
from tests.kit.envtest import SKIP_REASON, VM_CRD, find_assets, webhook_configuration
from webhook import ANNOTATION_SKIP
from webhook.engine import admission, review
from webhook.policy import loader


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("policies")
    (folder / "e2e-placement.yaml").write_text(POLICY_YAML)
    return loader.load([folder])


@pytest.fixture(scope="module")
def later(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tier's policy set after ``LATER_POLICY_YAML`` was added to it."""
    folder = tmp_path_factory.mktemp("later")
    (folder / "e2e-placement.yaml").write_text(POLICY_YAML)
    (folder / "e2e-later.yaml").write_text(LATER_POLICY_YAML)
    return loader.load([folder])


def _admit(policies: Any, obj: dict[str, Any], *, operation: str = "CREATE", old: dict[str, Any] | None = None) -> Any:
    request = review.request_for_object(obj, operation=operation, namespace="e2e-offline", old_object=old)
    return admission.admit(request, policies=policies)


def test_the_tier_policy_loads_under_its_name(policies: Any) -> None:
    assert [p.name for p in policies] == [POLICY_NAME]


@pytest.mark.parametrize("kind", sorted(RESOURCES))
def test_a_create_is_placed_and_the_patch_gives_the_placed_object(policies: Any, kind: str) -> None:
    obj = workload(kind, "web")
    outcome = _admit(policies, copy.deepcopy(obj))
    assert outcome.result == "patched" and placed(outcome.object)
    assert placed(jsonpatch.apply_patch(obj, outcome.patch))


def test_the_skip_annotation_is_honoured(policies: Any) -> None:
    outcome = _admit(policies, workload("Deployment", "web", skip=True))
    assert outcome.result == "skipped" and outcome.patch == [] and untouched(outcome.object)


def test_an_update_that_drops_the_skip_annotation_places_the_pods_at_their_next_rollout(policies: Any) -> None:
    # Placing the template then would roll every pod; the user started no rollout.
    old = workload("Deployment", "web", skip=True)
    new = copy.deepcopy(old)
    del new["metadata"]["annotations"][ANNOTATION_SKIP]
    assert untouched(_admit(policies, new, operation="UPDATE", old=old).object)
    restarted = copy.deepcopy(new)
    restarted["spec"]["template"]["metadata"]["annotations"] = {RESTARTED_AT: "2026-11-23T10:00:00Z"}
    assert placed(_admit(policies, restarted, operation="UPDATE", old=new).object)


def test_after_a_policy_is_added_a_scale_leaves_the_pod_template_as_it_was(policies: Any, later: Any) -> None:
    old = _admit(policies, workload("Deployment", "web")).object
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 5
    outcome = _admit(later, scaled, operation="UPDATE", old=old)
    assert outcome.object["spec"]["template"] == old["spec"]["template"] and not tolerates_later(outcome.object)
    assert tolerates_later(_admit(later, workload("Deployment", "new")).object)


def test_reinvocation_over_a_placed_object_changes_nothing(policies: Any) -> None:
    first = _admit(policies, workload("Deployment", "web")).object
    again = _admit(policies, copy.deepcopy(first), operation="UPDATE", old=first)
    assert again.patch == []


def test_untouched_and_placed_tell_the_two_apart() -> None:
    obj = workload("StatefulSet", "db")
    assert untouched(obj) and not placed(obj)


def test_the_registered_configuration_is_the_chart_s_with_the_url_and_ca_bundle() -> None:
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
    config = webhook_configuration(url="https://127.0.0.1:9443/mutate", ca_bundle=bundle)
    (hook,) = config["webhooks"]
    assert hook["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate", "caBundle": bundle}
    assert hook["failurePolicy"] == "Ignore"
    rules = {(g, r) for rule in hook["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert {(group, plural) for group, _v, plural in RESOURCES.values()} <= rules
    assert {"key": ANNOTATION_SKIP, "operator": "NotIn", "values": ["true"]} in hook["namespaceSelector"]["matchExpressions"]


def test_the_vm_crd_serves_kubevirt_v1_virtualmachines() -> None:
    spec = VM_CRD["spec"]
    assert (spec["group"], spec["names"]["plural"], spec["names"]["kind"]) == ("kubevirt.io", "virtualmachines", "VirtualMachine")
    (version,) = spec["versions"]
    assert version["name"] == "v1" and version["served"] and version["storage"]


def _fake_binaries(folder: Path, names: list[str]) -> Path:
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.parametrize(
    ("setup", "found"),
    [
        (lambda tmp: {}, False),
        (lambda tmp: {"KUBEBUILDER_ASSETS": str(tmp / "missing")}, False),
        (lambda tmp: {"KUBEBUILDER_ASSETS": str(_fake_binaries(tmp, ["etcd"]))}, False),
        (lambda tmp: {"KUBEBUILDER_ASSETS": str(_fake_binaries(tmp, ["etcd", "kube-apiserver"]))}, True),
    ],
    ids=["unset", "missing-folder", "only-etcd", "both"],
)
def test_the_tier_runs_only_when_kubebuilder_assets_holds_both_binaries(tmp_path: Path, setup: Any, found: bool) -> None:
    assert (find_assets(setup(tmp_path)) is not None) is found


def test_the_skip_message_says_what_to_set() -> None:
    assert "KUBEBUILDER_ASSETS" in SKIP_REASON and "kube-apiserver" in SKIP_REASON and "etcd" in SKIP_REASON
