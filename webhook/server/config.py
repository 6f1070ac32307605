"""What the admission server needs to run; ``placement-webhook serve`` builds it from flags
and the environment."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from webhook.kube.kinds import BUILTIN, Targets
from webhook.server.reload import DEFAULT_INTERVAL


@dataclass(frozen=True)
class ServerConfig:
    """Everything the server needs to run."""

    policies: tuple[Path, ...]
    tls_cert: Path
    tls_key: Path
    client_ca: Path | None = None
    host: str = "0.0.0.0"
    port: int = 8443
    metrics_port: int = 8080
    shutdown_grace: float = 30.0
    reload_interval: float = DEFAULT_INTERVAL
    targets: Targets = field(default=BUILTIN, repr=False)
