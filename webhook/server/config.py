"""What the admission server needs to run; ``placement-webhook serve`` builds it from flags
and the environment."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from webhook.cluster.config import ClusterConfig
from webhook.kube.kinds import BUILTIN, Targets
from webhook.runtime.reload import DEFAULT_INTERVAL


@dataclass(frozen=True)
class ServerConfig:
    """Everything the server needs to run."""

    policies: tuple[Path, ...]  # policy files and folders (read with policies_from "files")
    tls_cert: Path
    tls_key: Path
    client_ca: Path | None = None
    host: str = "0.0.0.0"
    port: int = 8443
    metrics_port: int = 8080
    shutdown_grace: float = 30.0
    reload_interval: float = DEFAULT_INTERVAL
    targets: Targets = field(default=BUILTIN, repr=False)
    # Where the cluster is (the serve command resolves --cluster-view, --policies-from, --kubeconfig
    # and --context into it); None: the server reads nothing from a cluster.
    cluster: ClusterConfig | None = field(default=None, repr=False)
    # With a cluster: watch its nodes, namespaces and priority classes for admission (the view).
    cluster_view: bool = True
    # Where the policies come from: "files" (``policies``), "cluster" (PlacementPolicy objects), or both.
    policies_from: tuple[str, ...] = ("files",)
    # The Lease whose holder writes the PlacementPolicy objects' status (policies from the cluster);
    # its namespace None: the pod's own, else "default".
    lease_name: str = "placement-webhook"
    lease_namespace: str | None = None
    # Seconds between the status writer's passes (the changed-object counts are written at this pace).
    status_interval: float = 10.0
    # After this long without an open watch or word from the API server the view counts as
    # unknown, and the checks that need it are skipped with a note (admission never waits).
    cluster_view_max_age: float = 120.0
    # Seconds between the background audits the Lease holder writes as PolicyReports; 0: none.
    audit_interval: float = 0.0
    # Whether pod affinity terms honour matchLabelKeys; None: from the API server's version.
    match_label_keys: bool | None = None
