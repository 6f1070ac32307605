"""The server's background audit: its metrics (workloads out of policy per policy and namespace,
rollout risks per namespace, pass durations and results, refused report writes by reason)."""
from __future__ import annotations

from webhook.server.metrics import PREFIX, Metrics


def test_a_successful_pass_replaces_the_last_ones_figures() -> None:
    metrics = Metrics()
    metrics.observe_audit(result="success", seconds=1.5, out_of_policy={("spread-web", "shop"): 2, ("ssd", "bank"): 1},
                          rollout_risks={"shop": 1})
    metrics.observe_audit(result="success", seconds=0.5, out_of_policy={("spread-web", "shop"): 1}, rollout_risks={})
    sample = metrics.registry.get_sample_value
    assert sample(f"{PREFIX}_audit_out_of_policy", {"policy": "spread-web", "namespace": "shop"}) == 1
    assert sample(f"{PREFIX}_audit_out_of_policy", {"policy": "ssd", "namespace": "bank"}) is None
    assert sample(f"{PREFIX}_audit_rollout_risks", {"namespace": "shop"}) is None
    assert sample(f"{PREFIX}_audit_runs_total", {"result": "success"}) == 2
    assert sample(f"{PREFIX}_audit_duration_seconds_sum", {}) == 2.0


def test_a_failed_pass_is_counted_and_keeps_the_last_figures() -> None:
    metrics = Metrics()
    metrics.observe_audit(result="success", seconds=1.0, out_of_policy={("ssd", "bank"): 3}, rollout_risks={"bank": 2})
    metrics.observe_audit(result="unread", seconds=120.0, out_of_policy={}, rollout_risks={})
    sample = metrics.registry.get_sample_value
    assert sample(f"{PREFIX}_audit_out_of_policy", {"policy": "ssd", "namespace": "bank"}) == 3
    assert sample(f"{PREFIX}_audit_rollout_risks", {"namespace": "bank"}) == 2
    assert sample(f"{PREFIX}_audit_runs_total", {"result": "unread"}) == 1
