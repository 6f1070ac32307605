"""Policy hot reload: the policy set in force, reloaded from disk when its files change.

ConfigMap volumes give no reliable change events: the kubelet writes a new hidden
``..<timestamp>`` folder and swaps the ``..data`` symlink that every visible file points
through. So the files are polled and compared by the digest of their names and contents;
a swapped symlink changes the content read through it. A broken change never replaces the
set in force: a broken file never half-loads.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from webhook.kube.kinds import BUILTIN, Targets
from webhook.policy import loader
from webhook.policy.policyset import PolicySet


class PolicySource:
    """The loaded policy set and the errors of the last broken change, if any."""

    def __init__(self, paths: Iterable[str | Path], *, targets: Targets = BUILTIN) -> None:
        self.paths = [Path(p) for p in paths]
        self.targets = targets
        self.loaded: loader.Loaded | None = None  # the set in force and where each policy came from
        self.policies: PolicySet | None = None  # None until a load succeeds
        self.errors: list[str] = []  # of the last failed load; empty once a load succeeds
        self._digest: str | None = None  # of the files behind ``policies``
        self._failed: str | None = None  # digest of the last broken state, reported once

    @property
    def ready(self) -> bool:
        return self.policies is not None

    def poll(self) -> bool | None:
        """Reload when the files changed: True loaded, False broken (set in force kept), None unchanged.

        Safe to run in a worker thread: the new set is published by one reference assignment.
        """
        digest = self.digest()
        if digest == self._digest:
            self._failed, self.errors = None, []  # back to the files in force
            return None
        if digest == self._failed:
            return None
        try:
            loaded = loader.load_with_sources(self.paths, targets=self.targets)
        except loader.PolicyLoadError as exc:
            return self._fail(digest, [str(e) for e in exc.errors] or [str(exc)])
        except OSError as exc:
            return self._fail(digest, [f"{exc.filename or ''}: {exc.strerror or exc}"])
        if self.digest() != digest:
            # Files changed while they were read: the set may mix old and new files.
            return None
        self.loaded, self.policies = loaded, loaded.policies
        self._digest, self._failed, self.errors = digest, None, []
        return True

    def _fail(self, digest: str, errors: list[str]) -> bool:
        self._failed, self.errors = digest, errors
        return False

    def digest(self) -> str:
        """A hash of the policy files' names and contents (what a change must alter)."""
        h = hashlib.sha256()
        for path in self.paths:
            h.update(f"{path}\0{'dir' if path.is_dir() else 'file' if path.exists() else 'missing'}\0".encode())
        try:
            files = loader.policy_files(self.paths)
        except OSError as exc:
            h.update(f"unreadable {exc}".encode())
            return h.hexdigest()
        for file in files:
            h.update(str(file).encode() + b"\0")
            try:
                h.update(file.read_bytes())
            except OSError as exc:  # removed between listing and reading: a change anyway
                h.update(f"unreadable {exc}".encode())
            h.update(b"\0")
        return h.hexdigest()

