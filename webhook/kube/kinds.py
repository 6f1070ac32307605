"""Where each workload kind keeps its pod spec, pod labels, selector and rollout (docs/policies.md, "Workload kinds").

A ``Target`` says where to write; it holds no behaviour of its own beyond reading and
creating the containers at those paths. More kinds come from a configuration file
(``kinds:`` list) without code changes.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.kube import pointers

Path_ = pointers.Path

# Labels that change on every revision or are stamped by controllers: selecting on them
# would make replicas of one workload stop repelling each other after a rollout.
VOLATILE_LABELS = frozenset(
    {
        "pod-template-hash",
        "controller-revision-hash",
        "statefulset.kubernetes.io/pod-name",
        "apps.kubernetes.io/pod-index",
        "batch.kubernetes.io/controller-uid",
        "batch.kubernetes.io/job-name",
        "controller-uid",
        "job-name",
        "kubevirt.io/created-by",
        "kubevirt.io/nodeName",
        "kubevirt.io/migrationTargetNodeName",
        "vm.kubevirt.io/name",
        "kubevirt.io/vmpool",
    }
)


@dataclass(frozen=True, slots=True)
class Target:
    """A workload kind the engine can place, and the paths that matter for it."""

    group: str
    version: str
    kind: str
    pod_spec: Path_ | None  # None: the kind has a native scheduling API (Wukong)
    pod_labels: Path_
    selector: Path_ | None = None  # the LabelSelector object, e.g. ("spec", "selector")
    rollout: Path_ | None = None  # Deployment strategy
    kubevirt: bool = False  # KubeVirt kinds accept vm.evictionStrategy
    native: str | None = None  # name of a native writer ("wukong")
    self_spread: bool = True  # DaemonSets run one pod per node by construction
    # Pods and VMIs cannot change placement once created: the API server rejects spec
    # updates to affinity, nodeSelector and the like, so an UPDATE patch would make the
    # user's own update (a label change, say) fail validation.
    mutable_placement: bool = True
    # Pods reach webhooks after the Priority admission plugin has filled in spec.priority and
    # spec.preemptionPolicy (plugin/pkg/admission/priority, which runs before
    # MutatingAdmissionWebhook); those values are not the author's.
    priority_defaulted: bool = False
    # A Job's pod template cannot change after creation, but for its scheduling directives
    # while the Job is suspended and has never started (pkg/registry/batch/job/strategy.go).
    frozen_template: bool = False
    # Whether a change of the pod template replaces running pods: a Deployment creates a
    # ReplicaSet for it, a StatefulSet or DaemonSet rolls its pods, a VirtualMachine asks for
    # a restart (or migrates, under KubeVirt's LiveUpdate). A ReplicaSet, a
    # VirtualMachineInstanceReplicaSet, a Job or a CronJob only stamps its next pods from it.
    # Declared kinds are taken to roll: the cautious answer.
    template_rolls: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def pod_metadata(self) -> Path_:
        return self.pod_labels[:-1]

    def describe(self) -> str:
        return f"{self.api_version}/{self.kind}"


def _builtin() -> list[Target]:
    tmpl = ("spec", "template")
    pod = tmpl + ("spec",)
    labels = tmpl + ("metadata", "labels")
    sel = ("spec", "selector")
    vm_pod = ("spec", "virtualMachineTemplate", "spec", "template")
    return [
        Target("apps", "v1", "Deployment", pod, labels, sel, rollout=("spec", "strategy")),
        Target("apps", "v1", "StatefulSet", pod, labels, sel),
        Target("apps", "v1", "ReplicaSet", pod, labels, sel, template_rolls=False),
        Target("apps", "v1", "DaemonSet", pod, labels, sel, self_spread=False),
        Target("batch", "v1", "Job", pod, labels, sel, frozen_template=True, template_rolls=False),
        Target(
            "batch",
            "v1",
            "CronJob",
            ("spec", "jobTemplate", "spec", "template", "spec"),
            ("spec", "jobTemplate", "spec", "template", "metadata", "labels"),
            template_rolls=False,
        ),
        Target("", "v1", "Pod", ("spec",), ("metadata", "labels"), mutable_placement=False, priority_defaulted=True),
        Target("kubevirt.io", "v1", "VirtualMachine", pod, labels, kubevirt=True),
        Target(
            "kubevirt.io",
            "v1",
            "VirtualMachineInstance",
            ("spec",),
            ("metadata", "labels"),
            kubevirt=True,
            mutable_placement=False,
        ),
        Target("kubevirt.io", "v1", "VirtualMachineInstanceReplicaSet", pod, labels, sel, kubevirt=True,
               template_rolls=False),
        Target(
            "pool.kubevirt.io",
            "v1alpha1",
            "VirtualMachinePool",
            vm_pod + ("spec",),
            vm_pod + ("metadata", "labels"),
            # No selector: a pool's spec.selector selects its VirtualMachines, not their pods,
            # so self anti-affinity selects on the pod-template labels instead.
            kubevirt=True,
        ),
        Target("vm.novasphere.dev", "v1alpha1", "Wukong", None, ("metadata", "labels"), native="wukong"),
    ]


class KindConfigError(ValueError):
    """The kinds configuration file is malformed."""


@dataclass(frozen=True)
class Targets:
    """The registry of kinds the engine handles, looked up by API group and kind.

    Versions of one group/kind are the same resource to the engine (as with the webhook's
    ``matchPolicy: Equivalent``): ``kubevirt.io/v1alpha3`` VMs are placed like ``v1`` ones.
    """

    targets: tuple[Target, ...]
    _by_gk: Mapping[tuple[str, str], Target] = field(init=False, repr=False, compare=False)
    _by_kind: Mapping[str, tuple[Target, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_gk: dict[tuple[str, str], Target] = {}
        by_kind: dict[str, list[Target]] = {}
        for t in self.targets:
            by_gk[(t.group, t.kind)] = t
            by_kind.setdefault(t.kind, []).append(t)
        object.__setattr__(self, "_by_gk", by_gk)
        object.__setattr__(self, "_by_kind", {k: tuple(v) for k, v in by_kind.items()})

    def __iter__(self) -> Iterator[Target]:
        return iter(self.targets)

    def lookup(self, group: str, kind: str) -> Target | None:
        return self._by_gk.get((group, kind))

    def for_object(self, obj: Mapping[str, Any]) -> Target | None:
        group, _version = split_api_version(str(obj.get("apiVersion") or ""))
        return self.lookup(group, str(obj.get("kind") or ""))

    def with_kind(self, kind: str) -> tuple[Target, ...]:
        """Targets whose kind is ``kind``, in any group (for short kind names in policies)."""
        return self._by_kind.get(kind, ())

    def resolve(self, ref: str) -> tuple[Target, ...]:
        """Targets a kind reference names (``refers_to``)."""
        return tuple(t for t in self.targets if refers_to(ref, t))

    def extended(self, extra: Iterable[Target]) -> Targets:
        merged = {(t.group, t.kind): t for t in self.targets}
        for t in extra:
            merged[(t.group, t.kind)] = t
        return Targets(tuple(merged.values()))


def _looks_like_version(s: str) -> bool:
    return s.startswith("v") and s[1:2].isdigit()


def refers_to(ref: str, target: Target) -> bool:
    """Whether a kind reference names ``target``: ``Kind``, ``group/Kind``, ``group/version/Kind``,
    or ``version/Kind`` for the core group (``v1/Pod``). Versions of one group and kind are the
    same resource (as with the webhook's ``matchPolicy: Equivalent``), so a version never
    narrows what a reference names."""
    parts = ref.split("/")
    if parts[-1] != target.kind or len(parts) > 3:
        return False
    if len(parts) == 1:
        return True
    if len(parts) == 2 and _looks_like_version(parts[0]):
        return target.group == ""
    return parts[0] == target.group


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` -> (``apps``, ``v1``); ``v1`` -> (``""``, ``v1``)."""
    group, sep, version = api_version.rpartition("/")
    return (group, version) if sep else ("", api_version)


BUILTIN = Targets(tuple(_builtin()))


def load_kinds_config(path: str | Path) -> Targets:
    """The built-in kinds plus the ``kinds:`` declared in a server configuration file.

    ```yaml
    kinds:
    - group: example.com
      version: v1
      kind: Widget
      podSpecPath: /spec/template/spec
      podLabelsPath: /spec/template/metadata/labels
      selectorPath: /spec/selector        # optional
    ```
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KindConfigError(f"{path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("kinds", []), list):
        raise KindConfigError(f"{path}: expected a mapping with a 'kinds' list")
    allowed = {"group", "version", "kind", "podSpecPath", "podLabelsPath", "selectorPath", "rolloutPath"}
    extra: list[Target] = []
    for i, entry in enumerate(data.get("kinds", [])):
        where = f"{path}: kinds[{i}]"
        if not isinstance(entry, dict):
            raise KindConfigError(f"{where}: expected a mapping")
        unknown = set(entry) - allowed
        if unknown:
            raise KindConfigError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        for req in ("version", "kind", "podSpecPath", "podLabelsPath"):
            if not entry.get(req):
                raise KindConfigError(f"{where}.{req}: required")
        try:
            extra.append(
                Target(
                    group=str(entry.get("group") or ""),
                    version=str(entry["version"]),
                    kind=str(entry["kind"]),
                    pod_spec=pointers.to_path(entry["podSpecPath"]),
                    pod_labels=pointers.to_path(entry["podLabelsPath"]),
                    selector=pointers.to_path(entry["selectorPath"]) if entry.get("selectorPath") else None,
                    rollout=pointers.to_path(entry["rolloutPath"]) if entry.get("rolloutPath") else None,
                )
            )
        except ValueError as exc:
            raise KindConfigError(f"{where}: {exc}") from exc
    return BUILTIN.extended(extra)
