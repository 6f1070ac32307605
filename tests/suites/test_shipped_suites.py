"""Every shipped policy has a suite, and every shipped suite passes .

CI fails here when a policy or the engine changes what admission does to real workloads;
the failure message is the same case output ``placement-webhook test`` prints.
"""
from __future__ import annotations

import functools
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.commands import test as test_command
from webhook.kube.kinds import BUILTIN, Target
from webhook.kube.pointers import get_path
from webhook.policy import loader
from webhook.suites import load

POLICIES = Path(__file__).resolve().parents[2] / "policies"
SUITE_FILES = sorted(POLICIES.glob("*.suite.yaml"))


@functools.cache
def _all_cases() -> tuple[tuple[load.LoadedSuite, load.LoadedCase], ...]:
    return tuple((s, c) for file in SUITE_FILES for s in load.load_suites(file) for c in s.cases)


def loaded_cases() -> Iterator[tuple[load.LoadedSuite, load.LoadedCase]]:
    return iter(_all_cases())


def applied_to(name: str) -> list[load.LoadedCase]:
    return [c for _, c in loaded_cases() if name in (c.expect.applied or [])]


def target_of(case: load.LoadedCase) -> Target | None:
    return BUILTIN.for_object(case.object)


SHIPPED = loader.load([POLICIES])


def test_there_are_suites_for_the_shipped_policies() -> None:
    assert len(SUITE_FILES) >= 1 and len(SHIPPED) >= 1


@pytest.mark.parametrize("file", SUITE_FILES, ids=lambda p: p.name)
def test_a_shipped_suite_passes(file: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = test_command.run_suites(paths=[str(file)], junit=None, update=False, out=out, err=err)
    assert code == 0, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("policy", SHIPPED.policies, ids=lambda p: p.name)
def test_every_kind_a_policy_targets_has_a_case_where_it_applies(policy: loader.Policy) -> None:
    covered = {target_of(c) for c in applied_to(policy.name)}
    missing = sorted(t.describe() for t in (policy.targets or ()) if t not in covered)
    assert not missing, f"{policy.name}: no case shows it applied to {missing}"


@pytest.mark.parametrize("policy", SHIPPED.policies, ids=lambda p: p.name)
def test_every_policy_is_shown_to_keep_existing_user_affinity(policy: loader.Policy) -> None:
    def has_own_affinity(case: load.LoadedCase) -> bool:
        target = target_of(case)
        pod_spec = get_path(case.object, target.pod_spec) if target and target.pod_spec else None
        native = get_path(case.object, ("spec", "scheduling"))
        return bool((pod_spec or {}).get("affinity") or native)

    assert any(has_own_affinity(c) for c in applied_to(policy.name)), policy.name


@pytest.mark.parametrize("policy", SHIPPED.policies, ids=lambda p: p.name)
def test_every_policy_suite_has_a_skip_annotation_case(policy: loader.Policy) -> None:
    suites_with_policy = [s for s, _ in loaded_cases() if policy.name in s.policies.names]
    assert any(c.expect.result == "skipped" for s in suites_with_policy for c in s.cases), policy.name


@pytest.mark.parametrize(
    "policy",
    [p for p in SHIPPED.policies if p.targets is None or any(t.kind == "Deployment" for t in p.targets)],
    ids=lambda p: p.name,
)
def test_every_policy_for_deployments_is_shown_to_leave_recreate_alone(policy: loader.Policy) -> None:
    recreate = [
        c for s, c in loaded_cases()
        if policy.name in s.policies.names and get_path(c.object, ("spec", "strategy", "type")) == "Recreate"
    ]
    assert recreate, f"{policy.name}: no case with a Recreate Deployment"
