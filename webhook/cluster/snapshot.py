"""The cluster read once, for ``placement-webhook explain --kubeconfig`` (docs/explain.md).

``read_once`` lists Nodes, Namespaces, PriorityClasses, Pods, PodDisruptionBudgets,
Deployments, ReplicaSets, StatefulSets and DaemonSets through the same watch-backed
``ClusterCache`` the server runs (paginated LISTs, retries with the reflector's backoff), waits
for every informer's first complete list, stops the cache and hands back the projected objects,
each stamped with its ``apiVersion`` and ``kind`` so that ``Cluster.from_dump`` can sort them as
it sorts a ``kubectl get -o yaml`` dump.

What is read is what the kube-scheduler's own informers see:

* Pods are listed with the field selector ``status.phase!=Succeeded,status.phase!=Failed``
  (``kube.pods.SCHEDULER_FIELD_SELECTOR``), as the scheduler's pod informer is
  (``newPodInformer`` in pkg/scheduler/scheduler.go): finished pods hold no resources and
  never matter to a filter.
* PodDisruptionBudgets come from ``policy/v1`` when the server serves it, else from
  ``policy/v1beta1`` (v1.19 and v1.20 servers), chosen by discovery (``GET /apis/policy``).

``kinds`` (the audit's: every workload kind the engine places, the declared ones included)
adds a LIST of each kind of them not read already (Jobs, CronJobs, KubeVirt's and Wukong's, a
kinds configuration's), at the group-version discovery finds it served
(``discovery.served_kinds``: CronJob in batch/v1beta1 on a 1.20 server, batch/v1 from 1.21),
projected by ``workload_projection``. These are listed once, in pages, without a watch. A kind
the server does not serve (a CRD not installed), or whose list it refuses (403: RBAC), is
``Snapshot.unlisted`` with the reason, and the read goes on without it. ``explain`` passes no
``kinds``: it reads only what the scheduler model needs.

Each object keeps only what the model reads (150,000 pods must fit in well under 1 GiB): the
projections keep subtrees of the object they were given (which the informer decodes for them
and then drops) rather than copies, and the pods of one read share equal subtrees (the replicas
of a workload carry the same affinity, tolerations, containers and labels), which takes a
typical Deployment's pod from about 5 KiB to about 1.4 KiB. Snapshot objects are read-only.

The answer is a ``Snapshot`` or, when the cluster cannot be read, a one-line message naming the
API server and each failing request's last error: at ``timeout`` at the latest, and at once
when waiting cannot help (``client.final``: a refused connection, an unknown host, a failed TLS
verification, no credentials, or 401, 403, 404 answers: a one-shot read does not wait for the
network or RBAC to change, as ``kubectl get`` does not). Such a message is a ``Refused``.
"""
from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from webhook import PREFIX
from webhook.kube.kinds import Target

from . import discovery
from .cache import NAMESPACES, NODES, PRIORITY_CLASSES, ClusterCache
from .client import ApiError, Client, describe, final, transport_cause
from .discovery import ServedKind, Unlisted
from .config import ClusterConfig
from .informer import REFLECTOR_BACKOFF, Backoff, Informer, Object, Projected, Projection, server_wide_failure
from .pods import POD_PATH, PODS

__all__ = ["READ_ALWAYS", "Refused", "SharedValues", "Snapshot", "Unlisted", "project_pdb", "project_pod",
           "project_workload", "read_once", "workload_projection"]

PDBS = "poddisruptionbudgets"
DEPLOYMENTS, REPLICASETS, STATEFULSETS, DAEMONSETS = "deployments", "replicasets", "statefulsets", "daemonsets"

# How long a request may outlive the read's deadline. The deadline is the only clock: a
# request's own timer firing in the same instant as the deadline's cancellation can turn that
# cancellation into an ordinary TimeoutError, which the retry loops would then swallow (seen
# with aiohttp 3.14 on Python 3.11). So every request is bounded by the read and ends with it.
REQUEST_GRACE = 1.0
# How often the wait for the first lists looks for a request the API server refused for good.
POLL = 0.05
# Failures that retrying will not change within a one-shot read (``client.final``): the address
# refuses or does not exist, TLS verification fails, bad credentials, RBAC, a resource (or
# /version) the server does not serve. Everything else is retried until ``timeout``.


class Refused(str):
    """The message of a read that stopped at once because waiting could not help: the kubeconfig,
    the network or RBAC must change first (a usage error for a command)."""


@dataclass(frozen=True)
class Snapshot:
    """The cluster as read once: projected objects stamped with apiVersion and kind (Node, Pod,
    Namespace, PriorityClass, PodDisruptionBudget, Deployment, ReplicaSet, StatefulSet,
    DaemonSet, and the ``kinds`` asked for), the API server's version and whether pod affinity
    may use matchLabelKeys (as ``ClusterCache.supports_match_label_keys``); ``unlisted``: the
    kinds asked for and not listed, with the reason. The objects share subtrees: do not change
    them."""

    objects: list[dict[str, Any]]
    server_version: tuple[int, int] | None
    match_label_keys: bool | None
    unlisted: tuple[Unlisted, ...] = ()

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for obj in self.objects if obj.get("kind") == kind]


# ---- projections ----

Share = Callable[[Any], Any]


def _unshared(value: Any) -> Any:
    return value


class SharedValues:
    """Equal values kept once across the objects of one read: the replicas of a workload carry
    the same affinity, tolerations, containers, labels and owner, and 150,000 pods would otherwise
    hold 150,000 copies of each (most of a projected pod's size); strings that repeat (namespace,
    node, phase, scheduler name) are interned. A projection given ``share=SharedValues()``
    returns objects that share such values: treat them as read-only."""

    def __init__(self) -> None:
        self._seen: dict[bytes, Any] = {}
        self._encode = msgspec.json.Encoder().encode

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return sys.intern(value)
        if not isinstance(value, (dict, list)) or not value:
            return value
        # Equal values from one API server encode alike (fields in their Go struct order); a
        # value that encodes differently is merely kept twice.
        return self._seen.setdefault(self._encode(value), value)

    def __len__(self) -> int:
        return len(self._seen)


def _meta(obj: Object) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _identity(meta: Mapping[str, Any], share: Share) -> dict[str, Any]:
    metadata = {"name": meta.get("name"), "namespace": share(meta.get("namespace")),
                "labels": share(dict(meta.get("labels") or {})), "uid": meta.get("uid")}
    # ownerReferences as ``metav1.GetControllerOf``, the rollout and admission read them: the
    # owner's apiVersion and kind (admission leaves an object a workload kind controls to its
    # owner, and the group says which kind), its name and whether it is the controller.
    owners = [{k: ref[k] for k in ("apiVersion", "kind", "name", "controller") if k in ref}
              for ref in meta.get("ownerReferences") or () if isinstance(ref, Mapping)]
    if owners:
        metadata["ownerReferences"] = share(owners)
    return metadata


def _kept(source: Mapping[str, Any], keys: Iterable[str], share: Share = _unshared) -> dict[str, Any]:
    """The keys of ``source`` that are set (absent stays absent: nil and empty differ in the API)."""
    return {k: share(v) for k in keys if (v := source.get(k)) is not None}


def _requests_only(resources: Any) -> dict[str, Any] | None:
    """``resources`` reduced to ``requests``: ``resource.PodRequests`` reads nothing else (the API
    server has already defaulted missing requests from limits, SetDefaults_Pod)."""
    requests = (resources or {}).get("requests") if isinstance(resources, Mapping) else None
    return {"requests": requests} if requests else None


def _container(container: Mapping[str, Any], *, init: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": container.get("name")}
    resources = _requests_only(container.get("resources"))
    if resources is not None:
        out["resources"] = resources
    # schedutil.GetHostPorts: only ports with a hostPort occupy anything on the node.
    ports = [{k: p[k] for k in ("containerPort", "hostPort", "hostIP", "protocol") if k in p}
             for p in container.get("ports") or () if isinstance(p, Mapping) and p.get("hostPort")]
    if ports:
        out["ports"] = ports
    if init and container.get("restartPolicy") is not None:
        out["restartPolicy"] = container["restartPolicy"]  # "Always": a sidecar (KEP-753)
    return out


_POD_SPEC_KEPT = ("nodeName", "priority", "preemptionPolicy", "schedulerName", "overhead", "affinity",
                  "tolerations", "topologySpreadConstraints")


def project_pod(obj: Object, *, share: Share = _unshared) -> Projected:
    """What the scheduler model reads of a bound pod (``PodInfo``: identity, labels, priority,
    requests as ``resource.PodRequests`` counts them, host ports, affinity terms, start time)
    plus what placement and rollouts read besides (owner, tolerations, spread constraints,
    phase). Images, env, volumes, probes, conditions and managedFields are dropped."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    metadata = _identity(meta, share)
    ours = {k: v for k, v in (meta.get("annotations") or {}).items() if str(k).startswith(PREFIX)}
    if ours:  # the opt-out a bare pod may carry, which the audit reads; the rest is dropped
        metadata["annotations"] = share(ours)
    if meta.get("deletionTimestamp") is not None:
        metadata["deletionTimestamp"] = meta["deletionTimestamp"]
    pod_spec = _kept(spec, _POD_SPEC_KEPT, share)
    resources = _requests_only(spec.get("resources"))  # pod-level resources (PodLevelResources)
    if resources is not None:
        pod_spec["resources"] = share(resources)
    pod_spec["containers"] = share([_container(c, init=False) for c in spec.get("containers") or ()
                                    if isinstance(c, Mapping)])
    if spec.get("initContainers"):
        pod_spec["initContainers"] = share([_container(c, init=True) for c in spec["initContainers"]
                                            if isinstance(c, Mapping)])
    return {"metadata": metadata, "spec": pod_spec, "status": _kept(status, ("phase", "startTime"), share)}


def project_pdb(obj: Object) -> Projected:
    """What DefaultPreemption (``filterPodsWithPDBViolation``) and the eviction checks read of a
    PodDisruptionBudget. The selector is kept as given: nil and empty differ, and an empty one
    selects every pod under policy/v1 but none under policy/v1beta1."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
            "spec": _kept(spec, ("selector", "minAvailable", "maxUnavailable")),
            "status": _kept(status, ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods",
                                     "disruptedPods"))}


_WORKLOAD_STATUS = (
    "replicas", "readyReplicas", "updatedReplicas", "availableReplicas",  # Deployment, ReplicaSet, StatefulSet
    "desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled",  # DaemonSet
    "numberAvailable",
    "startTime",  # Job: admission lets a suspended Job that never started change its scheduling directives
)
_WORKLOAD_SPEC = ("replicas", "selector", "strategy", "updateStrategy", "template")
# A Job's pods wanted (parallelism, completions: explain.workloads) and whether it is suspended
# (admission and the pods wanted read it).
_JOB_SPEC = ("parallelism", "completions", "suspend")


# The annotation ``kubectl apply`` keeps the whole last applied object in: no policy reads it.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def project_workload(obj: Object, *, spec_keys: tuple[str, ...] = _WORKLOAD_SPEC,
                     whole: tuple[str, ...] = ()) -> Projected:
    """A Deployment, ReplicaSet, StatefulSet or DaemonSet: identity, owner (a ReplicaSet's
    Deployment), replicas, selector, the update strategy (``strategy`` or ``updateStrategy``) and
    the pod template kept whole, since explain compares templates to find the running revision;
    and for the audit, which holds it against the policies as admission would, its annotations
    (policies match on them, and the opt-out is one; but for ``LAST_APPLIED``) and its
    resourceVersion (a verdict is kept while it is the same). ``spec_keys`` and ``whole`` are
    another kind's (``workload_projection``)."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    metadata = _identity(meta, _unshared)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        metadata["annotations"] = annotations
    if meta.get("resourceVersion"):
        metadata["resourceVersion"] = meta["resourceVersion"]
    out = {"metadata": metadata, "spec": _kept(spec, spec_keys), "status": _kept(status, _WORKLOAD_STATUS)}
    out.update(_kept(obj, whole))
    return out


def workload_projection(target: Target) -> Projection:
    """How a read keeps an object of ``target``'s kind: as ``project_workload``, with the spec
    fields the kind's paths lead through besides (its pod spec and pod labels, selector, rollout:
    a CronJob's ``jobTemplate``, a VirtualMachine's ``template``, a pool's
    ``virtualMachineTemplate``) and a Job's ``parallelism``, ``completions`` and ``suspend``. A kind
    whose pod spec is its whole spec (a VirtualMachineInstance), or that has a native scheduling
    API (Wukong), keeps its spec whole; so does a declared kind whose paths leave ``spec``, for
    the top-level field they start at."""
    spec_keys, whole = set(_WORKLOAD_SPEC + _JOB_SPEC), set()
    for path in (target.pod_spec or ("spec",), target.pod_labels, target.selector, target.rollout):
        if not path or path[0] == "metadata":  # the metadata kept is the identity's
            continue
        if path[0] == "spec" and len(path) > 1:
            spec_keys.add(str(path[1]))
        else:
            whole.add(str(path[0]))
    return functools.partial(project_workload, spec_keys=tuple(sorted(spec_keys)), whole=tuple(sorted(whole)))


# ---- reading ----

# The workload kinds every read with ``scheduling`` lists (the scheduler model reads them); a
# read's ``kinds`` adds the others.
READ_ALWAYS = frozenset({("", "Pod"), ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
                         ("apps", "DaemonSet")})

@dataclass(frozen=True)
class _Resource:
    """One informer of a read: where it lists, how it projects, what its objects are stamped."""

    path: str
    project: Projection
    api_version: str
    kind: str


# Registered by ClusterCache itself; only their stamps are needed here.
_CACHE_STAMPS: dict[str, tuple[str, str]] = {
    NODES: ("v1", "Node"),
    NAMESPACES: ("v1", "Namespace"),
    PRIORITY_CLASSES: ("scheduling.k8s.io/v1", "PriorityClass"),
}


def _more_resources(pdb_api: str | None) -> dict[str, _Resource]:
    """The informers a read adds to the cache's own, with a table of shared pod subtrees that
    lives as long as this read's cache."""
    pods = functools.partial(project_pod, share=SharedValues())
    out = {
        PODS: _Resource(POD_PATH, pods, "v1", "Pod"),
        DEPLOYMENTS: _Resource("/apis/apps/v1/deployments", project_workload, "apps/v1", "Deployment"),
        REPLICASETS: _Resource("/apis/apps/v1/replicasets", project_workload, "apps/v1", "ReplicaSet"),
        STATEFULSETS: _Resource("/apis/apps/v1/statefulsets", project_workload, "apps/v1", "StatefulSet"),
        DAEMONSETS: _Resource("/apis/apps/v1/daemonsets", project_workload, "apps/v1", "DaemonSet"),
    }
    if pdb_api is not None:
        out[PDBS] = _Resource(f"/apis/{pdb_api}/poddisruptionbudgets", project_pdb, pdb_api, "PodDisruptionBudget")
    return out


class _Refused(Exception):
    """A request failed for good (``client.final``); ``cause`` is its failure."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _describe(exc: BaseException) -> str:
    cause = transport_cause(exc)  # the host is named once, at the start of the message
    return cause if cause is not None else _one_line(f"{type(exc).__name__}: {exc}")


def _refused(exc: BaseException | None) -> bool:
    return final(exc)


@dataclass
class _Reading:
    """One read: where it got to, so that a timeout can say what was still missing."""

    deadline: float  # on the event loop's clock
    scheduling: bool = True  # also what the scheduler model reads (pods, PDBs, workloads)
    kinds: tuple[Target, ...] = ()  # more workload kinds to list (``read_once``)
    step: str = "/version"  # the discovery request under way
    errors: dict[str, str] = field(default_factory=dict)  # discovery requests' last errors
    lists: dict[str, str] = field(default_factory=dict)  # the kinds' lists under way: their last errors
    cache: ClusterCache | None = None

    async def run(self, client: Client) -> Snapshot:
        version, pdb_api, kinds = await self._discover(client)
        cache = self.cache = ClusterCache(client)
        cache.server_version = version  # known: the cache does not ask for it again
        stamps = dict(_CACHE_STAMPS)
        for name, resource in (_more_resources(pdb_api) if self.scheduling else {}).items():
            cache.add(name, resource.path, resource.project)
            stamps[name] = (resource.api_version, resource.kind)
        await cache.start()
        lists = [asyncio.ensure_future(self._list(client, target, served)) for target, served in kinds
                 if isinstance(served, ServedKind)]
        try:
            while not await cache.wait_synced(min(POLL, self.remaining())):
                for informer in cache.informers.values():
                    if informer.last_exception is not None and _refused(informer.last_exception):
                        raise _Refused(informer.last_exception)
            listed = await asyncio.gather(*lists)
        finally:
            for task in lists:
                task.cancel()
            await asyncio.gather(*lists, return_exceptions=True)
        objects = _stamped(cache.informers, stamps)
        unlisted = [served for _, served in kinds if isinstance(served, Unlisted)]
        for found in listed:
            if isinstance(found, Unlisted):
                unlisted.append(found)
            else:
                objects += found
        return Snapshot(objects, version, cache.supports_match_label_keys(), tuple(unlisted))

    async def _discover(self, client: Client) -> tuple[tuple[int, int], str | None, list[tuple[Target, Listed]]]:
        """The server version, the PodDisruptionBudget group-version and where each of ``kinds``
        is listed, retried with the reflector's backoff (as the informers retry) until they
        answer."""
        backoff = Backoff(REFLECTOR_BACKOFF)
        version: tuple[int, int] | None = None
        while True:
            self.remaining()
            try:
                if version is None:
                    self.step = "/version"
                    version = await client.version()
                self.step = "/apis/policy"
                pdb_api = await discovery.pdb_group_version(client) if self.scheduling else None
                self.step = "/apis"
                served = await discovery.served_kinds(client, [(t.group, t.kind, t.version) for t in self.kinds])
                self.errors.clear()
                return version, pdb_api, list(zip(self.kinds, served, strict=True))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: retried until the deadline, reported then
                self.errors = {self.step: _describe(exc)}
                if _refused(exc):
                    raise _Refused(exc) from exc
            await asyncio.sleep(min(backoff.next(), self.remaining()))

    async def _list(self, client: Client, target: Target, served: ServedKind) -> list[dict[str, Any]] | Unlisted:
        """Every object of one kind, listed once in pages and projected (``workload_projection``),
        retried with the reflector's backoff until the deadline; ``Unlisted`` when the API server
        refuses the list (403: the reason names the permission wanted) or no longer serves it (404:
        its CRD was removed meanwhile)."""
        project, name = workload_projection(target), served.shown()
        backoff = Backoff(REFLECTOR_BACKOFF)
        self.lists[name] = ""
        while True:
            try:
                items: list[dict[str, Any]] = []
                async for page in client.list_pages(served.path):
                    items += [_stamp(project(item), served) for item in page.get("items") or ()
                              if isinstance(item, Mapping)]
                del self.lists[name]
                return items
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried until the deadline, reported then
                if isinstance(exc, ApiError) and exc.status in (403, 404):
                    del self.lists[name]
                    return _unlisted(served, exc, client.config.host)
                self.lists[name] = _describe(exc)
                if _refused(exc):
                    raise _Refused(exc) from exc
            await asyncio.sleep(min(backoff.next(), self.remaining()))

    def remaining(self) -> float:
        """Seconds left before the deadline; TimeoutError when none are. The deadline also
        cancels the read, but the loops check it too, so that no swallowed cancellation can
        keep them going."""
        left = self.deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise TimeoutError
        return left

    def failures(self, *, refused_only: bool = False) -> str:
        """"step: last error" for each discovery request and informer that has not succeeded."""
        parts = [f"{step}: {error}" for step, error in self.errors.items()]
        if self.cache is None and not parts:
            parts.append(f"{self.step}: no answer")  # its first try is still waiting
        if self.cache is not None:
            for name, informer in self.cache.informers.items():
                if refused_only and not _refused(informer.last_exception):
                    continue
                if not informer.synced:
                    parts.append(f"{name}: {_one_line(informer.last_error) or 'not listed yet'}")
        if not refused_only:
            parts += [f"{name}: {error or 'not listed yet'}" for name, error in self.lists.items()]
        return "; ".join(parts) or "no answer"


Listed = ServedKind | Unlisted


def _stamp(obj: dict[str, Any], served: ServedKind) -> dict[str, Any]:
    obj["apiVersion"], obj["kind"] = served.api_version, served.kind
    return obj


def _unlisted(served: ServedKind, exc: ApiError, host: str) -> Unlisted:
    """Why a kind's list was not read: its CRD gone (404), or RBAC (403), naming the grant wanted."""
    if exc.status == 404:
        return Unlisted(served.group, served.kind, discovery.NOT_SERVED)
    grant = f'list on {served.resource} in the API group "{served.group}"'
    return Unlisted(served.group, served.kind,
                    f"cannot list {served.shown()} ({served.api_version}; it needs {grant}): {describe(exc, host)}",
                    refused=True)


def _stamped(informers: Mapping[str, Informer], stamps: Mapping[str, tuple[str, str]]) -> list[dict[str, Any]]:
    """Every informer's objects with apiVersion and kind set (LIST items carry neither). The
    projections are stamped in place: the stores are this read's own and are dropped with it."""
    objects: list[dict[str, Any]] = []
    for name, informer in informers.items():
        api_version, kind = stamps[name]
        for obj in informer.values():
            obj["apiVersion"], obj["kind"] = api_version, kind
            objects.append(obj)
    return objects


async def read_once(where: ClusterConfig, *, timeout: float = 30.0, scheduling: bool = True,
                    kinds: Iterable[Target] = ()) -> Snapshot | str:
    """Read the cluster once through the watch-backed cache. A ``str`` is a one-line error
    message naming the host and each failing request's last error (a ``Refused`` when it
    stopped at once, see ``client.final``); nothing waits past ``timeout`` seconds.
    ``scheduling=False`` reads only what admission's cluster view holds (Nodes, Namespaces,
    PriorityClasses), as ``mutate --kubeconfig`` needs. ``kinds``: the workload kinds to list
    besides (those not in ``READ_ALWAYS``; see the module's docstring)."""
    # Quiet: the answer says what failed, a log line would say it twice.
    client = Client(where, request_timeout=timeout + REQUEST_GRACE, log_failures=False)
    more = {(t.group, t.kind): t for t in kinds if (t.group, t.kind) not in READ_ALWAYS}
    reading = _Reading(asyncio.get_running_loop().time() + timeout, scheduling, tuple(more.values()))
    try:
        async with asyncio.timeout_at(reading.deadline):
            return await reading.run(client)
    except _Refused as refused:
        if server_wide_failure(refused.cause):  # the same for every request: the server, the cause
            return Refused(describe(refused.cause, where.host))
        return Refused(f"could not read the cluster at {where.host} ({reading.failures(refused_only=True)})")
    except TimeoutError:
        return f"could not read the cluster at {where.host} within {timeout:g} s ({reading.failures()})"
    finally:
        if reading.cache is not None:
            await reading.cache.stop()
        await client.close()


async def list_once(where: ClusterConfig, path: str, *, timeout: float = 30.0, missing: str = "") -> list[Any] | str:
    """The items of one resource, listed once (in pages, as ``kubectl get`` lists): ``mutate``,
    ``explain``, ``lint`` and ``test`` read the cluster's PlacementPolicies so. A ``str`` is a
    one-line message naming the API server and the cause: a ``Refused`` when waiting cannot help
    (``client.final``; a 404, the resource not served, is said with ``missing`` when given)."""
    client = Client(where, request_timeout=timeout + REQUEST_GRACE, log_failures=False)
    items: list[Any] = []
    try:
        async with asyncio.timeout(timeout):
            async for page in client.list_pages(path):
                items.extend(page.get("items") or ())
    except TimeoutError:
        return f"could not list {path} at {where.host} within {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 - said in one line, as kubectl says it
        said = describe(exc, where.host)
        if missing and getattr(exc, "status", None) == 404:
            said = f"{said} ({missing})"
        return Refused(said) if final(exc) else said
    finally:
        await client.close()
    return items
