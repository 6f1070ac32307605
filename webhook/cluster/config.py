"""Where the API server is and how to talk to it: a kubeconfig file, or the pod's service account.

``load`` mirrors client-go's ``clientcmd`` / ``rest.InClusterConfig`` choice: an explicit
kubeconfig (or ``$KUBECONFIG``) wins; without one, the in-cluster service account is used.
Kubeconfig parsing is the official client's (``kubernetes.config.kube_config.KubeConfigLoader``
through ``load_kube_config``); this module only turns the resulting ``Configuration`` into what
aiohttp needs: a base URL, an ``ssl.SSLContext`` and a bearer-token getter.
"""
from __future__ import annotations

import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REFRESH = 60.0  # transport.NewCachedFileTokenSource re-reads the file about every minute

TokenGetter = Callable[[], "str | None"]


class ConfigError(Exception):
    """The cluster configuration cannot be loaded; the message names the file or variable."""


def _no_token() -> str | None:
    return None


@dataclass(frozen=True)
class ClusterConfig:
    """How to reach the API server: ``host`` ("https://10.0.0.1:443"), TLS and credentials."""

    host: str
    ssl_context: ssl.SSLContext | None = None  # None: plain http (tests, kubectl proxy)
    token: TokenGetter = field(default=_no_token)  # the bearer token now (None: no token)
    server_hostname: str | None = None  # kubeconfig tls-server-name (SNI and verification)
    source: str = ""  # the kubeconfig path or "in-cluster", for messages


class FileTokenSource:
    """A bearer token read from a file and re-read every ``refresh`` seconds.

    client-go's ``transport.NewCachedFileTokenSource`` (used by ``rest.InClusterConfig``): bound
    service-account tokens expire (one hour by default, the kubelet rotates them at 80%), so the
    file is re-read periodically instead of once. A failed re-read keeps the last good token,
    as the cached source does. The file is a few hundred bytes on a tmpfs, read at most once a
    minute, so reading it inline does not stall the event loop.
    """

    def __init__(self, path: Path, *, refresh: float = TOKEN_REFRESH,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.refresh = refresh
        self._clock = clock
        self._token = self._read()  # the first read must succeed
        self._read_at = clock()

    def _read(self) -> str:
        try:
            token = self.path.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read the service account token: {exc.strerror}") from exc
        if not token:
            raise ConfigError(f"{self.path}: the service account token file is empty")
        return token

    def __call__(self) -> str:
        now = self._clock()
        if now - self._read_at >= self.refresh:
            self._read_at = now
            try:
                self._token = self._read()
            except ConfigError:
                pass  # keep the last good token; the API server will say 401 if it expired
        return self._token


def load(kubeconfig: str | None, context: str | None = None, *, user_default: bool = False) -> ClusterConfig:
    """The cluster configuration: ``kubeconfig`` if given, else the in-cluster service account.

    ``user_default`` (the CLI commands, never the server) falls back, outside a pod, to
    ``$KUBECONFIG`` or ``~/.kube/config`` as kubectl does: a server in a pod must not pick up
    whatever kubeconfig its environment happens to name.
    """
    path = kubeconfig
    if path is None and user_default and not in_pod():
        path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or str(Path.home() / ".kube" / "config")
    if path:
        return from_kubeconfig(path, context)
    if context:
        raise ConfigError(f"context {context!r} given without a kubeconfig file")
    return in_cluster()


def pod_namespace(root: Path = SERVICE_ACCOUNT, environ: dict[str, str] | None = None) -> str | None:
    """The namespace this pod runs in: ``POD_NAMESPACE`` (the downward API), else the service
    account's mounted ``namespace`` file, as client-go's in-cluster namespace lookup reads it;
    None outside a pod."""
    value = (environ if environ is not None else dict(os.environ)).get("POD_NAMESPACE", "")
    if value:
        return value
    try:
        return (root / "namespace").read_text().strip() or None
    except OSError:
        return None


def in_pod() -> bool:
    """Whether this process runs in a pod with a service account (``rest.InClusterConfig``'s
    test: the service host variable and the mounted token)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").is_file()


def from_kubeconfig(path: str, context: str | None = None) -> ClusterConfig:
    """Read ``path`` with the official client's KubeConfigLoader and build an SSL context."""
    from kubernetes import client as kclient
    from kubernetes import config as kconfig

    if not Path(path).is_file():
        raise ConfigError(f"{path}: kubeconfig file not found")
    cfg = kclient.Configuration()
    try:
        kconfig.load_kube_config(config_file=path, context=context, client_configuration=cfg,
                                 persist_config=False)
    except (kconfig.ConfigException, ValueError, KeyError, OSError) as exc:
        raise ConfigError(f"{path}: invalid kubeconfig: {exc}") from exc
    host = str(cfg.host or "").rstrip("/")
    if not host.startswith(("http://", "https://")):
        raise ConfigError(f"{path}: the cluster's server {host!r} is not an http(s) URL")
    ctx: ssl.SSLContext | None = None
    if host.startswith("https://"):
        try:
            ctx = _ssl_context(cfg.ssl_ca_cert, cfg.verify_ssl, cfg.cert_file, cfg.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{path}: cannot load the TLS material: {exc}") from exc
    # Configuration keeps the bearer token as api_key["BearerToken"] = "Bearer <token>"
    # (KubeConfigLoader._set_config); exec/OIDC refreshes are not run here, they would block.
    bearer = (cfg.api_key or {}).get("BearerToken") or (cfg.api_key or {}).get("authorization") or ""
    token = bearer[len("Bearer "):] if bearer.startswith("Bearer ") else bearer or None

    def static_token() -> str | None:
        return token

    return ClusterConfig(host, ctx, static_token, getattr(cfg, "tls_server_name", None) or None, path)


def in_cluster(root: Path = SERVICE_ACCOUNT, environ: dict[str, str] | None = None) -> ClusterConfig:
    """rest.InClusterConfig: KUBERNETES_SERVICE_HOST/PORT, the service account's token and CA."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        # rest.ErrNotInCluster
        raise ConfigError("no kubeconfig given and not running in a cluster: "
                          "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined")
    ca = root / "ca.crt"
    try:
        ctx = _ssl_context(str(ca), True, None, None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{ca}: cannot load the service account CA: {exc}") from exc
    if ":" in host and not host.startswith("["):  # net.JoinHostPort brackets IPv6 addresses
        host = f"[{host}]"
    return ClusterConfig(f"https://{host}:{port}", ctx, FileTokenSource(root / "token"), None, "in-cluster")


def _ssl_context(ca_file: str | None, verify: bool, cert_file: str | None, key_file: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca_file or None)
    if not verify:  # insecure-skip-tls-verify
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file or None)
    return ctx
