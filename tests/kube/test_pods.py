"""A finished pod holds nothing, and the scheduler never lists one."""
from __future__ import annotations

from typing import Any

import pytest

from webhook.kube import pods


@pytest.mark.parametrize(("status", "finished"), [
    ({"phase": "Succeeded"}, True),
    ({"phase": "Failed"}, True),
    ({"phase": "Running"}, False),
    ({"phase": "Pending"}, False),
    ({"phase": "Unknown"}, False),  # a lost node's pod may still run: it holds its room
    ({}, False),
    (None, False),
])
def test_only_succeeded_and_failed_pods_are_finished(status: dict[str, Any] | None, finished: bool) -> None:
    assert pods.terminal({"metadata": {"name": "p"}, "status": status}) is finished


def test_the_scheduler_field_selector_is_what_new_pod_informer_builds() -> None:
    # pkg/scheduler/scheduler.go: fmt.Sprintf("status.phase!=%v,status.phase!=%v", v1.PodSucceeded, v1.PodFailed)
    assert pods.SCHEDULER_FIELD_SELECTOR == "status.phase!=Succeeded,status.phase!=Failed"
