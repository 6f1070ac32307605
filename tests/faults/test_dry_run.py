"""The real API server as the validator (issue 29, fault 5).

A few hundred generated workloads (Deployments, StatefulSets, Jobs, DaemonSets, Pods; hypothesis,
derandomized so every run sends the same ones) are first created as they are with
``?dryRun=All``: what the API server refuses unmutated says nothing about the webhook, so it is
counted and set aside (most must be accepted, or the strategies are wrong). Each accepted one is
then mutated by ``admission.admit`` with the shipped policies (policies/) and with the heavy set
(bench/heavy-policies.yaml), and the mutated object created with ``?dryRun=All`` too: none may be
refused. A refusal fails the test with the object, the patch and the API server's message.

The namespaces are ones the policies select by name (``team-*``, ``analytics-*``) and one they do
not; none carries the label that sends it to the tier's webhook, so the API server validates
exactly what ``admit`` produced.
"""
from __future__ import annotations

import copy
import json
import ssl
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import POLICIES, ROOT
from tests.kit import valid_workloads
from tests.kit.envtest import Cluster, ControlPlane
from tests.kit.faults import figure
from webhook.engine import admission, review
from webhook.policy import loader
from webhook.policy.policyset import PolicySet

EXAMPLES = 300
NAMESPACES = ("team-dryrun", "analytics-dryrun", "plain-dryrun")
ACCEPTED_AT_LEAST = 0.9  # of the generated workloads, unmutated
HEAVY = ROOT / "bench" / "heavy-policies.yaml"


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


# What the API server sets after mutating admission, in rest.BeforeCreate, so a webhook never sees
# it on a CREATE: uid, creationTimestamp and generation; the status; and what the kind's
# PrepareForCreate adds, for a Job without manualSelector its selector and the two pod labels it
# matches (pkg/registry/batch/job/strategy.go, generateSelector).
SERVER_SET = ("uid", "creationTimestamp", "generation", "resourceVersion", "selfLink")
JOB_SELECTOR_LABELS = ("controller-uid", "job-name")


def as_the_webhook_sees_it(stored: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
    """The object a dry-run create answered, as the API server sends it to a mutating webhook:
    decoded and defaulted (strategy, dnsPolicy, terminationMessagePath and the like), managed
    fields recorded, but without what is only set after admission."""
    obj = copy.deepcopy({k: v for k, v in stored.items() if k != "status"})
    obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in SERVER_SET}
    if obj["kind"] == "Job" and "selector" not in written["spec"]:
        del obj["spec"]["selector"]
        labels = obj["spec"]["template"]["metadata"]["labels"]
        for key in JOB_SELECTOR_LABELS:
            labels.pop(key, None)
    return obj


def dry_run(control_plane: ControlPlane, namespace: str, obj: dict[str, Any]) -> Refusal | dict[str, Any]:
    """POST ``obj`` with ``?dryRun=All``: the object it would store, or the refusal."""
    prefix, plural = valid_workloads.PATHS[obj["kind"]]
    request = urllib.request.Request(
        f"{control_plane.url}{prefix}/namespaces/{namespace}/{plural}?dryRun=All", data=json.dumps(obj).encode(),
        method="POST", headers={"Authorization": f"Bearer {control_plane.token}", "Content-Type": "application/json",
                                "Accept": "application/json"})
    context = ssl.create_default_context(cafile=str(control_plane.ca_file))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            stored: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        try:
            message = str(json.loads(body).get("message", body))
        except ValueError:
            message = body
        return Refusal(int(exc.code), message)
    return stored


@pytest.fixture(scope="module")
def namespaces(cluster: Cluster) -> Iterator[tuple[str, ...]]:
    for name in NAMESPACES:
        cluster.core.create_namespace({"metadata": {"name": name}})
    yield NAMESPACES
    for name in NAMESPACES:
        cluster.core.delete_namespace(name)


@pytest.fixture(scope="module")
def policy_sets() -> dict[str, PolicySet]:
    return {"shipped": loader.load([POLICIES]), "heavy": loader.load([HEAVY])}


def test_no_mutated_workload_is_refused_whose_original_the_api_server_accepts(
        control_plane: ControlPlane, namespaces: tuple[str, ...],
        policy_sets: dict[str, PolicySet]) -> None:
    counts: Counter[str] = Counter()
    refused_originals: list[str] = []
    failures: list[str] = []

    @settings(derandomize=True, max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(obj=valid_workloads.workload(), namespace=st.sampled_from(namespaces))
    def check(obj: dict[str, Any], namespace: str) -> None:
        counts["generated"] += 1
        stored = dry_run(control_plane, namespace, obj)
        if isinstance(stored, Refusal):
            counts["refused unmutated"] += 1
            refused_originals.append(f"{obj['kind']}: {stored.message[:200]}")
            return
        counts["accepted unmutated"] += 1
        # As written (what `placement-webhook mutate` sees) and as the API server sends it.
        for form, original in (("as written", obj), ("defaulted", as_the_webhook_sees_it(stored, obj))):
            for name, policies in policy_sets.items():
                outcome = admission.admit(review.request_for_object(original, namespace=namespace), policies=policies)
                assert outcome.result != "error", (outcome.error, original)
                if not outcome.patch:
                    continue
                counts[f"{form}, mutated by the {name} set"] += 1
                answer = dry_run(control_plane, namespace, outcome.object or {})
                if isinstance(answer, Refusal):
                    counts[f"{form}, refused after the {name} set"] += 1
                    failures.append(f"{obj['kind']} {form} in {namespace}, {name} policies "
                                    f"({', '.join(outcome.applied)}): {answer.status} {answer.message}\n"
                                    f"  original: {json.dumps(original)}\n  patch: {json.dumps(outcome.patch)}")

    check()
    figure(f"[faults] dry-run validation on the real API server: {dict(sorted(counts.items()))}; "
          f"dry-run refusals of mutated objects: {len(failures)}")
    if refused_originals:
        figure(f"[faults]   refused unmutated (set aside), first: {refused_originals[0]}")
    assert counts["accepted unmutated"] >= ACCEPTED_AT_LEAST * counts["generated"], refused_originals[:5]
    assert all(counts[f"{form}, mutated by the {name} set"] for form in ("as written", "defaulted")
               for name in policy_sets)
    assert not failures, "\n".join(failures[:5])
