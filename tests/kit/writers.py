"""Replicas of a writer (``spot-controller``, ``label-nodes``) on one Lease, killed mid-work, and
what the API server says they did: the Lease's record and the audit log.

Each replica runs as a user runs it, ``python -m webhook COMMAND --leader-elect ...`` in its own
process, with a kubeconfig of its own user (``USERS``: the fault tier's control plane gives each
a token in ``system:masters``), so the audit log names the replica behind every request.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.kit.envtest import ROOT, ControlPlane, Process, raw_json
from webhook.kube.times import parse_time
from webhook.runtime.leader import JITTER_FACTOR

# The users the replicas run as; the tier's ControlPlane must be made with ``users=USERS``.
USERS = ("writer-a", "writer-b")
ADMIN = "envtest-admin"  # the test itself, its kubelets and kube-controller-manager
_ATTEMPTING = re.compile(r"attempting to acquire leader lease \S+ as (\S+?)\.\.\.$")


@dataclass(frozen=True)
class Timings:
    """client-go's leader-election timings, in seconds (``--lease-duration`` and the rest)."""

    lease_duration: float
    renew_deadline: float
    retry_period: float

    def flags(self) -> list[str]:
        return [f"--lease-duration={self.lease_duration}", f"--renew-deadline={self.renew_deadline}",
                f"--retry-period={self.retry_period}"]

    @property
    def takeover_bound(self) -> float:
        """The latest a candidate takes over, counted from the dead leader's last renewal.

        A candidate tries every RetryPeriod stretched by up to JitterFactor (``wait.JitterUntil``
        in client-go's ``acquire``). It judges the lease on its own clock from the moment it
        SAW the record change (``observedTime``), which is its first try after the renewal: up
        to one jittered period late; the lease is valid for LeaseDuration from then; and the
        try that takes it is up to one jittered period after that. Round trips come on top."""
        return self.lease_duration + 2 * (1 + JITTER_FACTOR) * self.retry_period


@dataclass
class Replica:
    """One replica's process, the user it acts as, and what its log says."""

    user: str
    process: Process

    def log_lines(self) -> list[dict[str, Any]]:
        """Its JSON log lines (anything else it printed is left out)."""
        text = self.process.log.read_text(errors="replace") if self.process.log.exists() else ""
        lines = []
        for line in text.splitlines():
            if line.startswith("{"):
                try:
                    lines.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return lines

    def identity(self) -> str | None:
        """Its lock identity, once it has said it is trying to acquire the Lease."""
        for line in self.log_lines():
            found = _ATTEMPTING.search(str(line.get("msg") or ""))
            if found:
                return found[1]
        return None

    def logged(self, msg: str) -> list[dict[str, Any]]:
        return [line for line in self.log_lines() if line.get("msg") == msg]

    def kill(self) -> None:
        """SIGKILL: no release of the Lease, no last words."""
        popen = self.process.popen
        if popen is not None and popen.poll() is None:
            popen.kill()
            popen.wait(10)


def start_replicas(control_plane: ControlPlane, workdir: Path, command: str, *, lease: tuple[str, str],
                   timings: Timings, args: Iterable[str] = ()) -> list[Replica]:
    """One replica of ``command`` per user in ``USERS``, all on the Lease ``(namespace, name)``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_WEBHOOK_")}
    env["PYTHONPATH"] = str(ROOT)
    namespace, name = lease
    replicas = []
    for user in USERS:
        kubeconfig = control_plane.write_kubeconfig(workdir / f"{command}-{user}.kubeconfig", user=user)
        process = Process(f"{command} as {user}", [
            sys.executable, "-m", "webhook", command, f"--kubeconfig={kubeconfig}", "--leader-elect",
            f"--lease-namespace={namespace}", f"--lease-name={name}", *timings.flags(), "--metrics-port=0",
            *args], workdir / f"{command}-{user}.log", env=env)
        process.start()
        replicas.append(Replica(user, process))
    return replicas


def tails(replicas: Iterable[Replica], lines: int = 30) -> str:
    return "".join(f"\n--- {r.process.name} (running: {r.process.running()}):\n{r.process.tail(lines)}"
                   for r in replicas)


# --- the Lease ------------------------------------------------------------------------------------


def read_lease(api_client: Any, namespace: str, name: str) -> dict[str, Any]:
    """The Lease's spec ({} while it does not exist)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        lease = raw_json(client.CoordinationV1Api(api_client).read_namespaced_lease(name, namespace,
                                                                                     _preload_content=False))
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    return dict(lease.get("spec") or {})


def seconds(value: Any) -> float:
    """A MicroTime or Time (``renewTime``, an audit timestamp) as Unix seconds."""
    when = parse_time(value)
    if when is None:
        raise ValueError(f"not a time: {value!r}")
    return when.timestamp()


def utc(unix: float) -> str:
    return datetime.datetime.fromtimestamp(unix, datetime.UTC).isoformat(timespec="milliseconds")


# --- the audit log --------------------------------------------------------------------------------


@dataclass
class AuditTail:
    """The audit log's events, read as the API server appends them (a partial last line waits)."""

    path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    offset: int = 0

    def read(self) -> list[dict[str, Any]]:
        """The events written since the last read (also kept in ``events``)."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as log:
            log.seek(self.offset)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        new = [json.loads(line) for line in complete.splitlines() if line.strip()]
        self.events.extend(new)
        return new


def answered(event: Mapping[str, Any]) -> bool:
    """The event of a request's answer (an Eviction is also logged when received)."""
    return event.get("stage") == "ResponseComplete"


def user(event: Mapping[str, Any]) -> str:
    return str((event.get("user") or {}).get("username") or "")


def code(event: Mapping[str, Any]) -> int:
    return int((event.get("responseStatus") or {}).get("code") or 0)


def ref(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return event.get("objectRef") or {}


def at(event: Mapping[str, Any]) -> float:
    """When the API server received the request (Unix seconds)."""
    return seconds(event.get("requestReceivedTimestamp"))


def evictions(events: Iterable[Mapping[str, Any]], namespace: str) -> list[Mapping[str, Any]]:
    """Every Eviction answered (``POST pods/NAME/eviction``) in ``namespace``, whatever the answer."""
    return [e for e in events if answered(e) and e.get("verb") == "create" and ref(e).get("resource") == "pods"
            and ref(e).get("subresource") == "eviction" and ref(e).get("namespace") == namespace]


def evicted(events: Iterable[Mapping[str, Any]], namespace: str) -> Counter[str]:
    """Per pod, the Evictions the API server carried out (201: the pod was deleted gracefully)."""
    return Counter(str(ref(e).get("name")) for e in evictions(events, namespace) if code(e) == 201)


def pod_deletes(events: Iterable[Mapping[str, Any]], namespace: str) -> list[Mapping[str, Any]]:
    """Every ``DELETE`` of a pod (or of the namespace's pods at once) in ``namespace``."""
    return [e for e in events if answered(e) and e.get("verb") in ("delete", "deletecollection")
            and ref(e).get("resource") == "pods"
            and not ref(e).get("subresource") and ref(e).get("namespace") == namespace]


def node_patches(events: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> list[Mapping[str, Any]]:
    """The successful patches of ``nodes``, with their bodies (the policy logs node patches at
    the Request level)."""
    names = set(nodes)
    return [e for e in events if answered(e) and e.get("verb") == "patch" and ref(e).get("resource") == "nodes"
            and not ref(e).get("subresource") and ref(e).get("name") in names and code(e) == 200]


def by(events: Iterable[Mapping[str, Any]], *users: str) -> list[Mapping[str, Any]]:
    return [e for e in events if user(e) in users]


def unanswered(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The requests received and not answered yet: the API server still acts on them, whether
    or not their sender is alive (it stops at the next step that checks the request's context)."""
    events = list(events)
    done = {e.get("auditID") for e in events if answered(e)}
    return [e for e in events if e.get("stage") == "RequestReceived" and e.get("auditID") not in done]
