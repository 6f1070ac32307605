"""The status a PlacementPolicy object gets: observedGeneration, a Ready condition shaped as
metav1.Condition (its transition time moving only with its status), changedObjects; and a
write only when it changes what the object has."""
from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from webhook.policy import status
from webhook.policy.errors import LoadError

T0, T1 = "2024-01-01T00:00:00Z", "2024-06-01T12:00:00Z"
TYPO = LoadError("cluster:PlacementPolicy/typo", 0, "spec.match.kinds[0]",
                 "unknown kind 'Deploymnet'; did you mean \"Deployment\"?")


def test_a_policy_in_force_is_ready_loaded_at_its_generation() -> None:
    assert status.desired(None, generation=3, reason=None, changed=7, now=T0) == {
        "observedGeneration": 3, "changedObjects": 7,
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3, "lastTransitionTime": T0,
                        "reason": "Loaded", "message": status.IN_FORCE}]}


def test_a_refused_policy_is_not_ready_with_each_error_at_its_field_path() -> None:
    other = LoadError("cluster:PlacementPolicy/typo", 0, "", "a message without a field")
    (ready,) = status.desired(None, generation=2, reason="Invalid", errors=[TYPO, other], changed=0, now=T0)["conditions"]
    assert ready["status"] == "False" and ready["reason"] == "Invalid"
    assert ready["message"] == ("spec.match.kinds[0]: unknown kind 'Deploymnet'; did you mean \"Deployment\"?\n"
                                "a message without a field")


def test_the_transition_time_moves_only_when_the_status_does() -> None:
    current = status.desired(None, generation=1, reason=None, changed=0, now=T0)
    same = status.desired(current, generation=2, reason=None, changed=5, now=T1)
    assert same["conditions"][0]["lastTransitionTime"] == T0
    flipped = status.desired(current, generation=2, reason="Invalid", errors=[TYPO], changed=0, now=T1)
    assert flipped["conditions"][0]["lastTransitionTime"] == T1


def test_conditions_of_other_types_are_kept() -> None:
    theirs = {"type": "Reviewed", "status": "True", "reason": "ByHand", "message": "ok", "lastTransitionTime": T0}
    wanted = status.desired({"conditions": [theirs]}, generation=1, reason=None, changed=0, now=T1)
    assert wanted["conditions"][1] == theirs


def test_a_message_longer_than_a_condition_holds_is_cut_and_says_so() -> None:
    many = [LoadError("f", 0, f"spec.x[{i}]", "y" * 100) for i in range(1000)]
    text = status.message(many)
    assert len(text) == status.MAX_MESSAGE and text.endswith("run placement-webhook lint for every error)")


def test_a_message_is_never_empty() -> None:
    assert status.message([]) == "not in force"


def test_an_unchanged_status_is_not_written_and_fields_of_others_do_not_count() -> None:
    wanted = status.desired(None, generation=1, reason=None, changed=0, now=T0)
    assert not status.differs({**wanted, "someoneElse": 1}, wanted)
    assert status.differs(None, wanted)
    assert status.differs({**wanted, "changedObjects": 1}, wanted)


@given(st.lists(st.tuples(st.integers(1, 5), st.sampled_from([None, "Invalid", "Duplicate"]), st.integers(0, 3)),
                min_size=1, max_size=8))
def test_writing_what_is_wanted_then_asking_again_wants_no_write(steps: list[tuple[int, str | None, int]]) -> None:
    current: dict[str, Any] | None = None
    for i, (generation, reason, changed) in enumerate(steps):
        wanted = status.desired(current, generation=generation, reason=reason,
                                errors=[TYPO] if reason else [], changed=changed, now=f"2024-01-01T00:00:{i:02d}Z")
        current = wanted
        again = status.desired(current, generation=generation, reason=reason,
                               errors=[TYPO] if reason else [], changed=changed, now="2030-01-01T00:00:00Z")
        assert not status.differs(current, again)
