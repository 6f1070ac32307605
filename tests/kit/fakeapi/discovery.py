"""The resources the fake serves, which group-versions a given server version serves, and the
discovery documents (/version, /api, /api/v1, /apis, /apis/{g}, /apis/{g}/{v}).

Version gating (what kube-apiserver serves by default):
  * policy/v1 PodDisruptionBudget: GA in 1.21 (KEP-85); policy/v1beta1 PDB removed in 1.25.
  * pods/eviction accepts policy/v1 Evictions from 1.22 (KEP-85 "Promote Eviction to policy/v1");
    pkg/registry/core/pod/storage/eviction.go AcceptsGroupVersion still accepts policy/v1beta1.
  * events.k8s.io/v1 from 1.19, coordination.k8s.io/v1 and scheduling.k8s.io/v1 from 1.14.
  * batch/v1 Job always; CronJob in batch/v1beta1 until 1.25 and in batch/v1 from 1.21 (KEP-19
    "Graduate CronJob to stable"): a 1.20 server serves batch/v1 without cronjobs.
  * the workload custom resources (KubeVirt's, Wukong) only when their CRDs are installed
    (``crds``), at the group-version their CRDs serve.
The shape of each APIResource entry (name, singularName, namespaced, group/version for
subresources of another group such as ``pods/eviction``, kind, verbs, shortNames, categories,
storageVersionHash) follows the /api/v1 document a real 1.2x server returns.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

CRUD = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")

META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class Resource:
    group: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = CRUD
    status: bool = False  # has a status subresource
    generation: bool = False  # PrepareForCreate sets metadata.generation = 1
    storage_hash: str = ""
    # the field labels the scheme's conversion func accepts; None = DefaultMetaV1FieldSelectorConversion
    field_labels: frozenset[str] | None = None
    storage: tuple[str, str] = ("", "")  # (group, plural) of the storage this version reads/writes
    list_kind: str = ""

    @property
    def storage_key(self) -> tuple[str, str]:
        return self.storage if self.storage[1] else (self.group, self.plural)


# pkg/apis/core/v1/conversion.go AddFieldLabelConversionFunc tables.
POD_FIELDS = frozenset({"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
                        "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
                        "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName",
                        "spec.host"})
NODE_FIELDS = frozenset({"metadata.name", "spec.unschedulable"})
NAMESPACE_FIELDS = frozenset({"metadata.name", "status.phase"})
EVENT_FIELDS = frozenset({"metadata.name", "metadata.namespace", "involvedObject.kind",
                          "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                          "involvedObject.apiVersion", "involvedObject.resourceVersion",
                          "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"})

PODS = Resource("", "pods", "pod", "Pod", True, ("po",), ("all",), status=True, storage_hash="xPOwRZ+Yhw8=",
                field_labels=POD_FIELDS)
NODES = Resource("", "nodes", "node", "Node", False, ("no",), status=True, storage_hash="XwShjMxG9Fs=",
                 field_labels=NODE_FIELDS)
NAMESPACES = Resource("", "namespaces", "namespace", "Namespace", False, ("ns",),
                      verbs=("create", "delete", "get", "list", "patch", "update", "watch"), status=True,
                      storage_hash="Q3oi5N2YM8M=", field_labels=NAMESPACE_FIELDS)
EVENTS = Resource("", "events", "event", "Event", True, ("ev",), storage_hash="r2yiGXH7wu8=",
                  field_labels=EVENT_FIELDS)
EVENTS_V1 = Resource("events.k8s.io", "events", "event", "Event", True, ("ev",), storage=("", "events"))
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "priorityclasses", "priorityclass", "PriorityClass", False,
                            ("pc",))
LEASES = Resource("coordination.k8s.io", "leases", "lease", "Lease", True)
PDBS = Resource("policy", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", True,
                ("pdb",), status=True, generation=True)
DEPLOYMENTS = Resource("apps", "deployments", "deployment", "Deployment", True, ("deploy",), ("all",),
                       status=True, generation=True)
REPLICASETS = Resource("apps", "replicasets", "replicaset", "ReplicaSet", True, ("rs",), ("all",),
                       status=True, generation=True)
STATEFULSETS = Resource("apps", "statefulsets", "statefulset", "StatefulSet", True, ("sts",), ("all",),
                        status=True, generation=True)
DAEMONSETS = Resource("apps", "daemonsets", "daemonset", "DaemonSet", True, ("ds",), ("all",),
                      status=True, generation=True)
JOBS = Resource("batch", "jobs", "job", "Job", True, (), ("all",), status=True, generation=True)
CRONJOBS = Resource("batch", "cronjobs", "cronjob", "CronJob", True, ("cj",), ("all",), status=True,
                    generation=True)
# Custom resources of the workload kinds the engine places (webhook/kube/kinds.py), as their CRDs
# declare them; served with ``crds`` naming their kinds.
VIRTUAL_MACHINES = Resource("kubevirt.io", "virtualmachines", "virtualmachine", "VirtualMachine", True,
                            ("vm", "vms"), ("all",), status=True, generation=True)
VIRTUAL_MACHINE_INSTANCES = Resource("kubevirt.io", "virtualmachineinstances", "virtualmachineinstance",
                                     "VirtualMachineInstance", True, ("vmi", "vmis"), ("all",), status=True,
                                     generation=True)
VMI_REPLICA_SETS = Resource("kubevirt.io", "virtualmachineinstancereplicasets", "virtualmachineinstancereplicaset",
                            "VirtualMachineInstanceReplicaSet", True, ("vmirs", "vmirss"), ("all",), status=True,
                            generation=True)
VM_POOLS = Resource("pool.kubevirt.io", "virtualmachinepools", "virtualmachinepool", "VirtualMachinePool", True,
                    ("vmpool", "vmpools"), ("all",), status=True, generation=True)
WUKONGS = Resource("vm.novasphere.dev", "wukongs", "wukong", "Wukong", True, status=True, generation=True)
WORKLOAD_CRDS = {"VirtualMachine": ("v1", VIRTUAL_MACHINES),
                 "VirtualMachineInstance": ("v1", VIRTUAL_MACHINE_INSTANCES),
                 "VirtualMachineInstanceReplicaSet": ("v1", VMI_REPLICA_SETS),
                 "VirtualMachinePool": ("v1alpha1", VM_POOLS),
                 "Wukong": ("v1alpha1", WUKONGS)}
# The chart's CustomResourceDefinition (webhook/policy/crd.py): cluster-scoped, with a status
# subresource; a custom resource's generation starts at 1 and moves with every change but its
# metadata and status (apiextensions-apiserver customResourceStrategy.PrepareForUpdate).
PLACEMENT_POLICIES = Resource("placement.novasphere.dev", "placementpolicies", "placementpolicy", "PlacementPolicy",
                              False, ("pp",), status=True, generation=True)
# The wgpolicyk8s.io/v1alpha2 report CRDs the background audit writes (the chart's files/crds).
POLICY_REPORTS = Resource("wgpolicyk8s.io", "policyreports", "policyreport", "PolicyReport", True, ("polr",))
CLUSTER_POLICY_REPORTS = Resource("wgpolicyk8s.io", "clusterpolicyreports", "clusterpolicyreport",
                                  "ClusterPolicyReport", False, ("cpolr",))
NODE_METRICS = Resource("metrics.k8s.io", "nodes", "", "NodeMetrics", False, verbs=("get", "list"))
POD_METRICS = Resource("metrics.k8s.io", "pods", "", "PodMetrics", True, verbs=("get", "list"))

ALL_STORED = (PODS, NODES, NAMESPACES, EVENTS, PRIORITY_CLASSES, LEASES, PDBS, DEPLOYMENTS, REPLICASETS,
              STATEFULSETS, DAEMONSETS, JOBS, CRONJOBS, PLACEMENT_POLICIES, POLICY_REPORTS, CLUSTER_POLICY_REPORTS,
              VIRTUAL_MACHINES, VIRTUAL_MACHINE_INSTANCES, VMI_REPLICA_SETS, VM_POOLS, WUKONGS)
BY_STORAGE = {r.storage_key: r for r in ALL_STORED}


@dataclass(frozen=True)
class GroupVersion:
    group: str
    version: str
    resources: tuple[Resource, ...]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass
class ServedApi:
    """Everything a server of version (major, minor) serves."""

    minor: int
    metrics: bool = False
    placement_policies: bool = False  # the PlacementPolicy CRD is installed
    policy_reports: bool = False  # the PolicyReport and ClusterPolicyReport CRDs are installed
    crds: tuple[str, ...] = ()  # the kinds of WORKLOAD_CRDS whose CRDs are installed
    group_versions: list[GroupVersion] = field(default_factory=list)

    def __post_init__(self) -> None:
        m = self.minor
        gvs = [GroupVersion("", "v1", (NAMESPACES, NODES, PODS, EVENTS)),
               GroupVersion("apps", "v1", (DEPLOYMENTS, REPLICASETS, STATEFULSETS, DAEMONSETS))]
        gvs.append(GroupVersion("batch", "v1", (JOBS, CRONJOBS) if m >= 21 else (JOBS,)))
        if m < 25:
            gvs.append(GroupVersion("batch", "v1beta1", (CRONJOBS,)))
        if m >= 19:
            gvs.append(GroupVersion("events.k8s.io", "v1", (EVENTS_V1,)))
        if m >= 14:
            gvs.append(GroupVersion("coordination.k8s.io", "v1", (LEASES,)))
            gvs.append(GroupVersion("scheduling.k8s.io", "v1", (PRIORITY_CLASSES,)))
        if m >= 21:
            gvs.append(GroupVersion("policy", "v1", (PDBS,)))
        if m < 25:
            gvs.append(GroupVersion("policy", "v1beta1", (PDBS,)))
        if self.metrics:
            gvs.append(GroupVersion("metrics.k8s.io", "v1beta1", (NODE_METRICS, POD_METRICS)))
        if self.placement_policies:
            gvs.append(GroupVersion("placement.novasphere.dev", "v1alpha1", (PLACEMENT_POLICIES,)))
        if self.policy_reports:
            gvs.append(GroupVersion("wgpolicyk8s.io", "v1alpha2", (POLICY_REPORTS, CLUSTER_POLICY_REPORTS)))
        custom: dict[tuple[str, str], list[Resource]] = {}
        for kind in self.crds:
            version, res = WORKLOAD_CRDS[kind]
            custom.setdefault((res.group, version), []).append(res)
        gvs += [GroupVersion(group, version, tuple(found)) for (group, version), found in custom.items()]
        self.group_versions = gvs

    def find(self, group: str, version: str) -> GroupVersion | None:
        for gv in self.group_versions:
            if gv.group == group and gv.version == version:
                return gv
        return None

    def groups(self) -> list[str]:
        seen: list[str] = []
        for gv in self.group_versions:
            if gv.group and gv.group not in seen:
                seen.append(gv.group)
        return seen

    def preferred(self, group: str) -> GroupVersion:
        return next(gv for gv in self.group_versions if gv.group == group)

    def storage_version(self, storage: tuple[str, str]) -> str:
        """apiVersion objects of this storage are kept in (the preferred served version)."""
        res = BY_STORAGE[storage]
        return self.preferred(res.group).api_version if res.group else "v1"

    @property
    def eviction_versions(self) -> tuple[str, ...]:
        # EvictionREST.AcceptsGroupVersion; v1 exists from 1.22.
        return ("policy/v1", "policy/v1beta1") if self.minor >= 22 else ("policy/v1beta1",)


def version_doc(git_version: str) -> JSON:
    major, minor, _ = (git_version.lstrip("v").split(".") + ["0", "0"])[:3]
    return {"major": major, "minor": minor, "gitVersion": f"v{git_version.lstrip('v')}",
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2024-01-01T00:00:00Z", "goVersion": "go1.22.0", "compiler": "gc",
            "platform": "linux/amd64"}


def api_versions_doc(server_address: str) -> JSON:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_doc(api: ServedApi, group: str) -> JSON:
    versions = [{"groupVersion": gv.api_version, "version": gv.version}
                for gv in api.group_versions if gv.group == group]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def group_list_doc(api: ServedApi) -> JSON:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group_doc(api, g) for g in api.groups()]}


def group_doc(api: ServedApi, group: str) -> JSON:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(api, group)}


def resource_list_doc(api: ServedApi, gv: GroupVersion) -> JSON:
    out: list[JSON] = []
    for res in sorted(gv.resources, key=lambda r: r.plural):
        entry: JSON = {"name": res.plural, "singularName": res.singular, "namespaced": res.namespaced,
                       "kind": res.kind, "verbs": list(res.verbs)}
        if res.short_names:
            entry["shortNames"] = list(res.short_names)
        if res.categories:
            entry["categories"] = list(res.categories)
        if res.storage_hash:
            entry["storageVersionHash"] = res.storage_hash
        out.append(entry)
        if res is PODS:
            group, version = api.eviction_versions[0].split("/")
            out.append({"name": "pods/eviction", "singularName": "", "namespaced": True, "group": group,
                        "version": version, "kind": "Eviction", "verbs": ["create"]})
        if res.status:
            out.append({"name": f"{res.plural}/status", "singularName": "", "namespaced": res.namespaced,
                        "kind": res.kind, "verbs": list(STATUS_VERBS)})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv.api_version, "resources": out}


# ---- conversions between served versions and the storage representation ----

_EVENT_RENAMES = (("involvedObject", "regarding"), ("message", "note"), ("reportingComponent",
                  "reportingController"), ("source", "deprecatedSource"), ("firstTimestamp",
                  "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp"),
                  ("count", "deprecatedCount"))


def to_storage(res: Resource, obj: JSON) -> JSON:
    """A request body of ``res``'s version -> the storage representation (kind/apiVersion dropped)."""
    body = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    if res is EVENTS_V1:  # pkg/apis/events/v1/conversion.go: regarding <-> involvedObject, note <-> message...
        for core, new in _EVENT_RENAMES:
            if new in body:
                body[core] = body.pop(new)
    return body


def from_storage(res: Resource, obj: JSON) -> JSON:
    """The storage representation -> ``res``'s version, still without kind/apiVersion."""
    if res is EVENTS_V1:
        body = dict(obj)
        for core, new in _EVENT_RENAMES:
            if core in body:
                body[new] = body.pop(core)
        body.setdefault("eventTime", None)  # MicroTime without omitempty: the zero value encodes as null
        return body
    return obj
