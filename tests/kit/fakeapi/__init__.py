"""An in-process fake Kubernetes API server for tests and benchmarks.

It speaks the real HTTP protocol — discovery, CRUD, the three PATCH flavours, chunked LIST with
continue tokens, WATCH with bookmarks, Status errors, the pods/eviction subresource — following
the kube-apiserver source (each module cites the files and functions it mirrors). Objects are
plain dicts; there is no schema validation beyond object metadata.

    async with FakeApiServer("1.31.0") as server:          # aiohttp tests, on the test's loop
        ...
    with FakeApiServer.in_thread("1.31.0", tls=True, token="t") as server:   # sync clients
        server.write_kubeconfig(tmp_path / "kubeconfig")
        server.apply_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})

Constructor options: ``version`` (decides the served group-versions and version-gated rules),
``tls``, ``token``, ``metrics`` (serve metrics.k8s.io), ``pdb_controller`` (recompute budgets like
the disruption controller), ``graceful_pod_deletion`` (scheduled pods terminate until
``finish_pod_termination``), ``namespace_controller`` (a deleted namespace's content is removed at
once), ``bookmark_interval``, ``watch_timeout``, ``history`` (events kept per resource),
``page_size`` (force paging), ``seed`` (default namespaces and system priority classes),
``record_requests``, ``pdb_deletion_timeout``, ``placement_policies`` (serve the PlacementPolicy
custom resource, as if the chart's CRD were installed), ``policy_reports`` (serve wgpolicyk8s.io's
PolicyReport and ClusterPolicyReport, as if their CRDs were installed), ``crds`` (the workload kinds
whose CRDs are installed: ``VirtualMachine``, ``VirtualMachineInstance``,
``VirtualMachineInstanceReplicaSet``, ``VirtualMachinePool``, ``Wukong``).
Set ``server.latency`` (seconds) to answer every request that much later: a network's round trip.

Known differences from a real kube-apiserver:
  * JSON (and YAML request bodies) only: no protobuf/CBOR, no Table output, no HTTP/2, no
    aggregated discovery; ``application/apply-patch+yaml`` (server-side apply) is 415.
  * managedFields are recorded for Update operations with lists owned as a whole.
  * ``limit`` is honoured for ``resourceVersion=0`` lists (pre-btree watch caches returned
    everything); an Exact list at a future resourceVersion waits and answers 504 like NotOlderThan.
  * no garbage collector: propagationPolicy is accepted but dependents are not deleted, and
    Foreground/Orphan deletions do not add their finalizers.
  * the disruption controller and namespace controller run synchronously inside the write that
    triggers them (deterministic tests) instead of asynchronously.
  * the eviction subresource accepts policy/v1beta1 Evictions at every version, as
    EvictionREST.AcceptsGroupVersion does; a budget with an empty selector matches every pod (the
    current getPodDisruptionBudgets; releases before ~1.25 skipped empty selectors).
"""
from .app import RecordedRequest
from .errors import ApiError
from .server import FakeApiServer

__all__ = ["ApiError", "FakeApiServer", "RecordedRequest"]
