"""The engine survives 250 real manifests and AdmissionReviews written by other people.

Each corpus file runs through the same `admission.admit` the server uses, twice: once with the
shipped policies and once with policies that match everything (so every file is really
mutated). For every file: no crash, a patch that reproduces the mutated object, an empty patch
on a second pass, nothing the author wrote removed, and output that validates against the
official Kubernetes schemas whenever the input did.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest

from webhook import cli
from webhook.engine import admission, review
from webhook.files import documents
from webhook.kube.deployment import resolve
from webhook.kube.kinds import split_api_version
from webhook.kube.objects import controller_of
from webhook.policy import loader

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
FILES = sorted(p for p in CORPUS.glob("*") if p.suffix in (".yaml", ".yml", ".json")) if CORPUS.is_dir() else []
K8S_VERSION = "1.31.0"
BUILTIN_GROUPS = ("apps/", "batch/", "v1")

pytestmark = pytest.mark.skipif(not FILES, reason=f"the shared corpus is not at {CORPUS}")

SHIPPED = loader.load([ROOT / "policies"])
EVERYTHING = loader.load([HERE / "policies"])


def _requests(path: Path) -> Iterator[review.Request]:
    for doc in documents.load_file(path):
        data = doc.data
        if isinstance(data, dict) and data.get("kind") == "AdmissionReview":
            yield review.parse(json.dumps(data))
        else:
            yield review.request_for_object(data)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, path + (key,))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, path + (index,))
    else:
        yield path, value


def _lookup(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _schema_errors(obj: dict[str, Any]) -> str | None:
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return f"{exc.message} at {list(exc.path)}"
    return None


def _builtin(obj: dict[str, Any]) -> bool:
    return str(obj.get("apiVersion", "")).startswith(BUILTIN_GROUPS)


def _removed_leaves(before: dict[str, Any], after: dict[str, Any], *, never_finishing: bool = False) -> list[str]:
    """Leaves of `before` missing or changed in `after`.

    Three changes are the policy language's own (docs/policies.md): a stale integer `priority`
    goes when a priority class is set, the API server's rolling-update defaults (25%/25%) are
    not a value a user chose, and safe rollouts replace an author's rolling-update values that
    can never finish with the required anti-affinity added (``never_finishing``).
    """
    lost = []
    for path, value in _leaves(before):
        if path and path[-1] == "priority":
            continue
        if path[-2:-1] == ("rollingUpdate",) and (value == "25%" or never_finishing):
            continue
        if "nodeSelectorTerms" in path:
            continue  # ANDed into new terms by design: checked by _required_terms_still_hold
        if value is None or value == {} or value == []:
            # null is absent to the API server, and an empty container may be filled in.
            continue
        try:
            if _lookup(after, path) == value:
                continue
        except (KeyError, IndexError, TypeError):
            pass
        lost.append("/".join(map(str, path)))
    return lost


def _never_finishing(request: Any, outcome: admission.Outcome) -> bool:
    """Whether safe rollouts replaced the object's rolling-update values as never finishing,
    checked: they resolve to no unavailable replica, and the output holds rule 3's values."""
    ru = ((request.object.get("spec") or {}).get("strategy") or {}).get("rollingUpdate")
    if not ru or not any("could never finish" in w for w in outcome.warnings):
        return False
    replicas = request.object["spec"].get("replicas", 1)
    assert resolve(ru.get("maxSurge", "25%"), ru.get("maxUnavailable", "25%"), replicas)[1] == 0, ru
    assert outcome.object is not None
    assert outcome.object["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    return True


def _required_terms(obj: dict[str, Any]) -> Iterator[tuple[list[Any], list[Any]]]:
    """(terms, path) of every required node-affinity term list in an object."""
    for path, _ in _leaves(obj):
        if "nodeSelectorTerms" in path:
            at = path.index("nodeSelectorTerms")
            yield path[: at + 1], _lookup(obj, path[: at + 1])


def _required_terms_still_hold(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Required node affinity may only get stricter: every new term contains an original one.

    (The policy's terms are ANDed into every existing term, a cross product.)
    """
    for path, original in dict(_required_terms(before)).items():
        if not original:
            continue
        result = _lookup(after, path)
        for term in result:
            expressions = term.get("matchExpressions") or []
            fields = term.get("matchFields") or []
            assert any(
                all(e in expressions for e in (o.get("matchExpressions") or []))
                and all(f in fields for f in (o.get("matchFields") or []))
                for o in original
            ), f"term {term} at {path} dropped every original term"


@pytest.mark.parametrize("policies", [SHIPPED, EVERYTHING], ids=["shipped", "everything"])
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_corpus_file_is_placed_correctly_and_idempotently(path: Path, policies: Any) -> None:
    for request in _requests(path):
        outcome = admission.admit(request, policies=policies)
        assert outcome.result != "error", outcome.warnings
        assert all(len(w) < 120 for w in outcome.warnings), outcome.warnings
        if outcome.result == "ignored" or request.object is None or outcome.object is None:
            # Scale subresource reviews and other non-workload requests pass through untouched.
            assert outcome.patch == []
            continue
        assert jsonpatch.apply_patch(request.object, outcome.patch) == outcome.object
        assert _removed_leaves(request.object, outcome.object, never_finishing=_never_finishing(request, outcome)) == []
        _required_terms_still_hold(request.object, outcome.object)

        again = admission.admit(
            review.request_for_object(outcome.object, operation=request.operation, namespace=request.namespace),
            policies=policies,
        )
        assert again.patch == [], f"second pass changed {again.patch}"

        if _builtin(outcome.object) and _schema_errors(request.object) is None:
            assert _schema_errors(outcome.object) is None


def test_everything_policies_change_every_workload_in_the_corpus() -> None:
    """Guards the test above: a policy set that silently matched nothing would prove nothing.
    Objects a controller of a handled kind stamped (a Deployment's pods) are left alone, and
    say so."""
    unchanged = []
    for path in FILES:
        for request in _requests(path):
            outcome = admission.admit(request, policies=EVERYTHING)
            target = EVERYTHING.targets.lookup(request.group, request.kind)
            handled = target is not None and (target.mutable_placement or request.operation == "CREATE")
            if not handled or request.sub_resource is not None:
                continue
            if _stamped_by_a_handled_kind(request.object):
                if outcome.result != "ignored" or not outcome.reason.startswith("owned by "):
                    unchanged.append(f"{path.name}: owned, but {outcome.result}")
            elif outcome.result not in ("patched", "skipped"):
                unchanged.append(f"{path.name}: {outcome.result}")
    assert unchanged == []


def _stamped_by_a_handled_kind(obj: dict[str, Any] | None) -> bool:
    ref = controller_of(obj)
    if ref is None:
        return False
    group, _version = split_api_version(str(ref.get("apiVersion") or ""))
    return EVERYTHING.targets.lookup(group, str(ref.get("kind") or "")) is not None


def test_mutate_cli_runs_over_the_whole_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["mutate", "-f", str(CORPUS), "--policies", str(HERE / "policies"), "-o", "json"])
    out = capsys.readouterr().out
    assert code == 0
    listing = json.loads(out)
    assert listing["kind"] == "List"
    assert len(listing["items"]) >= len(FILES)
