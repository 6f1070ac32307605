"""``expect.placement``: the case's admitted object placed by ``explain``'s scheduler model.

The object admission produced (the mutated one, or the original when no policy changed it)
is explained on the case's cluster state exactly as ``placement-webhook explain`` would
(as docs/explain.md describes): its replicas placed one by one, or its rolling update simulated when the
Deployment or StatefulSet already exists there. Each unmet expectation is one ``Failure``
(``placement.nodes: expected ..., got ...``); the last carries explain's own report, so the
author sees where every replica went and why the others stay Pending.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webhook.kube.objects import describe
from webhook.suites.checks import Failure, OutcomeLike
from webhook.suites.model import PlacementExpect

if TYPE_CHECKING:
    from webhook.explain.report import Explanation
    from webhook.explain.state import ClusterState
    from webhook.kube.kinds import Target, Targets

__all__ = ["check_placement"]

EXPECTATION = "placement"


def check_placement(expect: PlacementExpect, outcome: OutcomeLike, *, targets: Targets, state: ClusterState | None,
                    namespace: str | None = None) -> list[Failure]:
    """Every unmet expectation of ``expect`` for ``outcome.object`` explained on ``state``.

    ``namespace`` is the case's: as in admission it wins over the object's own, which wins
    over ``default``."""
    if state is None:  # the loader refuses such a case; kept for callers of their own
        return [Failure(EXPECTATION, "the case has no cluster state to place the object on")]
    obj, target, problem = _workload(outcome, targets)
    if problem or obj is None or target is None:
        return [Failure(EXPECTATION, problem)]
    if namespace:  # the API server stores the object in the request's namespace
        obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": namespace}}
    namespace = namespace or "default"
    explained = _explain(obj, target, state, expect, namespace=namespace, suggestions=False)
    if isinstance(explained, str):
        return [Failure(EXPECTATION, explained)]
    failures = [Failure(f"{EXPECTATION}.{name}", message) for name, message in _compare(expect, explained)]
    if failures:
        # The report an author needs to see why, with explain's verified suggestions: searched
        # only now, as a passing case never needs them.
        full = _explain(obj, target, state, expect, namespace=namespace, suggestions=True)
        failures[-1] = Failure(failures[-1].expectation, failures[-1].message,
                               _report(full if not isinstance(full, str) else explained, state))
    return failures


def _workload(outcome: OutcomeLike, targets: Targets) -> tuple[dict[str, Any] | None, Target | None, str]:
    """The object to explain and its kind, or a reason there is none."""
    obj = outcome.object
    target = targets.for_object(obj) if isinstance(obj, dict) else None
    if outcome.result in ("error", "ignored"):
        said = f"admission answered {outcome.result!r}"
        if isinstance(obj, dict) and target is None:
            return None, None, f"{said}: {describe(obj)} is not a workload kind explain places"
        if not isinstance(obj, dict) or outcome.patch:
            why = getattr(outcome, "error", None) or getattr(outcome, "reason", None)
            return None, None, f"{said}{f' ({why})' if why else ''}: there is no admitted workload to place"
        return obj, target, ""  # unchanged and still a workload: placed as it is
    if not isinstance(obj, dict):
        return None, None, f"admission answered {outcome.result!r} without an object to place"
    if target is None:
        return None, None, f"{describe(obj)} is not a workload kind explain places"
    return obj, target, ""


def _explain(obj: Mapping[str, Any], target: Target, state: ClusterState, expect: PlacementExpect, *,
             namespace: str, suggestions: bool) -> Explanation | str:
    from webhook.explain.report import explain
    from webhook.explain.workloads import WorkloadError

    try:
        return explain(obj, target, state, namespace=namespace, replicas=expect.replicas, update=expect.update,
                       suggestions=suggestions)
    except (WorkloadError, ValueError) as exc:  # a spec the API server would refuse
        return f"explain cannot place {describe(obj)}: {exc}"


def _compare(expect: PlacementExpect, e: Explanation) -> list[tuple[str, str]]:
    """(expectation, what differs) for each unmet expectation, in the order the fields are documented."""
    unmet: list[tuple[str, str]] = []
    total = len(e.rows)
    if expect.schedules is True and not e.ok:
        found = f"{e.placed} placed, {e.pending} Pending"
        if e.rollout is not None and not e.rollout.completes:
            found += f"; the rollout is stuck after {len(e.rollout.steps)} step(s)"
        unmet.append(("schedules", f"expected every replica to place, but explain found {found}"))
    if expect.schedules is False and e.ok:
        found = f"all {total} replica(s) place" if total else "there is no replica to place"
        if e.rollout is not None:
            found += f" and the rollout completes in {len(e.rollout.steps)} step(s)"
        unmet.append(("schedules", f"expected it not to schedule, but {found}"))
    if expect.placed is not None and expect.placed != e.placed:
        unmet.append(("placed", f"expected {expect.placed} placed, got {e.placed} (of {total})"))
    if expect.pending is not None and expect.pending != e.pending:
        unmet.append(("pending", f"expected {expect.pending} Pending, got {e.pending} (of {total})"))
    nodes = [r.node for r in e.rows if r.node is not None]
    if expect.nodes is not None and Counter(expect.nodes) != Counter(nodes):
        unmet.append(("nodes", _nodes_differ(expect.nodes, nodes)))
    if expect.only_nodes is not None:
        allowed = set(expect.only_nodes)
        outside = [f"replica {r.index} -> {r.node}" for r in e.rows if r.node is not None and r.node not in allowed]
        if outside:
            said = f"expected every placed replica on {_names(expect.only_nodes)}, but {', '.join(outside)}"
            unmet.append(("onlyNodes", said))
    if expect.message is not None:
        message = _message(e)
        if not message:
            said = f"expected a scheduler message matching {expect.message!r}, but every replica places"
            unmet.append(("message", said + (" and the rollout completes" if e.rollout else "")))
        elif re.search(expect.message, message) is None:
            unmet.append(("message", f"{expect.message!r} does not match the scheduler's message: {message}"))
    if expect.rollout is not None:
        unmet += _compare_rollout(expect, e)
    return unmet


def _compare_rollout(expect: PlacementExpect, e: Explanation) -> list[tuple[str, str]]:
    wanted = expect.rollout
    assert wanted is not None
    verdict = e.rollout
    if verdict is None:
        said = (f"expected a rollout, but explain placed the {e.kind}'s replicas as on creation (only a Deployment "
                "or StatefulSet in the cluster state is updated; say update: true to force it)")
        return [("rollout", said)]
    unmet: list[tuple[str, str]] = []
    steps = len(verdict.steps)
    if wanted.completes is True and not verdict.completes:
        said = f"expected the rollout to complete, but it is stuck after {steps} step(s): {verdict.message}"
        unmet.append(("rollout.completes", said))
    if wanted.completes is False and verdict.completes:
        unmet.append(("rollout.completes", f"expected the rollout to get stuck, but it completes in {steps} step(s)"))
    if wanted.steps is not None and wanted.steps != steps:
        unmet.append(("rollout.steps", f"expected {wanted.steps} step(s), got {steps}"))
    if wanted.min_available is not None and wanted.min_available != verdict.min_available:
        said = f"expected at least {wanted.min_available} available on the way, got {verdict.min_available}"
        unmet.append(("rollout.minAvailable", said))
    return unmet


def _message(e: Explanation) -> str:
    """The first Pending replica's scheduler message, else the stuck rollout's; "" when none."""
    pending = next((r.message for r in e.rows if r.node is None and r.message), "")
    if pending:
        return pending
    if e.rollout is not None and not e.rollout.completes:
        return e.rollout.message
    if e.pending and e.diagnosis is not None:
        return e.diagnosis.message
    return ""


def _nodes_differ(expected: list[str], actual: list[str]) -> str:
    missing = Counter(expected) - Counter(actual)
    extra = Counter(actual) - Counter(expected)
    why = []
    if missing:
        why.append(f"missing {', '.join(sorted(missing.elements()))}")
    if extra:
        why.append(f"unexpected {', '.join(sorted(extra.elements()))}")
    return f"expected replicas on {_names(expected)}, got {_names(actual)} ({'; '.join(why)})"


def _names(nodes: list[str]) -> str:
    return "[" + ", ".join(sorted(nodes)) + "]"


def _report(e: Explanation, state: ClusterState) -> str:
    from webhook.explain.report import render

    lines = ["explain found:"]
    lines += ["  " + line for line in render(e).rstrip("\n").splitlines()]
    lines += [f"  note: cluster state: {note}" for note in state.notes]
    return "\n".join(lines)
