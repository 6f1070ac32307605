"""Webhook restart under load (issue 29, fault 2).

Deployments are created at a steady rate into two namespaces, one sent to the webhook registered
with ``failurePolicy: Ignore``, the other with ``Fail`` (the chart's configuration, its
``timeoutSeconds: 3``), while the one ``placement-webhook serve`` process behind both is stopped
(SIGTERM: it drains for ``--shutdown-grace``), left down for a few seconds and started again:

- Ignore: no create fails (those sent while it is down, or in flight at the stop, are created
  without placement);
- Fail: only creates in flight while it is down fail, and creates succeed again within 5 s of it
  answering /readyz.

One process is the worst case of the chart's defaults (docs/operations.md, "Restarts and
failurePolicy"): with ``replicaCount: 2`` and the PodDisruptionBudget's ``maxUnavailable: 1`` a
drain or a rollout leaves one replica serving, so no create meets a webhook that is down at all.
"""
from __future__ import annotations

import time
from typing import Any

from tests.kit.envtest import Cluster, ControlPlane, Webhook
from tests.kit.faults import fault_namespace, figure, wait_for_mutation
from tests.kit.load import Attempt, Load, summary

DOWN = 5.0  # seconds the webhook stays stopped
WARM = 3.0  # seconds of load before the stop and after the restart
RECOVERY = 5.0  # creates succeed again within this many seconds of /readyz answering


def test_a_webhook_restart_fails_no_create_with_ignore_and_only_those_in_flight_with_fail(
        control_plane: ControlPlane, cluster: Cluster, serving: Webhook) -> None:
    namespaces = {policy: fault_namespace(cluster, failure_policy=policy) for policy in ("Ignore", "Fail")}
    for namespace in namespaces.values():
        wait_for_mutation(cluster, namespace)
    clients = {policy: control_plane.api_client(retries=False) for policy in namespaces}
    loads = {policy: Load(_creating(Cluster(clients[policy]), namespace)).start()
             for policy, namespace in namespaces.items()}
    try:
        time.sleep(WARM)
        stopping = time.monotonic()
        serving.stop()
        stopped = time.monotonic()
        time.sleep(DOWN)
        serving.start()
        ready = time.monotonic()
        time.sleep(WARM + RECOVERY)
    finally:
        attempts = {policy: load.stop() for policy, load in loads.items()}
        for client in clients.values():
            client.close()

    ignore, fail = attempts["Ignore"], attempts["Fail"]
    failed_ignore = [a for a in ignore if a.status != 201]
    failed_fail = [a for a in fail if a.status != 201]
    out_of_window = [a for a in failed_fail if a.answered < stopping or a.sent > ready + RECOVERY]
    recovered = _recovered_after(fail, ready)
    # A create whose review reached the webhook after SIGTERM closed its listener is admitted
    # unmutated under Ignore, as it would be while down: it was in flight at the stop. (The chart's
    # preStop keeps the listener open while endpoints stop routing to the pod; this bare process
    # has none, the worst case.) Any other create answered 201 must carry the placement.
    in_flight = [a for a in ignore + fail if a.sent < stopping <= a.answered]
    lost = [a for a in ignore + fail if a.status == 201 and not a.mutated
            and not (stopping <= a.sent < ready) and a not in in_flight]
    figure(f"[faults] webhook restart: SIGTERM to gone {stopped - stopping:.1f}s, down {DOWN:.0f}s, "
          f"started to /readyz {ready - stopped - DOWN:.1f}s")
    figure(f"[faults]   failurePolicy Ignore: {summary(ignore)}; failed creates: {len(failed_ignore)}; "
           f"in flight at the stop and admitted unmutated: {sum(not a.mutated for a in in_flight if a in ignore)}")
    figure(f"[faults]   failurePolicy Fail: {summary(fail)}; failed creates: {len(failed_fail)}, all in flight "
          f"while it was down: {not out_of_window}; creates succeed again {recovered:+.1f}s after /readyz "
          f"(limit {RECOVERY:.0f}s)")
    assert not failed_ignore, [a.message for a in failed_ignore[:5]]
    assert not out_of_window, "\n".join(_described(a, stopping) for a in out_of_window[:10])
    assert recovered <= RECOVERY
    assert not lost, "\n".join(_described(a, stopping) for a in lost[:10])
    assert sum(a.sent < stopping for a in fail) >= WARM * 4 and sum(a.sent > ready for a in fail) >= WARM * 4


def _creating(cluster: Cluster, namespace: str) -> Any:
    return lambda obj: cluster.create(namespace, obj)


def _recovered_after(attempts: list[Attempt], ready: float) -> float:
    """Seconds from ``ready`` to the send of the first create after the last one that failed
    (0: none failed once it was ready)."""
    failures = [a.sent for a in attempts if a.status != 201 and a.answered >= ready]
    if not failures:
        return 0.0
    later = [a.sent for a in attempts if a.sent > max(failures)]
    return (min(later) if later else float("inf")) - ready


def _described(attempt: Attempt, origin: float) -> str:
    return (f"sent at {attempt.sent - origin:+.2f}s from the stop signal: status {attempt.status or 'none'}, "
            f"mutated {attempt.mutated}: {attempt.message[:300]}")
