"""AdmissionReview parsing and answers (admission.k8s.io/v1 and v1beta1)."""
from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.reviews import admission_review
from webhook import codec
from webhook.engine import review
from webhook.kube.warnings import clip_all

V1, V1BETA1 = "admission.k8s.io/v1", "admission.k8s.io/v1beta1"


def _review(api_version: str = V1, **request: Any) -> dict[str, Any]:
    """A Deployment's review, with ``request`` fields replaced or added as given."""
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    body = admission_review(web, namespace="prod", api_version=api_version, uid="705ab4f5-6393-11e8-b7cc-42010a800002")
    body["request"].update(request)
    return body


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_both_review_versions_parse_into_the_same_request(api_version: str) -> None:
    req = review.parse(json.dumps(_review(api_version)).encode())
    assert req.api_version == api_version
    assert (req.group, req.version, req.kind) == ("apps", "v1", "Deployment")
    assert (req.operation, req.namespace, req.name) == ("CREATE", "prod", "web")
    assert req.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert req.object == {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    assert req.sub_resource is None and req.dry_run is False


@pytest.mark.parametrize("body", [json.dumps(_review()), json.dumps(_review()).encode(), _review()])
def test_bytes_text_and_decoded_json_are_all_accepted(body: Any) -> None:
    assert review.parse(body).kind == "Deployment"


def test_a_body_of_any_other_type_is_a_type_error_not_taken_for_a_review() -> None:
    """The compiled build refuses it at the call; the pure one when decoding it."""
    with pytest.raises(TypeError):
        review.parse([_review()])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        (b"", "not JSON"),
        (b"[1, 2]", "got a JSON array"),
        (b'"review"', "got a JSON string"),
        (json.dumps({**_review(), "apiVersion": "admission.k8s.io/v2"}), "apiVersion must be one of"),
        (json.dumps({**_review(), "apiVersion": None}), "apiVersion must be one of"),
        (json.dumps({**_review(), "kind": "ConversionReview"}), "kind must be AdmissionReview"),
        (json.dumps({"apiVersion": V1, "kind": "AdmissionReview"}), "no request object"),
        (json.dumps({"apiVersion": V1, "kind": "AdmissionReview", "request": []}), "no request object"),
        (json.dumps(_review(uid=None)), "request.uid is missing"),
        (json.dumps(_review(uid="")), "request.uid is missing"),
        (json.dumps(_review(uid=42)), "request.uid is missing"),
        (json.dumps(_review(object=[1])), "request.object must be an object, got a JSON array"),
        (json.dumps(_review(object="x")), "request.object must be an object, got a JSON string"),
        (json.dumps(_review(oldObject=3)), "request.oldObject must be an object, got a JSON number"),
        (json.dumps(_review(operation="PATCH")), "request.operation must be one of"),
        (json.dumps(_review(kind="Deployment")), "request.kind must be an object"),
    ],
)
def test_unusable_bodies_are_bad_reviews_with_a_reason(body: Any, message: str) -> None:
    with pytest.raises(review.BadReview, match=message):
        review.parse(body)


def test_a_bad_review_is_a_value_error_so_callers_can_catch_broadly() -> None:
    assert issubclass(review.BadReview, ValueError)


def test_missing_request_kind_falls_back_to_the_objects_api_version_and_kind() -> None:
    body = _review()
    del body["request"]["kind"]
    body["request"]["object"] = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {}}
    req = review.parse(body)
    assert (req.group, req.version, req.kind) == ("kubevirt.io", "v1", "VirtualMachine")


@pytest.mark.parametrize(
    ("objects", "operation"),
    [
        ({"object": {"kind": "Pod"}}, "CREATE"),
        ({"object": {"kind": "Pod"}, "oldObject": {"kind": "Pod"}}, "UPDATE"),
        ({"object": None, "oldObject": {"kind": "Pod"}}, "DELETE"),
    ],
)
def test_missing_operation_is_inferred_from_the_objects_present(objects: dict[str, Any], operation: str) -> None:
    body = _review(**objects)
    del body["request"]["operation"]
    assert review.parse(body).operation == operation


def test_hand_made_review_without_kind_or_operation_is_a_create_of_its_object() -> None:
    body = {
        "kind": "AdmissionReview",
        "apiVersion": V1,
        "request": {"uid": "uidValue", "name": "nginx", "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nginx"}}},
    }
    req = review.parse(body)
    assert (req.group, req.version, req.kind, req.operation) == ("", "v1", "Pod", "CREATE")
    assert req.namespace is None and req.name == "nginx"


def test_namespace_and_name_fall_back_to_object_metadata() -> None:
    body = _review(object={"kind": "Deployment", "metadata": {"name": "api", "namespace": "team-a"}})
    del body["request"]["namespace"], body["request"]["name"]
    req = review.parse(body)
    assert (req.namespace, req.name) == ("team-a", "api")


def test_subresource_dry_run_and_old_object_are_carried() -> None:
    req = review.parse(_review(subResource="scale", dryRun=True, operation="UPDATE", oldObject={"kind": "Scale"}))
    assert req.sub_resource == "scale"
    assert req.dry_run is True
    assert req.old_object == {"kind": "Scale"}


def test_delete_review_has_no_object() -> None:
    req = review.parse(_review(operation="DELETE", object=None, oldObject={"kind": "Deployment"}))
    assert req.object is None and req.operation == "DELETE"


PATCH = [{"op": "add", "path": "/metadata/annotations", "value": {"a/b": "c"}}]


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_answer_echoes_api_version_and_uid_and_allows(api_version: str) -> None:
    req = review.parse(_review(api_version, uid="abc-123"))
    answer = review.respond(req, patch=b"", warnings=[])
    assert answer == {"apiVersion": api_version, "kind": "AdmissionReview", "response": {"uid": "abc-123", "allowed": True}}


def test_answer_carries_base64_json_patch_only_when_non_empty() -> None:
    req = review.parse(_review())
    response = review.respond(req, patch=codec.dumps(PATCH), warnings=[])["response"]
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == PATCH
    assert "patch" not in review.respond(req, patch=b"", warnings=[])["response"]
    assert "patchType" not in review.respond(req, patch=b"", warnings=[])["response"]


def test_an_answer_to_a_review_with_a_lone_surrogate_in_its_uid_still_encodes() -> None:
    req = review.parse(_review(uid="\ud800-lone"))
    answer = review.respond(req, patch=codec.dumps(PATCH), warnings=[])
    assert json.loads(codec.dumps(answer))["response"]["uid"] == "\ud800-lone"


# Text with lone surrogates too (a uid or warning msgspec cannot encode: the standard library's turn).
_text = st.text(st.characters(blacklist_categories=()), max_size=12)


@settings(max_examples=300, deadline=None)
@given(uid=_text.filter(bool), patch=st.binary(max_size=64), warnings=st.lists(_text, max_size=3),
       api_version=st.sampled_from([V1, V1BETA1]))
def test_the_body_the_server_sends_is_the_answer_encoded(uid: str, patch: bytes, warnings: list[str],
                                                         api_version: str) -> None:
    req = review.parse(_review(api_version, uid=uid))
    warnings = clip_all(warnings)  # as admission's outcome holds them
    body = review.encoded_answer(req, patch=patch, warnings=warnings)
    assert json.loads(body) == review.respond(req, patch=patch, warnings=warnings)


def test_answer_warnings_are_clipped_under_120_characters_and_deduplicated() -> None:
    long = "spread-web: " + "x" * 300
    response = review.respond(review.parse(_review()), patch=b"", warnings=[long, "a", "a", "  "])["response"]
    assert [len(w) < 120 for w in response["warnings"]] == [True, True]
    assert response["warnings"][0].startswith("spread-web: xxx") and response["warnings"][0].endswith("...")
    assert response["warnings"][1] == "a"


def test_request_for_object_builds_what_the_api_server_would_send() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "data"}}
    req = review.request_for_object(obj, operation="UPDATE")
    assert (req.group, req.version, req.kind, req.operation) == ("apps", "v1", "StatefulSet", "UPDATE")
    assert (req.namespace, req.name, req.api_version) == ("data", "db", V1)
    assert req.object is obj
    assert req.uid == review.request_for_object(obj, operation="UPDATE").uid


@pytest.mark.parametrize(
    ("object_ns", "given", "expected"),
    [("data", None, "data"), ("data", "other", "other"), (None, None, "default"), (None, "x", "x")],
)
def test_request_for_object_namespace_is_given_else_own_else_default(
    object_ns: str | None, given: str | None, expected: str
) -> None:
    meta = {"name": "db", **({"namespace": object_ns} if object_ns else {})}
    req = review.request_for_object({"apiVersion": "v1", "kind": "Pod", "metadata": meta}, namespace=given)
    assert req.namespace == expected


def test_request_for_object_rejects_unknown_operations() -> None:
    with pytest.raises(ValueError, match="operation must be one of"):
        review.request_for_object({"kind": "Pod"}, operation="APPLY")
