"""The shipped example policies load, lint clean together, cover each use case of docs/policies.md, and
the published JSON Schema accepts them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from webhook import cli
from webhook.files import documents
from webhook.policy import loader, model
from webhook.policy.policyset import PolicySet

POLICIES = Path(__file__).resolve().parents[2] / "policies"


@pytest.fixture(scope="module")
def shipped() -> PolicySet:
    return loader.load([POLICIES])


def _spec(policies: PolicySet, name: str) -> dict[str, Any]:
    return dict(next(p for p in policies if p.name == name).spec)


def test_the_shipped_policies_lint_clean_together(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["lint", str(POLICIES)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert out == f"{len(loader.load([POLICIES]))} policies OK\n"


def test_one_replica_per_node_is_required_for_databases_and_preferred_for_web(shipped: PolicySet) -> None:
    db = _spec(shipped, "spread-database-required")["placement"]["podAntiAffinity"]
    web = _spec(shipped, "spread-web-preferred")["placement"]["podAntiAffinity"]
    assert (db["spread"], web["spread"]) == ("required", "preferred")
    assert db["topologyKey"] == web["topologyKey"] == "kubernetes.io/hostname"


def test_gpu_vms_target_kubevirt_and_wukong_with_accelerator_in_gpu_or_nvidia(shipped: PolicySet) -> None:
    gpu = next(p for p in shipped if p.name == "gpu-vms")
    assert {t.kind for t in gpu.targets or ()} == {"VirtualMachine", "Wukong"}
    [term] = gpu.spec["placement"]["nodeAffinity"]["required"]
    assert term["matchExpressions"] == [{"key": "accelerator", "operator": "In", "values": ["gpu", "nvidia"]}]


def test_zone_pinning_requires_zones_and_prefers_ssd(shipped: PolicySet) -> None:
    affinity = _spec(shipped, "zone-pinning-eu")["placement"]["nodeAffinity"]
    assert affinity["required"][0]["matchExpressions"][0]["key"] == "topology.kubernetes.io/zone"
    assert affinity["preferred"][0]["preference"]["matchExpressions"][0]["values"] == ["ssd"]


def test_maintenance_nodes_are_avoided_through_node_anti_affinity(shipped: PolicySet) -> None:
    anti = _spec(shipped, "avoid-maintenance")["placement"]["nodeAntiAffinity"]
    assert anti["required"][0]["matchExpressions"] == [{"key": "maintenance", "operator": "In", "values": ["true"]}]


def test_spot_is_preferred_for_cheap_workloads_and_on_demand_required_for_critical_ones(shipped: PolicySet) -> None:
    spot = _spec(shipped, "prefer-spot")
    critical = _spec(shipped, "critical-on-demand")
    assert spot["placement"]["capacity"]["prefer"] == "spot" and "require" not in spot["placement"]["capacity"]
    assert critical["placement"]["capacity"]["require"] == "on-demand"
    assert critical["scheduling"]["priorityClassName"] == "business-critical"
    # a critical workload that is also labelled cheap must not be sent to spot
    assert spot["exclude"]["selector"] == critical["match"]["selector"]


def test_resource_aware_policies_use_thresholds_and_required_gpus(shipped: PolicySet) -> None:
    analytics = _spec(shipped, "resource-aware-analytics")["placement"]["resources"]
    training = _spec(shipped, "resource-aware-training")["placement"]["resources"]
    assert analytics["preferredCPU"] == {"weight": 80, "threshold": "70%"}
    assert {"resourceType": "gpu", "minAvailable": "1"} in training["requiredResources"]


def test_safe_rollouts_cover_deployments(shipped: PolicySet) -> None:
    safe = next(p for p in shipped if p.name == "safe-rollouts")
    assert safe.spec["rollout"]["mode"] == "safe"
    assert {t.kind for t in safe.targets or ()} == {"Deployment"}


def test_every_shipped_file_documents_itself_with_comments() -> None:
    for path in sorted(POLICIES.glob("*.yaml")):
        if not path.name.endswith(".suite.yaml"):
            assert path.read_text(encoding="utf-8").startswith("# "), path


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return model.schema()


class TestSchema:
    """``placement-webhook schema`` is a valid JSON Schema that editors can use."""

    def test_it_is_a_valid_draft_2020_12_schema(self, schema: dict[str, Any]) -> None:
        jsonschema.Draft202012Validator.check_schema(schema)

    def test_it_accepts_every_shipped_policy(self, schema: dict[str, Any]) -> None:
        validator = jsonschema.Draft202012Validator(schema)
        docs = [d for f in loader.policy_files([POLICIES]) for d in documents.load_file(f)]
        assert docs
        for doc in docs:
            assert not list(validator.iter_errors(doc.data)), doc.file

    @pytest.mark.parametrize(
        "mutation",
        [
            lambda d: d["spec"].update(placment={}),
            lambda d: d.update(kind="Deployment"),
            lambda d: d["spec"].update(onConflict="sometimes"),
            lambda d: d["spec"].update(placement={"podAntiAffinity": {"spread": "required", "weight": 0}}),
        ],
        ids=["unknown-field", "wrong-kind", "bad-enum", "weight-range"],
    )
    def test_it_rejects_what_the_loader_rejects(self, schema: dict[str, Any], mutation: Any) -> None:
        doc = {"apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy",
               "metadata": {"name": "x"}, "spec": {}}
        jsonschema.validate(doc, schema)
        mutation(doc)
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(doc))

    def test_it_uses_the_yaml_field_names(self, schema: dict[str, Any]) -> None:
        text = json.dumps(schema)
        assert '"preferredCPU"' in text and '"matchExpressions"' in text and "match_expressions" not in text
