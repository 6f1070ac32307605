"""Where the API server is and how to talk to it: a kubeconfig file, or the pod's service account.

``load`` mirrors client-go's ``clientcmd`` / ``rest.InClusterConfig`` choice: an explicit
kubeconfig (or ``$KUBECONFIG``, a list of files merged as kubectl merges them) wins; without
one, the in-cluster service account is used.
Kubeconfig parsing is the official client's (``kubernetes.config.kube_config.KubeConfigLoader``);
this module turns the resulting ``Configuration`` into what aiohttp needs: a base URL, an
``ssl.SSLContext`` and a bearer-token getter. Users whose token expires and must be obtained
again (an ``exec`` plugin, the ``oidc`` auth-provider) are read here and handed to
``credentials``, which renews them as client-go does; the official loader would run the plugin
once and never again.
"""
from __future__ import annotations

import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import credentials as creds

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
    # Credentials renewed near expiry and after a 401 (exec plugin, oidc); ``token`` reads them too.
    credentials: creds.Credentials | None = None


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
        listed = os.environ.get("KUBECONFIG", "")
        if any(listed.split(os.pathsep)):
            return from_kubeconfig(listed, context, listed=True)
        path = str(Path.home() / ".kube" / "config")
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


def kubeconfig_files(listed: str) -> list[str]:
    """The files of a ``$KUBECONFIG`` list as client-go takes them (``ClientConfigLoadingRules.Load``
    in k8s.io/client-go/tools/clientcmd/loader.go): separated by ``os.pathsep``, empty entries
    and repeats dropped, in order, and those that do not exist skipped ("missing files should be
    ignored")."""
    files: list[str] = []
    for entry in listed.split(os.pathsep):
        path = os.path.expanduser(entry)
        if entry and path not in files and Path(path).is_file():
            files.append(path)
    return files


def _current_context(merged: Any) -> None:
    """Set the merged kubeconfig's current-context to the first file's that sets one. client-go
    merges the files last to first, each overriding with what it sets, so the first file to set a
    value wins, for the named clusters, users and contexts as for current-context (loader.go,
    ``Load``); the official Python client's merger keeps the first of each name too, but lets
    the last file's current-context win."""
    for path in merged.paths:
        current = (merged.config_files.get(path) or {}).get("current-context")
        if current:
            merged.config.value["current-context"] = current
            return


def from_kubeconfig(path: str, context: str | None = None, *, clock: creds.Clock = time.time,
                    listed: bool = False) -> ClusterConfig:
    """Read ``path`` with the official client's KubeConfigLoader and build an SSL context.
    ``listed``: ``path`` is a ``$KUBECONFIG`` list, whose files are merged (``kubeconfig_files``);
    otherwise it is one file, as kubectl takes ``--kubeconfig``.

    A user with a ``token`` or ``tokenFile`` sends it (client-go prefers a bearer token to an exec
    plugin: the exec authenticator's UpdateTransportConfig steps aside when one is set). Otherwise
    an ``exec`` plugin is run here, once, so that a missing command or a broken answer is a usage
    error at start, and again whenever its credential expires or gets a 401; an ``oidc``
    auth-provider's id-token is refreshed likewise. ``clock`` (seconds since the epoch) decides
    expiry: tests pass a fake one.
    """
    from kubernetes import client as kclient
    from kubernetes.config import ConfigException
    from kubernetes.config import kube_config

    files = kubeconfig_files(path) if listed else [path] if Path(path).is_file() else []
    if not files:
        raise ConfigError(f"{path}: kubeconfig file not found" if not listed
                          else f"KUBECONFIG={path}: none of its kubeconfig files exists")
    cfg = kclient.Configuration()
    try:
        merged = kube_config.KubeConfigMerger(os.pathsep.join(files))
        if merged.config is None:
            raise ConfigError(f"{path}: invalid kubeconfig: no configuration found")
        _current_context(merged)
        loader = kube_config.KubeConfigLoader(config_dict=merged.config, active_context=context,
                                              config_base_path=None)
        refreshing = _take_renewable_auth(merged.config, loader.current_context, path)
        loader.load_and_set(cfg)
    except creds.CredentialConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except (ConfigException, ValueError, KeyError, OSError) as exc:
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
    server_hostname = getattr(cfg, "tls_server_name", None) or None
    if refreshing is not None:
        renewing = _renewing(refreshing, path=path, ssl_context=ctx, clock=clock)
        return ClusterConfig(host, ctx, renewing, server_hostname, path, renewing)
    # Configuration keeps the bearer token as api_key["BearerToken"] = "Bearer <token>"
    # (KubeConfigLoader._set_config).
    bearer = (cfg.api_key or {}).get("BearerToken") or (cfg.api_key or {}).get("authorization") or ""
    token = bearer[len("Bearer "):] if bearer.startswith("Bearer ") else bearer or None

    def static_token() -> str | None:
        return token

    return ClusterConfig(host, ctx, static_token, server_hostname, path)


@dataclass(frozen=True)
class _Renewable:
    """The active user's exec or oidc stanza, taken out of the kubeconfig before the official
    loader sees it, with what building its credentials needs."""

    user: str
    stanza: dict[str, Any]  # the exec stanza, or the auth-provider's config
    kind: str  # "exec" or "oidc"
    cluster: dict[str, Any]
    file: Path  # the kubeconfig file that defined the user (a refreshed oidc token is written there)

    @property
    def base(self) -> Path:
        """The folder of that file: the exec command's relative paths are relative to it."""
        return self.file.parent


# A user with any of these authenticates with them; an exec plugin is then not run
# (the exec authenticator's UpdateTransportConfig: HasTokenAuth, HasBasicAuth, HasCertAuth).
_STATIC_AUTH = ("token", "tokenFile", "username", "client-certificate", "client-certificate-data")


def _take_renewable_auth(config: Any, current: Any, path: str) -> _Renewable | None:
    """Remove the active user's ``exec`` (or ``oidc`` auth-provider) from the merged kubeconfig
    and return it, unless the user also has a token, a password or a client certificate, which
    then wins."""
    names = (current or {}).get("context") or {}
    user_name, cluster_name = names.get("user"), names.get("cluster")
    if not user_name or not config.safe_get("users"):
        return None
    entry = config["users"].get_with_name(user_name, safe=True)
    user = entry.safe_get("user") if entry is not None else None
    if not isinstance(user, dict) or any(user.get(k) for k in _STATIC_AUTH):
        return None
    provider = user.get("auth-provider")
    kind = "exec" if user.get("exec") else "oidc" if isinstance(provider, dict) and provider.get("name") == "oidc" \
        else ""
    if not kind:
        return None
    cluster_entry = config["clusters"].get_with_name(cluster_name, safe=True) if cluster_name else None
    cluster = cluster_entry.safe_get("cluster") if cluster_entry is not None else None
    defined_in = Path(entry.path or path).resolve()
    if kind == "exec":
        stanza = user.pop("exec")
    else:
        stanza = dict(user.pop("auth-provider").get("config") or {})
    if not isinstance(stanza, dict):
        raise creds.CredentialConfigError(f"user {user_name!r}: {kind} must be a mapping")
    return _Renewable(str(user_name), stanza, kind, dict(cluster or {}), defined_in)


def _renewing(found: _Renewable, *, path: str, ssl_context: ssl.SSLContext | None,
              clock: creds.Clock) -> creds.Credentials:
    try:
        if found.kind == "oidc":
            oidc = creds.OidcConfig.parse(found.stanza, kubeconfig=found.file, user=found.user)
            return creds.OidcCredentials(oidc, str(found.stanza.get("id-token") or ""),
                                         str(found.stanza.get("refresh-token") or ""), clock=clock)
        exec_config = creds.ExecConfig.parse(found.stanza, user=found.user, base=found.base,
                                             cluster=creds.exec_cluster(found.cluster, base=found.base))
    except creds.CredentialConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    source = creds.ExecCredentials(exec_config, clock=clock, ssl_context=ssl_context)
    try:
        source.obtain_now()
    except creds.CredentialError as exc:
        raise ConfigError(f"{path}: user {found.user!r}: getting credentials: {exc}") from exc
    return source


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
