"""The training run of the profile-guided build: it drives the review path it claims to."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import webhook
from webhook.engine import admission
from webhook.engine import review

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "_build_backend"))

import pgo_training


def test_the_training_reviews_cover_every_operation_version_and_outcome_the_server_sees() -> None:
    policies = pgo_training.policy_set(10)
    seen = set()
    for obj in pgo_training.objects(3):
        for operation in ("CREATE", "UPDATE"):
            for version in review.API_VERSIONS:
                body = pgo_training.review_body(obj, operation=operation, api_version=version, uid=1)
                request = review.parse(body)
                assert (request.kind, request.operation, request.api_version) == (obj["kind"], operation, version)
                seen.add(admission.admit(request, policies=policies).result)
    assert {"patched", "ignored"} <= seen


def test_a_larger_set_gives_every_policy_feature_a_turn() -> None:
    policies = pgo_training.policy_set(len(pgo_training.POLICIES) * 2)
    assert len(policies) == len(pgo_training.POLICIES) * 2
    assert {p.enforcement for p in policies} == {"patch", "audit"}
    assert {p.on_conflict for p in policies} == {"merge", "keep"}


def test_training_runs_on_the_compiled_build_and_refuses_the_source(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(pgo_training, "ROUNDS", 1)
    if webhook.compiled_build():
        assert pgo_training.main() == 0
    else:  # profiling the interpreter would teach the compiler nothing
        assert pgo_training.main() == 1
        assert "compiled build is not importable" in capsys.readouterr().err
