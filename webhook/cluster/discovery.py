"""What the API server serves, asked where a group-version differs by release: the Eviction
that ``pods/eviction`` takes (policy/v1 from 1.22) and the PodDisruptionBudget group-version
(policy/v1 from 1.21, policy/v1beta1 until 1.25). A body or a path naming a version the server
does not serve is refused, so these are asked, not guessed from the server's version.
"""
from __future__ import annotations

from collections.abc import Mapping

from .client import ApiError, Client

__all__ = ["EVICTION_FALLBACK", "eviction_version", "pdb_group_version"]

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
