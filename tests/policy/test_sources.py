"""PlacementPolicy objects beside policy files: each object validated as a file is, named
``cluster:PlacementPolicy/<name>``, left out alone when the loader refuses it, and a name that a
file and an object both define in force nowhere (the server) or the file's (the commands)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.policies import GOLD_FILE, GOLD_SPEC, TYPO_SPEC
from tests.kit.policy_objects import SSD_SPEC, policy_object
from webhook.policy import loader, sources
from webhook.policy.policyset import Policy




@pytest.fixture
def files(tmp_path: Path) -> loader.Loaded:
    (tmp_path / "gold.yaml").write_text(GOLD_FILE)
    return loader.load_with_sources([tmp_path])


def test_an_object_is_read_as_the_loader_reads_a_file_of_its_name_and_spec() -> None:
    doc = sources.document(policy_object("ssd", status={"observedGeneration": 1}))
    assert doc.file == "cluster:PlacementPolicy/ssd" and doc.line == 0
    assert doc.data == {"apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "PlacementPolicy",
                        "metadata": {"name": "ssd"}, "spec": SSD_SPEC}


def test_a_list_item_without_apiversion_or_kind_is_still_a_placementpolicy() -> None:
    item = {"metadata": {"name": "ssd"}, "spec": SSD_SPEC}
    assembled = sources.assemble(None, [item])
    assert assembled.policies.names == ("ssd",) and not assembled.left_out


def test_objects_are_assembled_with_their_generation_and_sources_for_lint() -> None:
    assembled = sources.assemble(None, [policy_object("ssd", generation=4), policy_object("gold", GOLD_SPEC)])
    assert assembled.policies.names == ("gold", "ssd")
    assert assembled.generations == {"ssd": 4, "gold": 1}
    assert assembled.loaded.sources["ssd"].file == "cluster:PlacementPolicy/ssd"
    assert assembled.policies.policies[1].source == "cluster:PlacementPolicy/ssd"  # no ":0": no line to blame


def test_an_object_the_loader_refuses_is_left_out_alone_with_its_errors_and_did_you_mean() -> None:
    assembled = sources.assemble(None, [policy_object("typo", TYPO_SPEC), policy_object("ssd")])
    assert assembled.policies.names == ("ssd",)
    left = assembled.left_out["typo"]
    assert left.reason == sources.REASON_INVALID
    (error,) = left.errors
    assert str(error) == ("cluster:PlacementPolicy/typo: spec.match.kinds[0]: unknown kind 'Deploymnet'; "
                          'did you mean "Deployment"?')


def test_an_object_without_a_spec_is_refused_for_it_not_dropped_silently() -> None:
    obj = policy_object("bare")
    del obj["spec"]
    (error,) = sources.assemble(None, [obj]).left_out["bare"].errors
    assert error.field == "spec" and error.message == "required field is missing"


def test_the_server_takes_a_name_a_file_and_an_object_both_define_as_an_error_for_that_name_only(
        files: loader.Loaded) -> None:
    assembled = sources.assemble(files, [policy_object("gold", GOLD_SPEC), policy_object("ssd")], on_duplicate="error")
    assert assembled.policies.names == ("ssd",)
    left = assembled.left_out["gold"]
    assert left.reason == sources.REASON_DUPLICATE
    at_object, at_file = sorted(left.errors, key=lambda e: e.file.startswith("cluster:"), reverse=True)
    assert str(at_object).startswith("cluster:PlacementPolicy/gold: metadata.name: policy name 'gold' is also "
                                     f"defined at {files.sources['gold'].file}:4;")
    assert at_file.line == 4 and "also defined at cluster:PlacementPolicy/gold" in at_file.message
    assert assembled.files == {"gold": f"{files.sources['gold'].file}:4"}


def test_a_command_takes_the_file_as_the_change_to_the_object_of_its_name(files: loader.Loaded) -> None:
    replaced = policy_object("gold", {**GOLD_SPEC, "scheduling": {"priorityClassName": "silver"}})
    assembled = sources.assemble(files, [replaced], on_duplicate="replace")
    (gold,) = assembled.policies
    assert gold.spec["scheduling"] == {"priorityClassName": "gold"} and not assembled.left_out
    assert "gold" not in assembled.generations


def test_an_unchanged_object_keeps_its_policy_and_what_the_engine_compiled_into_it() -> None:
    memo = sources.Memo()
    first = sources.assemble(None, [policy_object("ssd")], memo=memo).policies.policies[0]
    first.cache["compiled"] = "kept"
    again = sources.assemble(None, [policy_object("ssd", generation=2)], memo=memo).policies.policies[0]
    assert again is first and again.cache == {"compiled": "kept"}


def test_the_memo_forgets_objects_that_went_or_changed() -> None:
    memo = sources.Memo()
    sources.assemble(None, [policy_object("ssd"), policy_object("gold", GOLD_SPEC)], memo=memo)
    assert len(memo) == 2
    sources.assemble(None, [policy_object("ssd", {**SSD_SPEC, "order": 3})], memo=memo)
    assert len(memo) == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True),
       st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True),
       st.sets(st.sampled_from(["a", "b", "c", "d"])))
def test_each_name_serves_once_and_only_a_valid_definition_of_its_own_serves(
        file_names: list[str], object_names: list[str], broken: set[str]) -> None:
    docs = [sources.document(policy_object(n)) for n in file_names]
    files = loader.load_documents_with_sources([_as_file(d, n) for d, n in zip(docs, file_names)]) if docs else None
    objects = [policy_object(n, TYPO_SPEC if n in broken else SSD_SPEC) for n in object_names]
    assembled = sources.assemble(files, objects, on_duplicate="error")
    served = set(assembled.policies.names)
    assert len(served) == len(assembled.policies)
    expected = (set(file_names) - set(object_names)) | {n for n in object_names if n not in broken and n not in file_names}
    assert served == expected
    assert set(assembled.left_out) == set(object_names) - expected
    assert all(isinstance(p, Policy) for p in assembled.policies)


def _as_file(doc: Any, name: str) -> Any:
    return type(doc)(data=doc.data, file=f"/policies/{name}.yaml", line=1, lines={("metadata", "name"): 4})
