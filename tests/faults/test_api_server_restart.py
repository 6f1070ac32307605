"""API server restart under load (issue 29, fault 1).

Deployments are created through the API server at a steady rate (5 a second) into a namespace the
webhook is registered for with ``failurePolicy: Fail``, its cluster view on. kube-apiserver is
stopped as a kubelet stops it (SIGTERM, SIGKILL after a grace: with watches open it would drain
for up to 60 s), kept down for 15 s and started again with the same arguments. Then:

- every create sent while the API server was up (before the stop signal, or after it answered
  /readyz again) is answered 201 and mutated: no review is lost;
- a namespace label changed after the restart reaches the cluster view (a dry-run create in that
  namespace gets the placement the label selects) within the reflector's backoff bound.

The bound comes from the informer's ``REFLECTOR_BACKOFF`` (webhook/cluster/informer.py, client-go's
``NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0)``): after each failed list or watch the
informer sleeps ``step * (1 + jitter * rand)``, the step doubling from ``initial`` up to ``cap``.
Over an outage of D seconds the most steps fit when every sleep is as short as it can be, so the
last sleep to start before the API server is back is at most ``(1 + jitter) * step_n``, where
``step_n`` is the largest step whose predecessors' shortest sleeps sum to at most D. The view has
the label at most that long after it was made, plus one list or watch round trip
(``ROUND_TRIP``). A watch resumed at a resourceVersion the restarted API server no longer has is
answered 410, and the informer relists at once: that counts, as it does in client-go.
"""
from __future__ import annotations

import time
from typing import Any

from tests.kit.e2e_workloads import pod_spec, workload
from tests.kit.envtest import Cluster, ControlPlane, Webhook, wait_until
from tests.kit.faults import TEAM_LABEL, TEAM_POOL_LABEL, fault_namespace, figure, wait_for_mutation
from tests.kit.load import Attempt, Load, summary
from webhook.cluster.informer import REFLECTOR_BACKOFF, BackoffPolicy

DOWN = 15.0  # seconds kube-apiserver stays stopped
GRACE = 5.0  # seconds between SIGTERM and SIGKILL
WARM = 3.0  # seconds of load before the stop and after the restart
ROUND_TRIP = 5.0  # seconds for the relist or resumed watch, and the probe, on a loaded machine


def backoff_bound(outage: float, policy: BackoffPolicy = REFLECTOR_BACKOFF) -> float:
    """The longest sleep the informer can be in when an outage of ``outage`` seconds ends."""
    step, elapsed = policy.initial, 0.0
    while elapsed + step <= outage:
        elapsed += step
        step = min(step * policy.factor, policy.cap)
    return step * (1 + policy.jitter)


def test_the_bound_is_the_last_step_that_can_start_within_the_outage() -> None:
    # 0.8 + 1.6 + 3.2 + 6.4 = 12.0 s of shortest sleeps fit in 20 s, the next one (12.8) does not
    # end within it: the informer may be in a 12.8 s step, jittered up to twice that.
    assert backoff_bound(20.0) == 12.8 * 2
    assert backoff_bound(0.5) == 0.8 * 2
    assert backoff_bound(3600.0) == REFLECTOR_BACKOFF.cap * 2


def team_pool(obj: dict[str, Any]) -> str | None:
    return (pod_spec(obj).get("nodeSelector") or {}).get(TEAM_POOL_LABEL)


def test_an_api_server_restart_loses_no_review_and_the_view_catches_up(
        control_plane: ControlPlane, cluster: Cluster, serving: Webhook) -> None:
    namespace = fault_namespace(cluster, failure_policy="Fail")
    wait_for_mutation(cluster, namespace)
    client = control_plane.api_client(retries=False)
    creates = Cluster(client)
    failures_before = _informer(serving, "errors_total")
    load = Load(lambda obj: creates.create(namespace, obj)).start()
    try:
        time.sleep(WARM)
        with control_plane.apiserver_stopped(grace=GRACE) as outage:
            time.sleep(DOWN)
        # At once after the restart, while the creates go on: the informer may still be backing off.
        labelled = time.monotonic()
        cluster.core.patch_namespace(namespace, {"metadata": {"labels": {TEAM_LABEL: "blue"}}})
        bound = backoff_bound(outage.down) + ROUND_TRIP
        probe = workload("Deployment", "probe")
        wait_until(lambda: team_pool(cluster.create(namespace, probe, dry_run=True)) == "blue",
                   what=f"the cluster view to see namespace {namespace} labelled team=blue", timeout=bound,
                   interval=0.2)
        seen = time.monotonic() - labelled
        time.sleep(max(0.0, outage.ready + WARM - time.monotonic()))
    finally:
        attempts = load.stop()
        client.close()
    # Up: answered before the stop signal, or sent after /readyz answered again. The one create in
    # flight at the signal is racing it: kube-apiserver's graceful shutdown (http.Server.Shutdown)
    # answers what it already received but closes idle keep-alive connections at once, so a create
    # written to one as the signal lands never reaches a handler (and Go's client does not resend
    # a POST). It may end without an answer, but never answered and not mutated.
    before = [a for a in attempts if a.answered < outage.stopping]
    racing = [a for a in attempts if a.sent < outage.stopping <= a.answered]
    after = [a for a in attempts if a.sent >= outage.ready]
    down = [a for a in attempts if outage.stopping <= a.sent < outage.ready]
    lost = [a for a in before + after if a.status != 201 or not a.mutated]
    lost += [a for a in racing if a.status != 0 and not a.mutated]
    failures = _informer(serving, "errors_total") - failures_before

    figure(f"[faults] kube-apiserver restart: SIGTERM, SIGKILL after {GRACE:.0f}s, down {DOWN:.0f}s; "
          f"stop signal to ready again {outage.down:.1f}s (gone after {outage.stopped - outage.stopping:.1f}s, "
          f"ready {outage.ready - outage.starting:.1f}s after start)")
    figure(f"[faults]   creates while up: {summary(before + after)}; in flight at the stop signal: "
          f"{summary(racing)}; lost reviews: {len(lost)}")
    figure(f"[faults]   creates while down or starting (not counted): {summary(down)}")
    figure(f"[faults]   view applied the namespace label {seen:.1f}s after it was made; bound {bound:.1f}s "
          f"(reflector backoff {backoff_bound(outage.down):.1f}s: initial {REFLECTOR_BACKOFF.initial}s, "
          f"factor {REFLECTOR_BACKOFF.factor}, cap {REFLECTOR_BACKOFF.cap}s, jitter {REFLECTOR_BACKOFF.jitter}; "
          f"+ {ROUND_TRIP:.0f}s round trip); the namespace informer failed {failures:.0f} list or watch "
          f"attempts during the outage and relisted {_informer(serving, 'relists_total'):.0f} times in all")
    assert len(before) >= WARM * 4 and len(after) >= WARM * 4, (summary(before), summary(after))
    assert len(racing) <= 1  # one create at a time
    assert not lost, "\n".join(_described(a, outage.stopping) for a in lost[:10])
    assert failures > 0  # the view did see the API server gone


def _informer(server: Webhook, name: str) -> float:
    return server.view_metric(name, "namespaces") or 0.0


def _described(attempt: Attempt, origin: float) -> str:
    return (f"sent at {attempt.sent - origin:+.2f}s from the stop signal: status {attempt.status or 'none'}, "
            f"mutated {attempt.mutated}: {attempt.message[:300]}")
