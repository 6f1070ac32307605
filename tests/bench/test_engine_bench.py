"""The engine bench's heavy set measures what it claims, and the bench runs end to end."""
from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch

from bench import engine_bench
from tests.bench.conftest import RunBench
from webhook.engine import admission, placement, review


def test_the_heavy_review_is_an_8_6_kib_deployment_that_all_five_policies_write() -> None:
    body = json.dumps(engine_bench.admission_review(engine_bench.heavy_deployment()))
    assert round(len(body) / 1024, 1) == 8.6
    policies = engine_bench.heavy_policy_set()
    request = review.parse(body)
    original = copy.deepcopy(request.object)
    out = admission.admit(request, policies=policies)
    assert out.result == "patched" and out.applied == sorted(policies.names) and len(policies) == 5
    assert jsonpatch.apply_patch(original, out.patch) == out.object
    assert request.object == original


def test_the_heavy_set_settles_and_a_second_admission_changes_nothing() -> None:
    policies = engine_bench.heavy_policy_set()
    calls: list[str] = []

    def counting(obj: dict[str, Any], **kw: Any) -> placement.Applied:
        calls.append(kw["policy"].name)
        return placement.apply_policy(obj, **kw)

    out = admission.admit(review.request_for_object(engine_bench.heavy_deployment()), policies=policies,
                          steps=admission.Steps(apply=counting))
    # The safe rollout reads what the spread wrote, but it comes last: it saw every change
    # the others made, so the settling pass would change nothing and is not run.
    assert len(calls) == len(policies)
    settled = admission.admit(review.request_for_object(engine_bench.heavy_deployment()), policies=policies,
                              steps=admission.Steps(settle_early=False))
    assert (out.object, out.patch) == (settled.object, settled.patch)
    again = admission.admit(review.request_for_object(out.object or {}), policies=policies)
    assert again.patch == []


def test_the_bench_runs_end_to_end_and_reports_the_heavy_set(run_bench: RunBench) -> None:
    out = run_bench("engine_bench.py", "--seconds", "0.05", "--sets", "heavy")
    assert "heavy set: 5 policies, 8.6 KiB review, 5 applied" in out
    assert " us each) target < 120 us " in out
    assert "whole review in process (decode, admit, encode):" in out
    assert "policies:" not in out  # only the sets asked for
