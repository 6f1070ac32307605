"""The validating webhook of PlacementPolicies (``POST /validate-policy``): lint at kubectl apply.
A policy with errors, one whose name a policy file holds, or one that conflicts with a policy in
force is refused with lint's messages at their field paths; anything else is allowed, and the
webhook fails open for everything but a PlacementPolicy CREATE or UPDATE."""
from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.kit.policies import GOLD_FILE
from tests.kit.policies import GOLD_SPEC as GOLD
from tests.kit.policy_objects import policy_object
from tests.kit.reviews import admission_review
from tests.kit.server import Pki
from tests.kit.workloads import deployment
from webhook.engine import review
from webhook.policy import loader, sources
from webhook.server import app, validation
from webhook.server.config import ServerConfig

Client = TestClient  # type: ignore[type-arg]

SILVER = {"match": {"kinds": ["Deployment"]}, "scheduling": {"priorityClassName": "silver"}}
TYPO_MESSAGE = "unknown kind 'Deploymnet'; did you mean \"Deployment\"?"


def _request(obj: dict[str, Any] | None, **kwargs: Any) -> review.Request:
    return review.parse(admission_review(obj, **kwargs))


def _in_force(*objects: dict[str, Any], files: loader.Loaded | None = None) -> sources.Assembled:
    return sources.assemble(files, list(objects))


def _check(obj: dict[str, Any], in_force: sources.Assembled | None, **kwargs: Any) -> validation.Verdict:
    return validation.check(_request(obj, **kwargs), in_force)


@pytest.fixture
def gold_file(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "gold.yaml").write_text(GOLD_FILE)
    return folder


# --- the verdicts -------------------------------------------------------------------------------


def test_a_valid_policy_that_conflicts_with_nothing_is_allowed() -> None:
    verdict = _check(policy_object("ssd"), _in_force(policy_object("gold", GOLD)))
    assert verdict.allowed and verdict.errors == () and verdict.warnings == ()


def test_a_policy_the_loader_refuses_is_refused_with_its_field_paths_and_did_you_mean() -> None:
    spec = {"match": {"kinds": ["Deploymnet"]}, "placement": {"nodeSelector": {"disk": "ssd"}}, "order": 1}
    verdict = _check(policy_object("typo", spec), _in_force())
    assert not verdict.allowed
    (error,) = verdict.errors
    assert str(error) == f"cluster:PlacementPolicy/typo: spec.match.kinds[0]: {TYPO_MESSAGE}"


def test_a_policy_that_conflicts_with_one_in_force_is_refused_with_lints_conflict() -> None:
    verdict = _check(policy_object("silver", SILVER), _in_force(policy_object("gold", GOLD)))
    assert not verdict.allowed
    (error,) = verdict.errors
    assert error.field == "spec.scheduling.priorityClassName"
    assert error.message.startswith("conflicts with policy 'gold' (cluster:PlacementPolicy/gold), which sets 'gold'")


def test_required_node_affinities_that_together_match_no_node_are_a_conflict() -> None:
    def zone(value: str) -> dict[str, Any]:
        term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [value]}]}
        return {"match": {"kinds": ["Deployment"]}, "placement": {"nodeAffinity": {"required": [term]}}}

    verdict = _check(policy_object("zone-b", zone("b")), _in_force(policy_object("zone-a", zone("a"))))
    assert not verdict.allowed
    (error,) = verdict.errors
    assert error.message.startswith("together with policy 'zone-a' (cluster:PlacementPolicy/zone-a)")
    assert "can match no node: zone In [a] and zone In [b]" in error.message


def test_the_policy_being_updated_is_checked_against_the_others_not_against_itself() -> None:
    old = policy_object("gold", GOLD)
    new = policy_object("gold", SILVER)
    assert _check(new, _in_force(old), operation="UPDATE", old=old).allowed


def test_a_name_a_policy_file_defines_is_refused(gold_file: Path) -> None:
    files = loader.load_with_sources([gold_file])
    verdict = _check(policy_object("gold", GOLD), _in_force(files=files))
    assert not verdict.allowed and verdict.duplicate
    assert verdict.errors[0].message.startswith(f"policy name 'gold' is already defined at {gold_file / 'gold.yaml'}:4")


def test_an_update_that_leaves_the_spec_is_allowed_whatever_the_spec_says() -> None:
    broken = policy_object("typo", {"match": {"kinds": ["Deploymnet"]}})
    labelled = copy.deepcopy(broken)
    labelled["metadata"]["labels"] = {"team": "a"}
    assert _check(labelled, _in_force(), operation="UPDATE", old=broken).allowed


def test_parts_that_can_never_apply_are_warnings_not_refusals() -> None:
    spec = {"match": {"kinds": ["Job"]}, "rollout": {"mode": "safe"}, "placement": {"nodeSelector": {"a": "b"}}}
    verdict = _check(policy_object("jobs", spec), _in_force())
    assert verdict.allowed
    assert verdict.warnings == ("spec.rollout: rollout applies to Deployments only; this policy selects Job",)


def test_before_any_set_is_in_force_a_policy_is_checked_on_its_own() -> None:
    assert _check(policy_object("silver", SILVER), None).allowed
    assert not _check(policy_object("typo", {"match": {"kinds": ["Deploymnet"]}}), None).allowed


@pytest.mark.parametrize(
    ("obj", "kwargs", "why"),
    [
        (deployment("web"), {}, "not a PlacementPolicy"),
        (policy_object("typo", {"order": "x"}), {"sub_resource": "status", "operation": "UPDATE"},
         "the status subresource"),
        (None, {"operation": "DELETE", "old": policy_object("typo", {"order": "x"})}, "a DELETE"),
    ],
    ids=["another-kind", "status-subresource", "delete"],
)
def test_anything_but_a_placementpolicy_create_or_update_is_allowed_unchecked(
        obj: dict[str, Any] | None, kwargs: dict[str, Any], why: str) -> None:
    verdict = _check(obj, _in_force(), **kwargs)  # type: ignore[arg-type]
    assert verdict.allowed and verdict.skipped == why


# --- the answers ----------------------------------------------------------------------------------


async def _served(aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, policies: Path) -> Client:
    state = app.State(ServerConfig(policies=(policies,), tls_cert=pki.cert, tls_key=pki.key, reload_interval=3600))
    return await aiohttp_client(app.make_app(state))


async def _validate(client: Client, body: Any) -> dict[str, Any]:
    resp = await client.post(app.VALIDATE_POLICY, json=body)
    assert resp.status == 200
    answer: dict[str, Any] = await resp.json()
    return answer


async def test_a_refusal_is_a_422_invalid_whose_causes_are_lints_errors_at_their_fields(
        aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, gold_file: Path) -> None:
    client = await _served(aiohttp_client, pki, gold_file)
    spec = {"match": {"kinds": ["Deploymnet"]}, "scheduling": {"priorityClassName": "silver"}}
    body = admission_review(policy_object("silver", spec), uid="u-1")
    response = (await _validate(client, body))["response"]
    assert response["uid"] == "u-1" and response["allowed"] is False
    assert response["status"] == {
        "status": "Failure", "code": 422, "reason": "Invalid",
        "message": f"PlacementPolicy 'silver' has 1 lint error:\ncluster:PlacementPolicy/silver: spec.match.kinds[0]: "
                   f"{TYPO_MESSAGE}",
        "details": {"group": "placement.novasphere.dev", "kind": "placementpolicies", "name": "silver",
                    "causes": [{"reason": "FieldValueInvalid", "message": TYPO_MESSAGE, "field": "spec.match.kinds[0]"}]}}


async def test_a_conflict_with_a_file_in_force_is_refused_over_http(
        aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, gold_file: Path) -> None:
    client = await _served(aiohttp_client, pki, gold_file)
    response = (await _validate(client, admission_review(policy_object("silver", SILVER), dry_run=True)))["response"]
    assert response["allowed"] is False
    (cause,) = response["status"]["details"]["causes"]
    assert cause["field"] == "spec.scheduling.priorityClassName" and "conflicts with policy 'gold'" in cause["message"]


async def test_an_allowed_policy_gets_lints_warnings(
        aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, gold_file: Path) -> None:
    client = await _served(aiohttp_client, pki, gold_file)
    spec = {"match": {"kinds": ["Job"]}, "rollout": {"mode": "safe"}, "placement": {"nodeSelector": {"a": "b"}}}
    response = (await _validate(client, admission_review(policy_object("jobs", spec))))["response"]
    assert response["allowed"] is True and response["warnings"][0].startswith("spec.rollout: rollout applies to")
    assert "patch" not in response


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [(b"{not json", "application/json", 400), (b'{"kind": "AdmissionReview"}', "application/json", 400),
     (b"{}", "text/plain", 415)],
    ids=["not-json", "not-a-review", "wrong-content-type"])
async def test_bad_input_is_a_4xx_never_a_500(aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki,
                                             gold_file: Path, body: bytes, content_type: str, status: int) -> None:
    client = await _served(aiohttp_client, pki, gold_file)
    resp = await client.post(app.VALIDATE_POLICY, data=body, headers={"Content-Type": content_type})
    assert resp.status == status and "error" in await resp.json()


async def test_a_review_of_another_kind_is_allowed(
        aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, gold_file: Path) -> None:
    client = await _served(aiohttp_client, pki, gold_file)
    response = (await _validate(client, admission_review(deployment("web"), uid="u-2")))["response"]
    assert response == {"uid": "u-2", "allowed": True}
