"""What the API server serves, asked where a group-version differs by release: the Eviction
that ``pods/eviction`` takes (policy/v1 from 1.22), the PodDisruptionBudget group-version
(policy/v1 from 1.21, policy/v1beta1 until 1.25), and where a workload kind is listed
(``served_kinds``: CronJob in batch/v1beta1 on 1.20, batch/v1 from 1.21; a custom kind only
while its CRD is installed). A body or a path naming a version the server does not serve is
refused, so these are asked, not guessed from the server's version.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .client import ApiError, Client

__all__ = ["EVICTION_FALLBACK", "ServedKind", "Unlisted", "eviction_version", "pdb_group_version", "served_kinds"]

NOT_SERVED = "not served by the API server"
# The Eviction version to name when discovery does not answer: the one every supported server accepts.
EVICTION_FALLBACK = "policy/v1beta1"


async def eviction_version(client: Client) -> str:
    """The Eviction group-version ``pods/eviction`` takes, from discovery of /api/v1: policy/v1
    from 1.22, policy/v1beta1 before (a body naming a version not served is a 400)."""
    try:
        resources = await client.get("/api/v1")
    except Exception:  # noqa: BLE001 - fall back to the version every supported server accepts
        return EVICTION_FALLBACK
    for resource in resources.get("resources") or ():
        if resource.get("name") == "pods/eviction" and resource.get("group") and resource.get("version"):
            return f"{resource['group']}/{resource['version']}"
    return EVICTION_FALLBACK


async def pdb_group_version(client: Client) -> str | None:
    """``policy/v1`` when served (v1.21 on), else ``policy/v1beta1`` (removed in v1.25); None
    when the server serves neither (nothing to read)."""
    try:
        group = await client.get("/apis/policy")
    except ApiError as exc:
        if exc.status == 404:  # no policy group at all
            return None
        raise
    served = {str(v.get("groupVersion")) for v in group.get("versions") or () if isinstance(v, Mapping)}
    return next((gv for gv in ("policy/v1", "policy/v1beta1") if gv in served), None)


@dataclass(frozen=True)
class ServedKind:
    """Where the API server lists a kind: its group-version and resource (the plural)."""

    group: str
    version: str
    kind: str
    resource: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The cluster-wide collection (every namespace's objects, as ``kubectl get -A`` lists)."""
        return f"/apis/{self.api_version}/{self.resource}" if self.group else f"/api/{self.version}/{self.resource}"

    def shown(self) -> str:
        """``cronjobs.batch``: the resource as RBAC and the API server's messages name it."""
        return f"{self.resource}.{self.group}" if self.group else self.resource


@dataclass(frozen=True)
class Unlisted:
    """A kind that was asked for and not listed, and why: ``refused`` when the API server refused
    a request about it (RBAC, an aggregated API that is down), else it does not serve the kind
    (its CRD is not installed, so no object of it can exist)."""

    group: str
    kind: str
    reason: str
    refused: bool = False

    def shown(self) -> str:
        """``batch/CronJob``, ``Pod``: the kind as a policy's ``match.kinds`` names it."""
        return f"{self.group}/{self.kind}" if self.group else self.kind


async def served_kinds(client: Client, wanted: Iterable[tuple[str, str, str]]) -> list[ServedKind | Unlisted]:
    """For each (group, kind, version) of ``wanted``, where the server lists it, as
    ``kubectl api-resources`` finds it: the group's served versions from ``GET /apis`` (the core
    group's from ``GET /api``), tried in the order ``version`` (the one asked for), the group's
    preferred version, then the others as the server lists them; in each, the resource of that
    kind with the ``list`` verb (no subresource) from ``GET /apis/{group}/{version}``. A 1.20
    server serves batch/v1 for Jobs only, so CronJob is found in batch/v1beta1 there.

    A group not served, or a kind none of its versions lists, is ``Unlisted`` (its CRD is not
    installed); so is a group-version whose document the server refuses (403, or 503 from an
    aggregated API that is down), with the reason and ``refused``. A transport failure raises,
    for the caller to retry."""
    asked = list(wanted)
    groups = await _groups(client, {group for group, _kind, _version in asked})
    documents: dict[str, list[Mapping[str, Any]] | str] = {}
    out: list[ServedKind | Unlisted] = []
    for group, kind, version in asked:
        versions = groups.get(group)
        if not versions:
            out.append(Unlisted(group, kind, NOT_SERVED))
            continue
        out.append(await _find(client, group, kind, _ordered(versions, version), documents))
    return out


async def _groups(client: Client, wanted: set[str]) -> dict[str, list[str]]:
    """group -> its served versions, the preferred one first (``metav1.APIGroup``)."""
    found: dict[str, list[str]] = {}
    if "" in wanted:
        core = await client.get("/api")
        found[""] = [str(v) for v in core.get("versions") or ()]
    if wanted - {""}:
        listed = await client.get("/apis")
        for group in listed.get("groups") or ():
            name = str(group.get("name") or "")
            if name not in wanted:
                continue
            preferred = str((group.get("preferredVersion") or {}).get("version") or "")
            versions = [str(v.get("version")) for v in group.get("versions") or () if isinstance(v, Mapping)]
            found[name] = _ordered(versions, preferred)
    return found


def _ordered(versions: list[str], first: str) -> list[str]:
    return [first, *(v for v in versions if v != first)] if first in versions else versions


async def _find(client: Client, group: str, kind: str, versions: list[str],
                documents: dict[str, list[Mapping[str, Any]] | str]) -> ServedKind | Unlisted:
    refused = ""
    for version in versions:
        api_version = f"{group}/{version}" if group else version
        resources = await _resources(client, api_version, documents)
        if isinstance(resources, str):
            refused = refused or f"discovery of {api_version} failed: {resources}"
            continue
        for entry in resources:
            name = str(entry.get("name") or "")
            if entry.get("kind") == kind and "/" not in name and "list" in (entry.get("verbs") or ()):
                return ServedKind(group, version, kind, name, bool(entry.get("namespaced")))
    return Unlisted(group, kind, refused, refused=True) if refused else Unlisted(group, kind, NOT_SERVED)


async def _resources(client: Client, api_version: str,
                     documents: dict[str, list[Mapping[str, Any]] | str]) -> list[Mapping[str, Any]] | str:
    """The APIResourceList of one group-version (asked once per call of ``served_kinds``), or why
    the server refused it."""
    if api_version not in documents:
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        try:
            doc = await client.get(path)
            documents[api_version] = [r for r in doc.get("resources") or () if isinstance(r, Mapping)]
        except ApiError as exc:
            documents[api_version] = [] if exc.status == 404 else f"{exc.status} {exc.reason}".strip()
    return documents[api_version]
