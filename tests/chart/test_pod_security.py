"""The webhook pod passes the Pod Security Standards "restricted" level.

The checks follow https://kubernetes.io/docs/concepts/security/pod-security-standards/ (baseline
controls plus the restricted ones) as Pod Security admission applies them to a pod template.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

# Volume types the restricted level allows; everything else (hostPath first) is refused.
ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
ALLOWED_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                   "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range"}


def _containers(pod: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from pod.get(key) or []


def _effective(pod: dict[str, Any], container: dict[str, Any], field: str) -> Any:
    """A container's security setting, falling back to the pod's as the kubelet does."""
    value = (container.get("securityContext") or {}).get(field)
    return value if value is not None else (pod.get("securityContext") or {}).get(field)


def _pod_level(pod: dict[str, Any]) -> Iterator[str]:
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            yield f"{flag} is set"
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            yield f"volume {volume['name']} uses {sorted(kinds - ALLOWED_VOLUMES)}"
    for sysctl in (pod.get("securityContext") or {}).get("sysctls") or []:
        if sysctl["name"] not in ALLOWED_SYSCTLS:
            yield f"sysctl {sysctl['name']}"
    if (pod.get("securityContext") or {}).get("runAsUser") == 0:
        yield "pod runs as UID 0"


def _container_level(pod: dict[str, Any], container: dict[str, Any]) -> Iterator[str]:
    name = container["name"]
    context = container.get("securityContext") or {}
    if context.get("privileged"):
        yield f"{name}: privileged"
    if context.get("allowPrivilegeEscalation") is not False:
        yield f"{name}: allowPrivilegeEscalation must be false"
    capabilities = context.get("capabilities") or {}
    if "ALL" not in (capabilities.get("drop") or []):
        yield f"{name}: capabilities must drop ALL"
    if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
        yield f"{name}: adds capabilities {capabilities['add']}"
    if _effective(pod, container, "runAsNonRoot") is not True:
        yield f"{name}: runAsNonRoot must be true"
    if _effective(pod, container, "runAsUser") == 0:
        yield f"{name}: runs as UID 0"
    seccomp = (_effective(pod, container, "seccompProfile") or {}).get("type")
    if seccomp not in {"RuntimeDefault", "Localhost"}:
        yield f"{name}: seccompProfile must be RuntimeDefault or Localhost, is {seccomp}"
    if any(port.get("hostPort") for port in container.get("ports") or []):
        yield f"{name}: hostPort"
    if context.get("procMount") not in (None, "Default"):
        yield f"{name}: procMount {context['procMount']}"


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Why Pod Security admission at the restricted level would refuse this pod spec (empty: it passes)."""
    found = list(_pod_level(pod))
    for container in _containers(pod):
        found.extend(_container_level(pod, container))
    return found


def test_the_webhook_pod_passes_the_restricted_profile(each_mode: Any) -> None:
    _mode, rendered = each_mode
    assert restricted_violations(rendered.pod_spec) == []


def test_the_root_filesystem_is_read_only_and_scratch_space_is_a_volume(default: Any) -> None:
    assert default.container["securityContext"]["readOnlyRootFilesystem"] is True
    assert "/tmp" in {m["mountPath"] for m in default.container["volumeMounts"]}


def test_the_pod_runs_as_the_image_non_root_uid(default: Any) -> None:
    context = default.pod_spec["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (65532, 65532)


@pytest.mark.parametrize(
    ("change", "violation"),
    [
        ({"hostNetwork": True}, "hostNetwork is set"),
        ({"volumes": [{"name": "host", "hostPath": {"path": "/"}}]}, "volume host uses ['hostPath']"),
        ({"securityContext": {"runAsNonRoot": True, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}}, "pod runs as UID 0"),
        ({"containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "privileged": True}}]}, "c: privileged"),
        ({"containers": [{"name": "c", "securityContext": {"capabilities": {"drop": ["ALL"]}}}]}, "c: allowPrivilegeEscalation must be false"),
        ({"containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False}}]}, "c: capabilities must drop ALL"),
        ({"containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}}}]}, "c: adds capabilities ['NET_ADMIN']"),
        ({"securityContext": {"seccompProfile": {"type": "Unconfined"}, "runAsNonRoot": True}}, "c: seccompProfile must be RuntimeDefault or Localhost, is Unconfined"),
        ({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}, "c: runAsNonRoot must be true"),
        ({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}], "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}, "c: hostPort"),
    ],
)
def test_the_checker_catches(change: dict[str, Any], violation: str) -> None:
    pod: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    }
    assert restricted_violations(pod) == []
    pod.update(change)
    assert violation in restricted_violations(pod)


def test_overriding_the_security_context_to_something_unsafe_is_visible(render: Callable[..., Any]) -> None:
    rendered = render({"securityContext": {"allowPrivilegeEscalation": True}})
    assert "webhook: allowPrivilegeEscalation must be false" in restricted_violations(rendered.pod_spec)
