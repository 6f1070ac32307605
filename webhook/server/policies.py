"""The policy set the server serves: from policy files, from the cluster's PlacementPolicy
objects, or from both (``serve --policies-from``).

Files are polled and loaded whole (``reload.PolicySource``: a broken change keeps the files' last
good set). Objects come from an informer on ``placementpolicies`` in the cluster view's cache and
are validated one by one through the same loader (``policy.sources``): an object the loader
refuses is left out and reported, a name defined by a file and by an object is an error for that
name, and every other policy serves. A change of either source assembles the set again; a burst
of object edits costs one assembly (``follow``: it waits until the objects have been quiet for
``QUIET`` seconds, and never longer than ``LONGEST`` after the first change), so an edit is in
force well within two seconds on a quiet cluster.

The server counts, per object, the reviews in which the policy changed the object (from
admission's outcome; dry runs change nothing stored and are not counted), from the generation it
was loaded at: the status writer (``server.status``) reports it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from webhook import API_GROUP, API_VERSION, POLICY_KIND
from webhook.kube.kinds import BUILTIN, Targets
from webhook.policy import crd
from webhook.policy.loader import Loaded
from webhook.policy.policyset import PolicySet
from webhook.policy.sources import Assembled, LeftOut, Memo, assemble
from webhook.server.reload import PolicySource

__all__ = ["CLUSTER", "FILES", "INFORMER", "LONGEST", "PATH", "QUIET", "SOURCES", "PolicySources",
           "definition_changed", "follow", "project"]

log = logging.getLogger(__name__)

FILES, CLUSTER = "files", "cluster"
SOURCES = (FILES, CLUSTER)
INFORMER = crd.PLURAL  # the informer's name in the cluster view's cache
PATH = f"/apis/{API_GROUP}/{crd.VERSION}/{crd.PLURAL}"
QUIET = 0.2  # seconds without an object change before the set is assembled
LONGEST = 1.0  # seconds from the first change of a burst to its assembly, however long the burst


def project(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the server keeps of a PlacementPolicy: its name and generation (the rest of its
    metadata is the API server's), its spec, and its status (to write only what changes). The
    resource serves one kind: apiVersion and kind are its own, whether an item carries them or not."""
    meta = obj.get("metadata") or {}
    kept: dict[str, Any] = {"apiVersion": API_VERSION, "kind": POLICY_KIND,
                            "metadata": {"name": meta.get("name"), "generation": meta.get("generation")}}
    for part in ("spec", "status"):
        if part in obj:
            kept[part] = obj[part]
    return kept


def definition_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether a change of the object is one the set must see (anything but its status)."""
    def definition(obj: Mapping[str, Any] | None) -> Any:
        return None if obj is None else {k: v for k, v in obj.items() if k != "status"}

    return definition(old) != definition(new)


class PolicySources:
    """The set in force, assembled from the files' last good set and the cluster's objects.

    ``poll_files`` and ``assemble`` run in a worker thread (validating a large set takes a
    while), one at a time (the caller holds a lock); the set is published by one assignment.
    """

    def __init__(self, paths: Iterable[Any], *, sources: Iterable[str] = (FILES,), targets: Targets = BUILTIN) -> None:
        chosen = tuple(sources)
        self.targets = targets
        self.files = PolicySource(paths, targets=targets) if FILES in chosen else None
        self.cluster = CLUSTER in chosen
        self.assembled: Assembled | None = None
        self.objects_listed = False  # the first list of objects has been assembled
        self._objects: Sequence[Mapping[str, Any]] = ()  # the objects last assembled
        self._memo = Memo()
        self._changed: Counter[str] = Counter()  # reviews each object's policy changed an object in
        self._counted: dict[str, int] = {}  # the generation each count started at

    # -- what the server reads --
    @property
    def policies(self) -> PolicySet | None:
        return self.assembled.policies if self.assembled is not None else None

    @property
    def ready(self) -> bool:
        return self.assembled is not None

    @property
    def errors(self) -> list[str]:
        """The errors of the files' last failed load (empty once a load succeeds)."""
        return self.files.errors if self.files is not None else []

    def left_out(self) -> Mapping[str, LeftOut]:
        return self.assembled.left_out if self.assembled is not None else {}

    # -- loading --
    def poll_files(self) -> bool | None:
        """Poll the files (``PolicySource.poll``): True a new file set, False a broken change, None
        unchanged or no files."""
        return self.files.poll() if self.files is not None else None

    def can_assemble(self) -> bool:
        """Whether the files (when they are a source) ever loaded: until then the set is unknown,
        whatever the objects say, and the server is not ready."""
        return self.files is None or self.files.loaded is not None

    def remember(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """The objects listed, kept for the first assembly the files allow."""
        self._objects = objects
        self.objects_listed = True

    def assemble(self, objects: Sequence[Mapping[str, Any]] | None) -> Assembled:
        """Assemble the set from the files' last good set and ``objects`` (None: keep the objects
        last assembled, as a file change does). Safe in a worker thread: nothing the server reads
        changes until ``publish``."""
        files = self.files.loaded if self.files is not None else None
        if objects is not None:
            self.remember(objects)
        if not self.cluster:
            return Assembled(files if files is not None else _empty(self.targets))
        return assemble(files, self._objects, targets=self.targets, on_duplicate="error", memo=self._memo)

    def publish(self, assembled: Assembled) -> None:
        """Serve ``assembled`` from now on (on the event loop, where reviews are counted)."""
        self._restart_counts(assembled.generations)
        self.assembled = assembled

    # -- counting --
    def count(self, applied: Iterable[str]) -> None:
        """One review in which each policy of ``applied`` changed the object."""
        for name in applied:
            if name in self._counted:
                self._changed[name] += 1

    def changed_objects(self, name: str, at_generation: int) -> int:
        """How many objects the policy ``name`` changed since generation ``at_generation`` was loaded."""
        return self._changed[name] if self._counted.get(name) == at_generation else 0

    def _restart_counts(self, generations: Mapping[str, int]) -> None:
        for name in list(self._counted):
            if generations.get(name) != self._counted[name]:
                del self._counted[name]
                self._changed.pop(name, None)
        for name, at in generations.items():
            self._counted.setdefault(name, at)


def _empty(targets: Targets) -> Loaded:
    return Loaded(PolicySet(targets=targets), {}, {})


async def follow(changes: asyncio.Event, assemble: Callable[[], Awaitable[None]], *, quiet: float = QUIET,
                 longest: float = LONGEST, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Call ``assemble`` after each burst of ``changes``: once they have been quiet for ``quiet``
    seconds, or ``longest`` seconds after the first, whichever comes first. Runs until cancelled;
    a failing assembly is logged and the next change tries again."""
    while True:
        await changes.wait()
        first = clock()
        changes.clear()
        while True:
            left = longest - (clock() - first)
            if left <= 0:
                break
            await sleep(min(quiet, left))
            if not changes.is_set():
                break
            changes.clear()
        try:
            await assemble()
        except Exception:  # noqa: BLE001 - the set in force keeps serving; the next change retries
            log.exception("assembling the policy set failed; the set in force keeps serving")
