"""``expect.placement``: a case's admitted object placed by explain's scheduler model on the
case's cluster state (inline nodes, pods, objects, and kubectl dumps in stateFiles)."""
from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.commands import test as test_command
from webhook.suites import run as suite_run

from .helpers import WEB, case, web_with_ssd, write_suite

HOSTNAME = "kubernetes.io/hostname"
ONE_PER_NODE = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}]}}


def node(name: str, disk: str = "ssd", cpu: str = "4") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {HOSTNAME: name, "disktype": disk}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


def running(name: str, on: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "prod", "labels": {"app": "web", "pod-template-hash": "old"}},
            "spec": {"nodeName": on, "affinity": ONE_PER_NODE,
                     "containers": [{"name": "web", "resources": {"requests": {"cpu": "500m"}}}]},
            "status": {"phase": "Running"}}


def web(replicas: int = 3, *, cpu: str = "1", affinity: dict[str, Any] | None = None, surge: int = 1,
        unavailable: int = 0) -> dict[str, Any]:
    obj = copy.deepcopy(WEB)
    obj["spec"]["replicas"] = replicas
    obj["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}
    pod = obj["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    if affinity is not None:
        pod["affinity"] = affinity
    return obj


# Two ssd nodes and one hdd node: the ssd policy's nodeSelector keeps replicas off node-c.
CLUSTER: dict[str, Any] = {"nodes": [node("node-a"), node("node-b"), node("node-c", disk="hdd")]}


def results(tmp_path: Path, *cases: dict[str, Any], cluster: dict[str, Any] | None = None) -> list[suite_run.CaseResult]:
    path = write_suite(tmp_path, list(cases), cluster=CLUSTER if cluster is None else cluster)
    return suite_run.run([path]).results


def rendered(result: suite_run.CaseResult) -> str:
    return "\n".join(f.render() for f in result.failures)


def run_command(*paths: Path, update: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = test_command.run_suites(paths=[str(p) for p in paths], junit=None, update=update, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_mutated_object_is_placed_only_on_the_nodes_its_policy_selects(tmp_path: Path) -> None:
    [result] = results(tmp_path, case("three on ssd", {"placement": {
        "schedules": True, "placed": 3, "pending": 0, "onlyNodes": ["node-a", "node-b"]}}, object=web(3)))
    assert result.passed, rendered(result)


def test_a_replica_on_a_node_outside_only_nodes_fails_naming_it(tmp_path: Path) -> None:
    # Unmutated (the ssd policy skips it), the workload may land on the hdd node too.
    unmatched = {**web(3, affinity=ONE_PER_NODE), "kind": "Deployment",
                 "metadata": {"name": "web", "namespace": "prod", "annotations": {"placement.novasphere.dev/skip": "true"}}}
    [result] = results(tmp_path, case("skipped", {"placement": {"onlyNodes": ["node-a", "node-b"]}}, object=unmatched))
    [failure] = result.failures
    assert failure.expectation == "placement.onlyNodes"
    assert failure.message.startswith("expected every placed replica on [node-a, node-b], but replica ")
    assert failure.message.endswith("-> node-c")


def test_a_failing_placement_says_what_was_expected_and_what_explain_found(tmp_path: Path) -> None:
    [result] = results(tmp_path, case("too big", {"placement": {"schedules": True, "placed": 3}}, object=web(3, cpu="3")))
    assert [f.expectation for f in result.failures] == ["placement.schedules", "placement.placed"]
    text = rendered(result)
    assert "placement.schedules: expected every replica to place, but explain found 2 placed, 1 Pending" in text
    assert "placement.placed: expected 3 placed, got 2 (of 3)" in text
    # explain's own report follows, once: where each replica went, why the last stays Pending, what would help.
    assert text.count("explain found:") == 1
    assert "\n  Deployment prod/web: 2 of 3 replica(s) place, 1 Pending" in text
    assert "replica 2 (web-2): Pending: 0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, " \
           "2 Insufficient cpu." in text
    assert "node-c: NodeAffinity: node(s) didn't match Pod's node affinity/selector (nodeSelector disktype=ssd" in text
    assert "- add 1 node like node-a" in text


def test_the_failure_report_reaches_the_command_output_under_the_case_line(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [case("too big", {"placement": {"pending": 0}}, object=web(3, cpu="3"))],
                       cluster=CLUSTER)
    code, out, err = run_command(path)
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("FAIL ") and lines[0].endswith(": ssd: too big")
    assert lines[1] == "    placement.pending: expected 0 Pending, got 1 (of 3)"
    assert lines[2] == "    explain found:"
    assert lines[-1] == "0 passed, 1 failed"


def test_a_workload_expected_not_to_schedule_passes_when_it_does_not(tmp_path: Path) -> None:
    [passing, failing] = results(
        tmp_path,
        case("too big", {"placement": {"schedules": False, "placed": 2, "pending": 1}}, object=web(3, cpu="3")),
        case("fits", {"placement": {"schedules": False}}, object=web(2)),
    )
    assert passing.passed, rendered(passing)
    [failure] = failing.failures
    assert failure.render().startswith("placement.schedules: expected it not to schedule, but all 2 replica(s) place")


@pytest.mark.parametrize(
    ("pattern", "passes"),
    [
        (r"^0/3 nodes are available: .*2 Insufficient cpu\.", True),
        (r"didn't match Pod's node affinity/selector", True),
        (r"Insufficient memory", False),
    ],
)
def test_the_message_regex_is_searched_in_the_pending_replicas_scheduler_message(
        tmp_path: Path, pattern: str, passes: bool) -> None:
    [result] = results(tmp_path, case("too big", {"placement": {"message": pattern}}, object=web(3, cpu="3")))
    assert result.passed is passes, rendered(result)
    if not passes:
        assert result.failures[0].message.startswith(
            "'Insufficient memory' does not match the scheduler's message: 0/3 nodes are available: ")


def test_a_message_expectation_fails_when_every_replica_places(tmp_path: Path) -> None:
    [result] = results(tmp_path, case("fits", {"placement": {"message": "Insufficient"}}, object=web(2)))
    assert result.failures[0].message == "expected a scheduler message matching 'Insufficient', but every replica places"


@pytest.mark.parametrize(
    ("nodes", "passes"),
    [
        (["node-a", "node-b"], True),
        (["node-b", "node-a"], True),  # order-free
        (["node-a", "node-a"], False),  # a multiset: each name as often as replicas land there
        (["node-a"], False),
        (["node-a", "node-b", "node-c"], False),
    ],
)
def test_nodes_are_compared_as_a_multiset(tmp_path: Path, nodes: list[str], passes: bool) -> None:
    [result] = results(tmp_path, case("spread", {"placement": {"nodes": nodes}}, object=web(2, affinity=ONE_PER_NODE)))
    assert result.passed is passes, rendered(result)


def test_a_nodes_mismatch_names_what_is_missing_and_what_is_extra(tmp_path: Path) -> None:
    [result] = results(tmp_path, case("spread", {"placement": {"nodes": ["node-a", "node-a", "node-c"]}},
                                      object=web(2, affinity=ONE_PER_NODE)))
    assert result.failures[0].render().splitlines()[0] == (
        "placement.nodes: expected replicas on [node-a, node-a, node-c], got [node-a, node-b] "
        "(missing node-a, node-c; unexpected node-b)")


def test_two_nodes_full_of_a_one_per_node_workload_make_a_surge_rollout_stuck(tmp_path: Path) -> None:
    """Issue 17: 2 replicas on 2 nodes with required hostname anti-affinity: maxSurge 1 and
    maxUnavailable 0 need a third node; maxSurge 0 and maxUnavailable 1 complete."""
    cluster = {"nodes": [node("node-a"), node("node-b")],
               "pods": [running("web-old-1", "node-a"), running("web-old-2", "node-b")],
               "objects": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod"},
                            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}}]}
    stuck = {"schedules": False, "placed": 0, "pending": 1, "message": "2 node\\(s\\) didn't match pod anti-affinity rules",
             "rollout": {"completes": False, "steps": 1, "minAvailable": 2}}
    completes = {"schedules": True, "nodes": ["node-a", "node-b"], "rollout": {"completes": True, "minAvailable": 1}}
    [surge, unavailable, claimed] = results(
        tmp_path,
        case("surge", {"placement": stuck}, object=web(2, cpu="500m", affinity=ONE_PER_NODE)),
        case("unavailable", {"placement": completes}, object=web(2, cpu="500m", affinity=ONE_PER_NODE, surge=0,
                                                                  unavailable=1)),
        case("claims it completes", {"placement": {"rollout": {"completes": True}}},
             object=web(2, cpu="500m", affinity=ONE_PER_NODE)),
        cluster=cluster,
    )
    assert surge.passed, rendered(surge)
    assert unavailable.passed, rendered(unavailable)
    [failure] = claimed.failures
    assert failure.expectation == "placement.rollout.completes"
    assert failure.message.startswith("expected the rollout to complete, but it is stuck after 1 step(s): 0/2 nodes "
                                      "are available: 2 node(s) didn't match pod anti-affinity rules.")
    assert "rollout: stuck after 1 step(s)" in failure.details
    assert "- set maxSurge: 0, maxUnavailable: 1" in failure.details


def test_a_rollout_expectation_without_an_existing_workload_says_so(tmp_path: Path) -> None:
    [result] = results(tmp_path, case("new", {"placement": {"rollout": {"completes": True}}}, object=web(2)))
    assert result.failures[0].message.startswith(
        "expected a rollout, but explain placed the Deployment's replicas as on creation")


def test_replicas_overrides_the_objects_count(tmp_path: Path) -> None:
    [result] = results(tmp_path, case("five", {"placement": {"replicas": 5, "placed": 2, "pending": 3}},
                                      object=web(2, affinity=ONE_PER_NODE)))
    assert result.passed, rendered(result)


def test_the_cluster_state_comes_from_state_files_with_lists_unpacked(tmp_path: Path) -> None:
    dump = {"apiVersion": "v1", "kind": "List", "items": [node("node-a"), node("node-b")]}
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "nodes.yaml").write_text(yaml.safe_dump(dump))
    (tmp_path / "state" / "pods.yaml").write_text(yaml.safe_dump_all([running("web-old-1", "node-a")]))
    [result] = results(tmp_path, case("spread", {"placement": {"nodes": ["node-b"], "pending": 1}},
                                      object=web(2, affinity=ONE_PER_NODE)),
                       cluster={"stateFiles": ["state/nodes.yaml", "state/pods.yaml"]})
    assert result.passed, rendered(result)


def test_state_file_objects_reach_admission_too(tmp_path: Path) -> None:
    (tmp_path / "ns.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}}))
    path = write_suite(tmp_path, [case("labelled namespace", {"applied": ["ssd"]})], cluster={"stateFiles": ["ns.yaml"]})
    policy = (tmp_path / "ssd.yaml").read_text().replace(
        "kinds: [Deployment]", "kinds: [Deployment]\n    namespaceSelector: {matchLabels: {env: prod}}")
    (tmp_path / "ssd.yaml").write_text(policy)
    [result] = suite_run.run([path]).results
    assert result.passed, rendered(result)


def test_the_cases_namespace_is_where_the_replicas_meet_running_pods(tmp_path: Path) -> None:
    noisy = copy.deepcopy(running("noisy", "node-a"))
    noisy["metadata"].update(namespace="staging", labels={"app": "noisy"})
    avoid_noisy = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "noisy"}}, "topologyKey": HOSTNAME}]}}
    unplaced = web(2, cpu="3", affinity=avoid_noisy)  # one replica per node, by cpu
    del unplaced["metadata"]["namespace"]
    [in_staging, by_default] = results(
        tmp_path,
        case("in staging", {"placement": {"nodes": ["node-b"], "pending": 1}}, object=unplaced, namespace="staging"),
        case("in default", {"placement": {"nodes": ["node-a", "node-b"]}}, object=unplaced),
        cluster={"nodes": [node("node-a"), node("node-b")], "pods": [noisy]},
    )
    assert in_staging.passed, rendered(in_staging)
    assert by_default.passed, rendered(by_default)


def test_a_case_that_admission_ignores_is_placed_as_it_is_when_it_is_a_workload(tmp_path: Path) -> None:
    [result] = results(tmp_path, case("delete", {"result": "ignored", "placement": {"nodes": ["node-c"]}},
                                      object=web(1, cpu="3"), operation="DELETE",
                                      cluster={"nodes": [node("node-c", disk="hdd")]}))
    assert result.passed, rendered(result)


def test_a_case_without_a_workload_fails_placement_with_the_reason(tmp_path: Path) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}
    [result] = results(tmp_path, case("service", {"placement": {"schedules": True}}, object=service))
    [failure] = result.failures
    assert failure.render() == "placement: admission answered 'ignored': Service/web is not a workload kind explain places"


def test_update_rewrites_the_expected_object_and_leaves_placement_alone(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [case("stale", {"object": WEB, "placement": {"pending": 1}}, object=web(1))],
                       cluster=CLUSTER)
    code, out, _ = run_command(path, update=True)
    assert code == 1 and out.startswith("FAIL ")  # placement still fails: it is never rewritten
    assert "placement.pending: expected 1 Pending, got 0 (of 1)" in out
    expect = yaml.safe_load(path.read_text())["cases"][0]["expect"]
    assert expect["placement"] == {"pending": 1}
    assert expect["object"]["spec"]["template"]["spec"]["nodeSelector"] == web_with_ssd()["spec"]["template"]["spec"][
        "nodeSelector"]


# ---- broken suites: file, line, field ------------------------------------------------------

SUITE = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementTest
metadata: {name: broken}
policies: [ssd.yaml]
cluster:
  stateFiles: [state.yaml]
cases:
- name: spread
  object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}}
  expect:
    placement:
      schedules: true
"""

GOOD_STATE = "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n"


@pytest.mark.parametrize(
    ("suite", "state", "expected"),
    [
        (SUITE, "apiVersion: v1\nkind: Node\nmetadata: {name: [node-a}\n",
         "broken.suite.yaml:6: cluster.stateFiles[0]: {dir}/state.yaml:3: invalid YAML"),
        (SUITE.replace("[state.yaml]", "[missing.yaml]"), GOOD_STATE,
         "broken.suite.yaml:6: cluster.stateFiles[0]: cannot read {dir}/missing.yaml"),
        (SUITE, GOOD_STATE + "---\n- just a list\n",
         "broken.suite.yaml:6: cluster.stateFiles[0]: {dir}/state.yaml:5: not a Kubernetes object (no kind)"),
        (SUITE, "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n- {name: b}\n",
         "broken.suite.yaml:6: cluster.stateFiles[0]: {dir}/state.yaml:5: not a Kubernetes object (no kind)"),
        (SUITE.replace("schedules: true", "schedule: true"), GOOD_STATE,
         'broken.suite.yaml:12: cases[0].expect.placement.schedule: unknown field "schedule"; did you mean "schedules"?'),
        (SUITE.replace("schedules: true", "rollout: {completes: false, minAvailble: 1}"), GOOD_STATE,
         ('broken.suite.yaml:12: cases[0].expect.placement.rollout.minAvailble: unknown field "minAvailble"; '
          'did you mean "minAvailable"?')),
        (SUITE.replace("schedules: true", "nodes: [node-a, null]"), GOOD_STATE,
         "broken.suite.yaml:12: cases[0].expect.placement.nodes[1]: null is not a node name"),
        (SUITE.replace("schedules: true", "message: '(unclosed'"), GOOD_STATE,
         "broken.suite.yaml:12: cases[0].expect.placement.message: invalid regular expression"),
        (SUITE.replace("schedules: true", "update: false"), GOOD_STATE,
         "broken.suite.yaml:11: cases[0].expect.placement: give at least one of schedules, placed, pending"),
        (SUITE.replace("cluster:\n  stateFiles: [state.yaml]\n", ""), GOOD_STATE,
         "broken.suite.yaml:9: cases[0].expect.placement: needs a cluster state"),
        (SUITE.replace("  stateFiles: [state.yaml]\n",
                       "  pods:\n  - metadata: {name: p}\n    spec: {nodeName: node-a, containers: [{name: c, "
                       "resources: {requests: {cpu: lots}}}]}\n  stateFiles: [state.yaml]\n"), GOOD_STATE,
         "broken.suite.yaml:7: cluster.pods[0]: the cluster state cannot be read: 'lots' is not a valid quantity"),
        (SUITE.replace("  stateFiles: [state.yaml]\n", "  pods: [{kind: Node, metadata: {name: p}}]\n"), GOOD_STATE,
         "broken.suite.yaml:6: cluster.pods[0]: must be a Pod, not kind 'Node'"),
    ],
)
def test_a_broken_placement_suite_exits_2_naming_file_line_and_field(
        tmp_path: Path, suite: str, state: str, expected: str) -> None:
    write_suite(tmp_path, [case("x", {"applied": ["ssd"]})])  # writes ssd.yaml
    (tmp_path / "state.yaml").write_text(state)
    (tmp_path / "broken.suite.yaml").write_text(suite)
    code, out, err = run_command(tmp_path / "broken.suite.yaml")
    assert code == 2, out
    wanted = str(tmp_path / expected.replace("{dir}", str(tmp_path)))
    assert any(line.startswith(wanted) for line in err.splitlines()), err


def test_a_broken_object_in_a_state_file_is_blamed_with_its_own_file_and_line(tmp_path: Path) -> None:
    write_suite(tmp_path, [case("x", {"applied": ["ssd"]})])
    bad = node("node-b")
    bad["status"]["allocatable"]["cpu"] = "plenty"
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all([node("node-a"), bad], sort_keys=False))
    (tmp_path / "broken.suite.yaml").write_text(SUITE)
    code, _, err = run_command(tmp_path / "broken.suite.yaml")
    assert code == 2
    line = next(i for i, text in enumerate((tmp_path / "state.yaml").read_text().splitlines(), 1) if text == "---") + 1
    assert f"broken.suite.yaml:6: cluster.stateFiles[0]: {tmp_path}/state.yaml:{line}: the cluster state cannot be " \
           "read: 'plenty' is not a valid quantity" in err, err


# ---- the shipped example -------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "placement-test" / "spread-web.suite.yaml"


def test_the_shipped_placement_example_passes() -> None:
    code, out, err = run_command(EXAMPLE)
    assert code == 0, out + err
    assert out.splitlines()[-1] == "2 passed, 0 failed"


def test_the_docs_show_the_shipped_placement_example_as_it_is() -> None:
    docs = (ROOT / "docs" / "testing-policies.md").read_text()
    section = docs[docs.index("## Expecting a placement"):]
    shown = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert shown == EXAMPLE.read_text()
