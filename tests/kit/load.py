"""Creates at a steady rate through the API server, each one's send time and outcome kept, for the
fault tier: while something is killed and restarted, which creates were answered, and mutated?
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.kit.e2e_workloads import placed, workload


@dataclass(frozen=True)
class Attempt:
    sent: float  # time.monotonic() when the create was sent
    answered: float  # time.monotonic() when it ended (answered or failed)
    status: int  # the API server's HTTP status; 0: no answer (refused, reset, timed out)
    mutated: bool  # created, and the stored object carries the policy's placement
    message: str = ""  # what went wrong, for the failure message


@dataclass
class Load:
    """Deployments created in ``namespace`` every ``interval`` seconds, on a thread, until ``stop()``."""

    create: Callable[[dict[str, Any]], dict[str, Any]]  # sends one create; raises ApiException or OSError
    interval: float = 0.2
    attempts: list[Attempt] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Load:
        self._thread = threading.Thread(target=self._run, name="steady-creates", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Attempt]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
        return list(self.attempts)

    def _run(self) -> None:
        tick = time.monotonic()
        while not self._stop.is_set():
            self.attempts.append(self._one())
            tick += self.interval
            self._stop.wait(max(0.0, tick - time.monotonic()))

    def _one(self) -> Attempt:
        from kubernetes.client.exceptions import ApiException

        obj = workload("Deployment", f"steady-{uuid.uuid4().hex[:10]}")
        sent = time.monotonic()
        try:
            created = self.create(obj)
        except ApiException as exc:
            return Attempt(sent, time.monotonic(), int(exc.status or 0), False, f"{exc.status} {exc.reason}: {exc.body}")
        except Exception as exc:  # noqa: BLE001 - no answer at all: refused, reset, timed out
            return Attempt(sent, time.monotonic(), 0, False, f"{type(exc).__name__}: {exc}")
        return Attempt(sent, time.monotonic(), 201, placed(created))


def summary(attempts: list[Attempt]) -> str:
    """``sent N, answered M (201: a, ...), mutated K``."""
    by_status: dict[int, int] = {}
    for attempt in attempts:
        by_status[attempt.status] = by_status.get(attempt.status, 0) + 1
    answered = sum(n for status, n in by_status.items() if status)
    statuses = ", ".join(f"{status or 'no answer'}: {n}" for status, n in sorted(by_status.items()))
    return f"sent {len(attempts)}, answered {answered} ({statuses}), mutated {sum(a.mutated for a in attempts)}"
