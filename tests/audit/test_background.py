"""The background audit: a pass reads the cluster, audits in a worker thread (never on the event
loop), writes the reports and hands its figures to the metrics; a cluster it cannot read or an
audit that raises is logged and counted and the next pass still comes; passes run at once, on
each policy change (``wake``) and every interval."""
from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from tests.kit.report_api import ReportApi
from tests.kit.workloads import deployment
from webhook.audit import background
from webhook.audit.background import BackgroundAudit, SnapshotAudit
from webhook.audit.model import RULE_ROLLOUT, SCHEDULING_POLICY, Resource, Result, Status
from webhook.audit.writer import ReportWriter
from webhook.cluster.config import ClusterConfig
from webhook.cluster.discovery import Unlisted
from webhook.cluster.snapshot import Snapshot
from webhook.kube.kinds import BUILTIN
from webhook.policy.policyset import PolicySet

WHERE = ClusterConfig(host="https://api.test")
SNAPSHOT = Snapshot(objects=[], server_version=(1, 20), match_label_keys=False)


def workload(name: str, namespace: str | None = "shop") -> Resource:
    return Resource("apps/v1", "Deployment", name, namespace)


FOUND = [
    Result(workload("web"), "spread-web", "affinity", Status.FAIL, "would add podAntiAffinity"),
    Result(workload("web"), "spread-web", "tolerations", Status.FAIL, "would add tolerations"),
    Result(workload("api"), "spread-web", "affinity", Status.PASS, ""),
    Result(workload("db", "bank"), "spread-web", "affinity", Status.FAIL, "would add podAntiAffinity"),
    Result(workload("web"), SCHEDULING_POLICY, RULE_ROLLOUT, Status.FAIL, "the next rollout would stall"),
    Result(workload("db", "bank"), SCHEDULING_POLICY, RULE_ROLLOUT, Status.WARN, "one node left"),
]


class Sink:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.passed = asyncio.Event()

    def observe_audit(self, *, result: str, seconds: float, out_of_policy: Mapping[tuple[str, str], int],
                      rollout_risks: Mapping[str, int]) -> None:
        self.seen.append({"result": result, "out_of_policy": dict(out_of_policy), "rollout_risks": dict(rollout_risks)})
        self.passed.set()


class Audits:
    """The audit function: records the thread it ran on; ``fail`` makes it raise."""

    def __init__(self, results: list[Result]) -> None:
        self.results = results
        self.threads: list[int] = []
        self.fail = False

    def __call__(self, snapshot: Snapshot, policies: PolicySet) -> list[Result]:
        self.threads.append(threading.get_ident())
        if self.fail:
            raise RuntimeError("the audit broke")
        return list(self.results)


def make(api: ReportApi, audits: Audits, sink: Sink, *, read: Any = None) -> BackgroundAudit:
    async def snapshot(_: ClusterConfig) -> Snapshot | str:
        return SNAPSHOT

    return BackgroundAudit(ReportWriter(api), where=WHERE, policies=lambda: PolicySet(),  # type: ignore[arg-type]
                           audit=audits, sink=sink, read=read or snapshot)


async def test_a_pass_audits_in_a_worker_thread_and_writes_one_report_per_namespace() -> None:
    api, audits, sink = ReportApi(), Audits(FOUND), Sink()
    outcome = await make(api, audits, sink).once()
    assert outcome.result == "success"
    assert audits.threads and threading.get_ident() not in audits.threads
    assert sorted(api.stored) == ["/apis/wgpolicyk8s.io/v1alpha2/namespaces/bank/policyreports/placement-webhook",
                                  "/apis/wgpolicyk8s.io/v1alpha2/namespaces/shop/policyreports/placement-webhook"]


async def test_the_figures_count_workloads_not_results() -> None:
    sink = Sink()
    await make(ReportApi(), Audits(FOUND), sink).once()
    (seen,) = sink.seen
    assert seen["out_of_policy"] == {("spread-web", "shop"): 1, ("spread-web", "bank"): 1,
                                     (SCHEDULING_POLICY, "shop"): 1}
    assert seen["rollout_risks"] == {"shop": 1, "bank": 1}


async def test_a_cluster_that_cannot_be_read_is_logged_once_and_leaves_the_reports_alone(
        caplog: pytest.LogCaptureFixture) -> None:
    api, sink = ReportApi(), Sink()

    async def unreadable(_: ClusterConfig) -> Snapshot | str:
        return "could not read the cluster at https://api.test within 120 s (pods: 403 Forbidden)"

    audit = make(api, Audits(FOUND), sink, read=unreadable)
    with caplog.at_level(logging.DEBUG, logger="webhook.audit.background"):
        outcomes = [await audit.once(), await audit.once()]
    assert [o.result for o in outcomes] == ["unread", "unread"]
    assert api.calls == []
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.DEBUG]
    assert [s["result"] for s in sink.seen] == ["unread", "unread"]


async def test_a_kind_the_api_server_refused_to_list_is_logged_once_naming_the_permission_and_the_pass_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    refused = Unlisted("batch", "CronJob", 'cannot list cronjobs.batch (batch/v1; it needs list on cronjobs in the '
                       'API group "batch"): the API server at https://api.test answered 403 Forbidden', refused=True)
    unserved = Unlisted("kubevirt.io", "VirtualMachine", "not served by the API server")
    read = Snapshot(objects=[], server_version=(1, 20), match_label_keys=False, unlisted=(refused, unserved))

    async def partly(_: ClusterConfig) -> Snapshot | str:
        return read

    audit = make(ReportApi(), Audits(FOUND), Sink(), read=partly)
    with caplog.at_level(logging.INFO, logger="webhook.audit.background"):
        outcomes = [await audit.once(), await audit.once()]
    assert [o.result for o in outcomes] == ["success", "success"]
    said = [(r.levelno, r.getMessage()) for r in caplog.records if " not " in r.getMessage()]
    assert said == [(logging.WARNING, f"audit: batch/CronJob not audited: {refused.reason}"),
                    (logging.INFO, "audit: not served by the API server, so none to audit: kubevirt.io/VirtualMachine")]


async def test_an_audit_that_raises_is_logged_and_the_next_pass_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    api, audits, sink = ReportApi(), Audits(FOUND), Sink()
    audit = make(api, audits, sink)
    audits.fail = True
    with caplog.at_level(logging.ERROR, logger="webhook.audit.background"):
        assert (await audit.once()).result == "failed"
    assert "the audit failed" in caplog.text
    assert api.calls == []
    audits.fail = False
    assert (await audit.once()).result == "success"


async def test_no_pass_runs_before_a_policy_set_is_loaded() -> None:
    api, sink = ReportApi(), Sink()
    audit = BackgroundAudit(ReportWriter(api), where=WHERE, policies=lambda: None,  # type: ignore[arg-type]
                            audit=Audits(FOUND), sink=sink)
    assert (await audit.once()).result == "no_policies"
    assert api.calls == []


async def test_passes_run_at_once_and_again_on_each_policy_change_until_stopped() -> None:
    api, audits, sink = ReportApi(), Audits(FOUND), Sink()
    audit = make(api, audits, sink)
    stop = asyncio.Event()
    task = asyncio.create_task(audit.run(stop, interval=3600))
    await asyncio.wait_for(sink.passed.wait(), 10)
    sink.passed.clear()
    audit.wake.set()
    await asyncio.wait_for(sink.passed.wait(), 10)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert len(sink.seen) == 2


async def test_passes_run_every_interval() -> None:
    audits, sink = Audits(FOUND), Sink()
    audit = make(ReportApi(), audits, sink)
    stop = asyncio.Event()
    task = asyncio.create_task(audit.run(stop, interval=0.01))
    while len(sink.seen) < 3:
        await asyncio.wait_for(sink.passed.wait(), 10)
        sink.passed.clear()
    stop.set()
    await asyncio.wait_for(task, 10)
    assert all(s["result"] == "success" for s in sink.seen)


def test_a_pass_without_results_has_empty_figures() -> None:
    assert background.out_of_policy([]) == {}
    assert background.rollout_risks([]) == {}


def _unplaceable() -> Snapshot:
    web = deployment("web", namespace="shop")
    web.update(apiVersion="apps/v1", kind="Deployment")
    web["metadata"].update(uid="uid-web", resourceVersion="7")
    # One node it cannot use: with none at all the scheduler answers "no nodes available"
    # before any plugin (or preemption) speaks.
    tainted = {"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
               "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]},
               "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    return Snapshot(objects=[web, tainted], server_version=(1, 20), match_label_keys=False)


def test_scheduling_messages_are_worded_as_the_clusters_release_words_them() -> None:
    audit = SnapshotAudit(BUILTIN)
    old = _unplaceable()
    new = Snapshot(objects=old.objects, server_version=(1, 31), match_label_keys=False)
    worded = {version: [r.message for r in audit(snapshot, PolicySet()) if r.policy == SCHEDULING_POLICY]
              for version, snapshot in (("1.20", old), ("1.31", new))}
    assert worded["1.20"] and not any("preemption:" in m for m in worded["1.20"])
    assert all("preemption:" in m for m in worded["1.31"])


async def test_the_pass_frees_the_snapshot_it_read_in_the_worker_thread() -> None:
    read = _unplaceable()

    async def fresh(_: ClusterConfig) -> Snapshot | str:
        return read

    freed: list[int] = []

    class Watched(list):  # type: ignore[type-arg]
        def __delitem__(self, index: Any) -> None:
            freed.append(threading.get_ident())
            super().__delitem__(index)

    read = Snapshot(objects=Watched(read.objects), server_version=read.server_version, match_label_keys=False)
    await make(ReportApi(), Audits(FOUND), Sink(), read=fresh).once()
    assert read.objects == [] and freed and threading.get_ident() not in freed
