"""The audit's verdicts on the cluster of docs/audit.md (examples/audit/cluster.yaml), held
against two shipped policies: who passes, who fails and with which patch, who opted out, whose
rollout is stuck, and that nothing the engine cannot read stops the audit."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.kit.policies import policy, policy_set
from webhook.audit import scan
from webhook.audit.model import ADMISSION_POLICY, RULE_POLICY, RULE_READ, RULE_REPLICAS, RULE_ROLLOUT, \
    SCHEDULING_POLICY, Result, Status
from webhook.audit.scan import Auditor, AuditState, Options, summary
from webhook.commands import inputs
from webhook.engine import placement
from webhook.kube.kinds import BUILTIN
from webhook.policy import loader
from webhook.policy.policyset import PolicySet

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "examples" / "audit" / "cluster.yaml"
POLICIES = [ROOT / "policies" / "avoid-maintenance.yaml", ROOT / "policies" / "critical-on-demand.yaml"]


def _objects() -> list[Any]:
    found = inputs.read_state_files([str(CLUSTER)])
    assert isinstance(found, list)
    return found


def _state(objects: list[Any] | None = None) -> AuditState:
    return AuditState.from_objects(objects if objects is not None else _objects(), targets=BUILTIN)


def _shipped() -> PolicySet:
    return loader.load_with_sources([str(p) for p in POLICIES], targets=BUILTIN, each=True).policies


@pytest.fixture(scope="module")
def results() -> list[Result]:
    return Auditor(_shipped()).full(_state())


def _of(results: list[Result], shown: str, policy: str | None = None, rule: str | None = None) -> list[Result]:
    return [r for r in results if r.resource.shown() == shown and (policy is None or r.policy == policy)
            and (rule is None or r.rule == rule)]


def _one(results: list[Result], shown: str, policy: str, rule: str) -> Result:
    found = _of(results, shown, policy, rule)
    assert len(found) == 1, (shown, policy, rule, results)
    return found[0]


def test_a_workload_created_before_a_policy_fails_it_with_the_field_group_and_the_patch(results: list[Result]) -> None:
    cart = _one(results, "Deployment/shop/cart", "avoid-maintenance", "affinity")
    assert cart.status is Status.FAIL
    assert [op["path"] for op in cart.patch] == ["/spec/template/spec/affinity"]
    terms = cart.patch[0]["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == "maintenance"
    assert cart.resource.uid == "6f1c1e52-0002" and cart.resource.api_version == "apps/v1"


def test_a_policy_that_writes_two_field_groups_fails_once_per_group(results: list[Result]) -> None:
    checkout = _of(results, "Deployment/shop/checkout", "critical-on-demand")
    assert {r.rule for r in checkout} == {"affinity", "priority"}
    priority = _one(results, "Deployment/shop/checkout", "critical-on-demand", "priority")
    assert {op["path"]: op["value"] for op in priority.patch} == {
        "/spec/template/spec/priorityClassName": "business-critical",
        "/spec/template/spec/preemptionPolicy": "PreemptLowerPriority"}


def test_a_workload_the_policy_already_placed_passes(results: list[Result]) -> None:
    web = _one(results, "Deployment/shop/web", "avoid-maintenance", RULE_POLICY)
    assert web.status is Status.PASS and not web.patch


def test_an_opted_out_workload_is_skipped_and_the_result_says_the_policy_allows_it(results: list[Result]) -> None:
    report = _one(results, "Deployment/tools/report", "avoid-maintenance", RULE_POLICY)
    assert report.status is Status.SKIP and "allowSkip: true" in report.message


def test_the_stuck_rollout_of_two_replicas_spread_by_hostname_on_two_nodes_is_found(results: list[Result]) -> None:
    rollout = _one(results, "Deployment/shop/web", SCHEDULING_POLICY, RULE_ROLLOUT)
    assert rollout.status is Status.WARN
    assert rollout.message.startswith("rollout would stop at 0 of 2 (2 replica(s), RollingUpdate, maxSurge 1, "
                                      "maxUnavailable 0): 0/2 nodes are available: 2 node(s) didn't match pod "
                                      "anti-affinity rules"), rollout.message
    assert _one(results, "Deployment/shop/web", SCHEDULING_POLICY, RULE_REPLICAS).status is Status.PASS


def test_replicas_no_node_takes_are_a_warning_with_the_schedulers_message(results: list[Result]) -> None:
    search = _one(results, "Deployment/shop/search", SCHEDULING_POLICY, RULE_REPLICAS)
    assert search.status is Status.WARN
    assert search.message.startswith("2 of 2 replica(s) cannot be placed: 0/2 nodes are available: 2 node(s) didn't "
                                     "match Pod's node affinity/selector"), search.message


def test_a_workload_the_model_cannot_read_is_an_error_naming_it_and_the_others_are_still_audited(
        results: list[Result]) -> None:
    broken = _one(results, "Deployment/tools/broken", SCHEDULING_POLICY, RULE_READ)
    assert broken.status is Status.ERROR and "'Near' is not a valid label selector operator" in broken.message
    assert _one(results, "Deployment/tools/broken", "avoid-maintenance", "affinity").status is Status.FAIL


def test_owned_objects_are_audited_through_their_owner_and_a_bare_pod_on_its_own(results: list[Result]) -> None:
    shown = {r.resource.shown() for r in results}
    assert not any(s.startswith("ReplicaSet/") for s in shown)
    assert not any(s.startswith("Pod/shop/") for s in shown)
    assert _one(results, "Pod/tools/debug", SCHEDULING_POLICY, RULE_REPLICAS).status is Status.PASS


def test_the_summary_counts_every_status(results: list[Result]) -> None:
    assert summary(results) == {"pass": 9, "fail": 6, "warn": 3, "skip": 1, "error": 1}


def test_a_policy_that_refuses_opting_out_still_fails_the_workload_and_says_it_refused() -> None:
    strict = policy("strict", targets=("Deployment",), allowSkip=False,
                    placement={"nodeSelector": {"kubernetes.io/os": "linux"}})
    results = Auditor(policy_set(strict), options=Options(scheduling=False)).full(_state())
    report = _one(results, "Deployment/tools/report", "strict", "nodeSelector")
    assert report.status is Status.FAIL and "refused: the policy has allowSkip: false" in report.message
    assert report.patch == ({"op": "add", "path": "/spec/template/spec/nodeSelector",
                             "value": {"kubernetes.io/os": "linux"}},)


def test_an_audit_mode_policy_that_would_change_a_workload_warns() -> None:
    watching = policy("watching", targets=("Deployment",), enforcement="audit",
                      placement={"nodeSelector": {"kubernetes.io/os": "linux"}})
    results = Auditor(policy_set(watching), options=Options(scheduling=False)).full(_state())
    cart = _one(results, "Deployment/shop/cart", "watching", "nodeSelector")
    assert cart.status is Status.WARN and "enforcement: audit" in cart.message
    assert cart.patch[0]["path"] == "/spec/template/spec/nodeSelector"


def test_an_admission_failure_is_an_error_of_the_policies_that_selected_the_workload(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def engine_bug(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("engine bug")

    monkeypatch.setattr(placement, "apply_policy", engine_bug)
    results = Auditor(_shipped(), options=Options(scheduling=False)).full(_state())
    checkout = _of(results, "Deployment/shop/checkout")
    # avoid-maintenance runs first (order 5) and fails admission as a whole: no other policy is asked.
    assert [(r.policy, r.rule, r.status) for r in checkout] == [("avoid-maintenance", RULE_READ, Status.ERROR)]
    assert all(r.message == "admission failed: RuntimeError: engine bug" for r in checkout)
    assert ADMISSION_POLICY not in {r.policy for r in results}


def test_a_scheduling_failure_of_the_model_itself_is_an_error_result_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> list[Result]:
        raise RuntimeError("model bug")

    monkeypatch.setattr(scan, "scheduling_results", broken)
    results = Auditor(_shipped()).full(_state())
    cart = _one(results, "Deployment/shop/cart", SCHEDULING_POLICY, RULE_READ)
    assert cart.status is Status.ERROR and "RuntimeError: model bug" in cart.message


# --- caching and incremental passes ------------------------------------------------------------


class _Counting:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.keys: list[str] = []
        original = scan.policy_results

        def counting(obj: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            self.keys.append(f"{obj['kind']}/{obj['metadata'].get('namespace')}/{obj['metadata']['name']}")
            return original(obj, *args, **kwargs)

        monkeypatch.setattr(scan, "policy_results", counting)


def test_an_unchanged_object_keeps_its_policy_verdicts_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _Counting(monkeypatch)
    auditor, state = Auditor(_shipped()), _state()
    first = auditor.full(state)
    assert "Deployment/shop/cart" in counting.keys
    counting.keys.clear()
    assert auditor.full(state) == first
    # Every workload of the file has a resourceVersion; its pods, which have none, are asked again.
    assert [k for k in counting.keys if not k.startswith("Pod/")] == []


def test_a_new_resource_version_or_new_namespace_labels_are_audited_again(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _Counting(monkeypatch)
    auditor, objects = Auditor(_shipped()), _objects()
    auditor.full(_state(objects))
    changed = copy.deepcopy(objects)
    items = changed[0]["items"]
    cart = next(o for o in items if o["kind"] == "Deployment" and o["metadata"]["name"] == "cart")
    cart["metadata"]["resourceVersion"] = "2002"
    tools = next(o for o in items if o["kind"] == "Namespace" and o["metadata"]["name"] == "tools")
    tools["metadata"]["labels"]["tier"] = "internal"
    counting.keys.clear()
    auditor.full(_state(changed))
    assert sorted(k for k in counting.keys if k.startswith("Deployment/")) == [
        "Deployment/shop/cart", "Deployment/tools/broken", "Deployment/tools/report"]


def test_changed_audits_only_the_named_workload_and_returns_every_result(monkeypatch: pytest.MonkeyPatch) -> None:
    auditor, state = Auditor(_shipped()), _state()
    before = auditor.full(state)
    cart = copy.deepcopy(dict(state.objects["Deployment/shop/cart"]))
    cart["metadata"]["resourceVersion"] = "2002"
    cart["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "ssd"}  # no node has it
    counting = _Counting(monkeypatch)
    after = auditor.changed(state.replaced([cart]), ["6f1c1e52-0002"])  # by uid
    assert counting.keys == ["Deployment/shop/cart"]
    assert [r for r in after if r.resource.name != "cart"] == [r for r in before if r.resource.name != "cart"]
    rollout = _one(after, "Deployment/shop/cart", SCHEDULING_POLICY, RULE_ROLLOUT)
    assert rollout.status is Status.WARN and "didn't match Pod's node affinity/selector" in rollout.message


def test_changed_takes_kind_namespace_name_keys_and_drops_removed_workloads() -> None:
    auditor, state = Auditor(_shipped()), _state()
    auditor.full(state)
    after = auditor.changed(state.replaced([], removed=["Deployment/shop/search"]), ["Deployment/shop/search"])
    assert not _of(after, "Deployment/shop/search")
    assert _of(after, "Deployment/shop/cart")


def test_results_come_sorted_by_namespace_workload_policy_and_rule(results: list[Result]) -> None:
    keys = [(r.resource.namespace or "", r.resource.kind, r.resource.name, r.policy, r.rule) for r in results]
    assert keys == sorted(keys)


def test_the_cluster_as_a_live_read_projects_it_audits_as_the_files_do(results: list[Result]) -> None:
    """``--kubeconfig`` and the server's audit read workloads and pods through the snapshot's
    projections: what they keep (owners with their group, annotations, resourceVersion) must
    give the verdicts the whole objects give."""
    from webhook.cluster.snapshot import SharedValues, project_pod, project_workload

    share = SharedValues()
    items = _objects()[0]["items"]
    projected = []
    for obj in items:
        kind = obj["kind"]
        if kind == "Pod":
            obj = {**project_pod(obj, share=share), "apiVersion": "v1", "kind": "Pod"}
        elif kind in ("Deployment", "ReplicaSet"):
            obj = {**project_workload(obj), "apiVersion": "apps/v1", "kind": kind}
        projected.append(obj)
    assert Auditor(_shipped()).full(_state(projected)) == results


def test_changed_sees_a_new_workload_named_by_its_uid() -> None:
    auditor, objects = Auditor(_shipped()), _objects()
    items = objects[0]["items"]
    new = copy.deepcopy(next(o for o in items if o["kind"] == "Deployment" and o["metadata"]["name"] == "cart"))
    new["metadata"].update(name="basket", uid="6f1c1e52-0099")
    auditor.full(_state(objects))
    after = auditor.changed(_state([*objects, new]), ["6f1c1e52-0099"])
    assert _one(after, "Deployment/shop/basket", "avoid-maintenance", "affinity").status is Status.FAIL
