"""Credentials that expire and are obtained again: exec plugins and the legacy OIDC auth-provider.

A kubeconfig user may name a program that prints a token (``user.exec``, the
``client.authentication.k8s.io`` ExecCredential protocol: ``aws eks get-token``, ``gke-gcloud-auth-plugin``,
``kubelogin``) or carry an OpenID Connect id-token with a refresh token (``user.auth-provider``
named ``oidc``). Either token expires, often within the hour, so a long-running command must obtain
another; reading the kubeconfig once would end in ``401 Unauthorized``.

``ExecCredentials`` follows client-go's exec authenticator (plugin/pkg/client/auth/exec/exec.go):

* ``getCreds``: the cached credential is used until ``status.expirationTimestamp`` (none: for
  ever); then the plugin runs again before the request is sent. Here it runs a little before
  the expiry (``EXPIRY_SKEW``, at most half the credential's life), so that a request is not sent
  with a token that expires on its way.
* ``roundTripper.RoundTrip`` / ``maybeRefreshCreds``: a ``401`` answer to the current credential runs
  the plugin again, unless another request rotated it meanwhile; the request that got the 401 is
  not retried (the caller's own retry sends the new token).
* ``refreshCredsLocked``: ``KUBERNETES_EXEC_INFO`` holds an ExecCredential whose ``spec.interactive``
  is false and, with ``provideClusterInfo``, ``spec.cluster`` (server, CA data, TLS server name,
  the cluster's ``client.authentication.k8s.io/exec`` extension as ``config``); ``env`` is added to
  this process's environment; the answer's apiVersion must be the configured one and carry a token
  or a certificate and key.
* ``wrapCmdRunErrorLocked``: a command that does not exist is reported with the ``installHint``.
* ``isInteractive``: this program never runs a plugin interactively (no terminal is handed to
  it), so ``interactiveMode: Always`` is refused when the kubeconfig is read.

``OidcCredentials`` follows client-go's oidc auth-provider (plugin/pkg/client/auth/oidc/oidc.go):
the id-token is used until ten seconds before its ``exp`` claim (``idTokenExpired`` with
``expiryDelta``); then the ``refresh-token`` is exchanged at the issuer's token endpoint (found by
OpenID Connect discovery, ``tokenEndpoint``) for a new id-token, and the new tokens are written
back into the kubeconfig file, as kubectl's persister does, so that a rotated refresh token is not
lost. Before exchanging, the file is read again: another program (kubectl) may have refreshed the
tokens already. A ``401`` does the same for the token that got it.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import os
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

log = logging.getLogger(__name__)

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"  # the cluster extension passed as spec.cluster.config
EXEC_INFO = "KUBERNETES_EXEC_INFO"
EXEC_TIMEOUT = 60.0  # seconds: a plugin waiting for a login nobody can give must not hang the command
EXPIRY_SKEW = 10.0  # seconds before expiry an exec credential is obtained again
OIDC_EXPIRY_DELTA = 10.0  # oidc.go expiryDelta
INSTALL_HELP = ("It looks like you are trying to use a client-go credential plugin that is not installed. "
                "See https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
                "#client-go-credential-plugins")

Clock = Callable[[], float]  # seconds since the epoch: expiry times are wall-clock times


class CredentialError(Exception):
    """No credential could be obtained: the plugin failed, or the identity provider refused."""


class CredentialConfigError(ValueError):
    """The kubeconfig's exec or auth-provider stanza is unusable; the message names the field."""


# ---- exec plugins ----

@dataclass(frozen=True)
class ExecConfig:
    """A kubeconfig user's ``exec`` stanza, checked as clientcmd's ``validateAuthInfo`` checks it."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    provide_cluster_info: bool = False
    cluster: Mapping[str, Any] | None = None  # spec.cluster of KUBERNETES_EXEC_INFO

    @classmethod
    def parse(cls, stanza: Mapping[str, Any], *, user: str, base: Path,
              cluster: Mapping[str, Any] | None) -> ExecConfig:
        def need(field: str) -> str:
            value = stanza.get(field)
            if not isinstance(value, str) or not value:
                raise CredentialConfigError(f"user {user!r}: exec.{field} must be specified to use an exec plugin")
            return value

        command, api_version = need("command"), need("apiVersion")
        if api_version not in EXEC_API_VERSIONS:
            raise CredentialConfigError(f"user {user!r}: exec.apiVersion {api_version!r} is not one of "
                                        f"{', '.join(EXEC_API_VERSIONS)}")
        # client.authentication.k8s.io/v1 has no default; v1beta1 defaults to IfAvailable.
        mode = stanza.get("interactiveMode") or ("" if api_version.endswith("/v1") else "IfAvailable")
        if mode not in INTERACTIVE_MODES:
            what = "must be specified" if not mode else f"{mode!r} is not one of {', '.join(INTERACTIVE_MODES)}"
            raise CredentialConfigError(f"user {user!r}: exec.interactiveMode {what}")
        if mode == "Always":
            raise CredentialConfigError(f"user {user!r}: exec.interactiveMode is Always, but placement-webhook "
                                        "never runs a credential plugin interactively (use IfAvailable or Never)")
        env: list[tuple[str, str]] = []
        for i, item in enumerate(stanza.get("env") or ()):
            name = item.get("name") if isinstance(item, Mapping) else None
            if not isinstance(name, str) or not name:
                raise CredentialConfigError(f"user {user!r}: exec.env[{i}].name must be specified")
            env.append((name, str(item.get("value") or "")))
        args = stanza.get("args") or []
        if not isinstance(args, list):
            raise CredentialConfigError(f"user {user!r}: exec.args must be a list of strings")
        # clientcmd's ResolveLocalPaths (GetAuthInfoFileReferences): a command with a path
        # separator is relative to the kubeconfig's folder; a bare name is looked up on PATH.
        if os.sep in command and not os.path.isabs(command):
            command = str(base / command)
        return cls(command, api_version, tuple(str(a) for a in args), tuple(env),
                   str(stanza.get("installHint") or ""), bool(stanza.get("provideClusterInfo")), cluster)


def exec_cluster(cluster: Mapping[str, Any], *, base: Path) -> dict[str, Any]:
    """``spec.cluster`` of the ExecCredential (rest.ConfigToExecCluster): the server, TLS settings,
    the CA as base64 data (read from ``certificate-authority`` when given as a file) and the
    cluster's exec extension as ``config``."""
    out: dict[str, Any] = {"server": str(cluster.get("server") or "")}
    for key in ("tls-server-name", "proxy-url"):
        if cluster.get(key):
            out[key] = str(cluster[key])
    for key in ("insecure-skip-tls-verify", "disable-compression"):
        if cluster.get(key):
            out[key] = True
    ca = cluster.get("certificate-authority-data")
    if not ca and cluster.get("certificate-authority"):
        with contextlib.suppress(OSError):
            ca = base64.b64encode((base / str(cluster["certificate-authority"])).read_bytes()).decode()
    if ca:
        out["certificate-authority-data"] = str(ca)
    for extension in cluster.get("extensions") or ():
        if isinstance(extension, Mapping) and extension.get("name") == EXEC_EXTENSION:
            out["config"] = extension.get("extension")
    return out


@dataclass(frozen=True)
class Credential:
    """One answer of a plugin or an identity provider."""

    token: str | None
    expires: float | None = None  # seconds since the epoch; None: does not expire
    cert_pem: str = ""
    key_pem: str = ""


Runner = Callable[[list[str], Mapping[str, str], float], "subprocess.CompletedProcess[str]"]


def _run(argv: list[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=dict(env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=False)


class _Rotating:
    """What both kinds share: the credential held, when it must be obtained again, and one
    rotation at a time however many requests ask for it (client-go's Authenticator mutex)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.credential: Credential | None = None
        self.obtained_at = 0.0
        self._rotation: asyncio.Task[None] | None = None

    def __call__(self) -> str | None:
        """The token held now, without obtaining one."""
        return self.credential.token if self.credential is not None else None

    def stale(self) -> bool:
        raise NotImplementedError

    async def _obtain(self) -> Credential:
        raise NotImplementedError

    def _adopt(self, credential: Credential) -> None:
        self.credential = credential
        self.obtained_at = self.clock()

    async def current(self) -> str | None:
        """The token to send: obtained again first when it is missing or about to expire. A token
        that failed to renew is still sent until it has actually expired."""
        held = self.credential
        if held is None or self.stale():
            try:
                await self._rotate(held)
            except CredentialError as exc:
                if held is None or (held.expires is not None and self.clock() >= held.expires):
                    raise
                log.warning("renewing credentials before they expire failed (the current ones are sent "
                            "meanwhile): %s", exc)
        return self()

    async def rejected(self, token: str | None) -> None:
        """The API server answered 401 to ``token``: obtain another, unless that happened already.
        A failure is logged, not raised: the caller reports the 401 (client-go's RoundTrip)."""
        if self.credential is None or token != self.credential.token:
            return
        try:
            await self._rotate(self.credential)
        except CredentialError as exc:
            log.warning("refreshing credentials after 401 Unauthorized: %s", exc)

    async def _rotate(self, seen: Credential | None) -> None:
        if self.credential is not seen:
            return  # rotated meanwhile (maybeRefreshCreds)
        task = self._rotation
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            task = self._rotation = asyncio.ensure_future(self._obtain_and_adopt())
        await asyncio.shield(task)

    async def _obtain_and_adopt(self) -> None:
        self._adopt(await self._obtain())


class ExecCredentials(_Rotating):
    """A token (or client certificate) from an exec plugin, run again near expiry and after a 401."""

    def __init__(self, config: ExecConfig, *, clock: Clock = time.time, run: Runner = _run,
                 ssl_context: ssl.SSLContext | None = None, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(clock)
        self.config = config
        self.runs = 0
        self._run = run
        self._ssl_context = ssl_context
        self._environ = environ

    def stale(self) -> bool:
        expires = self.credential.expires if self.credential is not None else None
        if expires is None:
            return False
        skew = min(EXPIRY_SKEW, max(expires - self.obtained_at, 0.0) / 2)
        return self.clock() >= expires - skew

    def obtain_now(self) -> None:
        """Run the plugin once, blocking (when the kubeconfig is read, before any loop runs)."""
        self._adopt(self.run_plugin())

    async def _obtain(self) -> Credential:
        return await asyncio.to_thread(self.run_plugin)

    def _adopt(self, credential: Credential) -> None:
        if credential.cert_pem and self._ssl_context is not None:
            _load_client_certificate(self._ssl_context, credential.cert_pem, credential.key_pem)
        super()._adopt(credential)

    def exec_info(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"interactive": False}
        if self.config.provide_cluster_info and self.config.cluster is not None:
            spec["cluster"] = dict(self.config.cluster)
        return {"apiVersion": self.config.api_version, "kind": "ExecCredential", "spec": spec}

    def run_plugin(self) -> Credential:
        """Run the plugin and read its ExecCredential (refreshCredsLocked)."""
        cfg = self.config
        env = dict(os.environ if self._environ is None else self._environ)
        env.update(cfg.env)
        env[EXEC_INFO] = json.dumps(self.exec_info())
        self.runs += 1
        try:
            done = self._run([cfg.command, *cfg.args], env, EXEC_TIMEOUT)
        except FileNotFoundError:
            raise CredentialError(self._not_found()) from None
        except PermissionError as exc:
            raise CredentialError(f"exec: executable {cfg.command} cannot be run: {exc.strerror}") from None
        except subprocess.TimeoutExpired:
            raise CredentialError(f"exec: executable {cfg.command} gave no answer within {EXEC_TIMEOUT:g} s "
                                  "(it may be waiting for an interactive login)") from None
        if done.returncode != 0:
            said = " ".join((done.stderr or "").split())[-300:]
            raise CredentialError(f"exec: executable {cfg.command} failed with exit code {done.returncode}"
                                  + (f": {said}" if said else ""))
        return self._decode(done.stdout)

    def _not_found(self) -> str:
        hint = " ".join(self.config.install_hint.split())  # one line, however the kubeconfig wraps it
        return f"exec: executable {self.config.command} not found. {INSTALL_HELP}" + (f". {hint}" if hint else "")

    def _decode(self, stdout: str) -> Credential:
        cfg = self.config
        try:
            answer = json.loads(stdout)
        except ValueError as exc:
            raise CredentialError(f"exec: decoding the output of {cfg.command}: {exc}") from None
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise CredentialError(f"exec: {cfg.command} did not print an ExecCredential")
        if answer.get("apiVersion") != cfg.api_version:
            raise CredentialError(f"exec plugin is configured to use API version {cfg.api_version}, "
                                  f"plugin returned version {answer.get('apiVersion')}")
        status = answer.get("status")
        if not isinstance(status, dict):
            raise CredentialError("exec plugin didn't return a status field")
        token = str(status.get("token") or "")
        cert, key = str(status.get("clientCertificateData") or ""), str(status.get("clientKeyData") or "")
        if not token and not cert and not key:
            raise CredentialError("exec plugin didn't return a token or cert/key pair")
        if bool(cert) != bool(key):
            raise CredentialError("exec plugin returned only certificate or key, not both")
        if cert and self._ssl_context is None:
            raise CredentialError("exec plugin returned a client certificate for a server reached without TLS")
        expires = status.get("expirationTimestamp")
        return Credential(token or None, _rfc3339(expires, "exec plugin status.expirationTimestamp")
                          if expires else None, cert, key)


def _rfc3339(value: Any, what: str) -> float:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise CredentialError(f"{what}: {value!r} is not an RFC 3339 time") from None


def _load_client_certificate(context: ssl.SSLContext, cert_pem: str, key_pem: str) -> None:
    """Load PEM data into ``context`` (new connections present it). ``ssl`` reads files only:
    the pair is written to a private temporary folder and removed at once."""
    with tempfile.TemporaryDirectory(prefix="placement-webhook-exec-") as folder:
        cert, key = Path(folder) / "tls.crt", Path(folder) / "tls.key"
        for path, data in ((cert, cert_pem), (key, key_pem)):
            path.touch(mode=0o600)
            path.write_text(data)
        try:
            context.load_cert_chain(str(cert), str(key))
        except ssl.SSLError as exc:
            raise CredentialError(f"failed parsing the exec plugin's client key/certificate: {exc}") from None


# ---- the oidc auth-provider ----

@dataclass(frozen=True)
class OidcConfig:
    """``auth-provider.config`` of a user named ``oidc``: where it is written back, and the issuer."""

    kubeconfig: Path
    user: str
    issuer: str
    client_id: str
    client_secret: str = ""
    ca_file: str = ""
    ca_data: str = ""

    @classmethod
    def parse(cls, config: Mapping[str, Any], *, kubeconfig: Path, user: str) -> OidcConfig:
        for field in ("idp-issuer-url", "client-id"):  # newOIDCAuthProvider: "Must provide ..."
            if not config.get(field):
                raise CredentialConfigError(f"user {user!r}: auth-provider.config.{field} must be provided")
        ca_file = str(config.get("idp-certificate-authority") or "")
        if ca_file and not os.path.isabs(ca_file):
            ca_file = str(kubeconfig.parent / ca_file)
        return cls(kubeconfig, user, str(config["idp-issuer-url"]), str(config["client-id"]),
                   str(config.get("client-secret") or ""), ca_file, str(config.get("idp-certificate-authority-data") or ""))


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT, in seconds since the epoch; None when it has none.
    Raises CredentialError for a token that is not a JWT (idTokenExpired)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise CredentialError("the id-token is not a valid JWT")
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        raise CredentialError("the id-token's claims cannot be decoded") from None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


class OidcCredentials(_Rotating):
    """An OIDC id-token, refreshed with the refresh token near its ``exp`` and after a 401."""

    def __init__(self, config: OidcConfig, id_token: str, refresh_token: str, *, clock: Clock = time.time) -> None:
        super().__init__(clock)
        self.config = config
        self.refresh_token = refresh_token
        self.refreshes = 0
        if id_token:
            self._adopt(Credential(id_token, _expiry_or_none(id_token)))

    def stale(self) -> bool:
        expires = self.credential.expires if self.credential is not None else None
        return expires is not None and self.clock() + OIDC_EXPIRY_DELTA >= expires

    async def _obtain(self) -> Credential:
        stored = self._stored()
        if stored is not None:
            id_token, refresh_token = stored
            held = self.credential.token if self.credential is not None else None
            expires = _expiry_or_none(id_token) if id_token else None
            if id_token and id_token != held and (expires is None or self.clock() + OIDC_EXPIRY_DELTA < expires):
                self.refresh_token = refresh_token  # refreshed by another program (kubectl): take it
                return Credential(id_token, expires)
            self.refresh_token = refresh_token or self.refresh_token
        if not self.refresh_token:
            raise CredentialError("no valid id-token, and cannot refresh without refresh-token")
        answer = await self._exchange()
        fresh = answer.get("id_token")
        if not isinstance(fresh, str) or not fresh:
            raise CredentialError("the token response did not contain an id_token: either the scope \"openid\" "
                                  "wasn't requested upon login, or the provider doesn't return id_tokens on refresh")
        refreshed = answer.get("refresh_token")
        if isinstance(refreshed, str) and refreshed:
            self.refresh_token = refreshed
        self.refreshes += 1
        self._persist(fresh)
        return Credential(fresh, _expiry_or_none(fresh))

    async def _exchange(self) -> dict[str, Any]:
        """OpenID Connect discovery for the token endpoint, then the refresh_token grant with the
        client's id and secret as HTTP basic credentials (RFC 6749 section 2.3.1)."""
        import aiohttp

        cfg = self.config
        context = self._ca_context()
        # RFC 6749 section 2.3.1: both are form-encoded before the basic scheme encodes them.
        pair = f"{quote_plus(cfg.client_id)}:{quote_plus(cfg.client_secret)}"
        auth = "Basic " + base64.b64encode(pair.encode()).decode()
        timeout = aiohttp.ClientTimeout(total=30.0)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                discovery = await _json(session, "GET", cfg.issuer.rstrip("/") + "/.well-known/openid-configuration",
                                        ssl_context=context)
                endpoint = discovery.get("token_endpoint")
                if not isinstance(endpoint, str) or not endpoint:
                    raise CredentialError("oidc: the discovery document has no token_endpoint")
                form = {"grant_type": "refresh_token", "refresh_token": self.refresh_token}
                return await _json(session, "POST", endpoint, ssl_context=context, data=form, authorization=auth)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise CredentialError(f"oidc: cannot reach the identity provider {cfg.issuer}: {exc}") from None

    def _ca_context(self) -> ssl.SSLContext | None:
        cfg = self.config
        if not cfg.ca_file and not cfg.ca_data:
            return None  # the system's roots, as client-go's transport uses
        try:
            data = base64.b64decode(cfg.ca_data).decode() if cfg.ca_data else None
            return ssl.create_default_context(cafile=cfg.ca_file or None, cadata=data)
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise CredentialError(f"oidc: cannot load the identity provider's CA: {exc}") from None

    def _stored(self) -> tuple[str, str] | None:
        """The user's id-token and refresh-token as the kubeconfig file holds them now."""
        import yaml

        try:
            document = yaml.safe_load(self.config.kubeconfig.read_text())
        except (OSError, yaml.YAMLError):
            return None
        provider = _provider_config(document, self.config.user)
        if provider is None:
            return None
        return str(provider.get("id-token") or ""), str(provider.get("refresh-token") or "")

    def _persist(self, id_token: str) -> None:
        """Write the new tokens back into the kubeconfig (client-go's AuthProviderConfigPersister).
        A file that cannot be written keeps its old tokens; the new ones are used anyway."""
        import yaml

        path = Path(os.path.realpath(self.config.kubeconfig))
        try:
            document = yaml.safe_load(path.read_text())
            provider = _provider_config(document, self.config.user)
            if provider is None:
                return
            provider["id-token"] = id_token
            provider["refresh-token"] = self.refresh_token
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            try:
                with os.fdopen(fd, "w") as out:
                    yaml.safe_dump(document, out, default_flow_style=False, sort_keys=False)
                os.chmod(temp, path.stat().st_mode & 0o777)
                os.replace(temp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except (OSError, yaml.YAMLError) as exc:
            log.warning("oidc: could not persist the refreshed tokens to %s: %s", path, exc)


def _expiry_or_none(token: str) -> float | None:
    try:
        return jwt_expiry(token)
    except CredentialError:
        return None  # not a JWT: used as it is, and refreshed only after a 401


def _provider_config(document: Any, user: str) -> dict[str, Any] | None:
    users = document.get("users") if isinstance(document, dict) else None
    for entry in users if isinstance(users, list) else ():
        if isinstance(entry, dict) and entry.get("name") == user:
            provider = (entry.get("user") or {}).get("auth-provider") or {}
            config = provider.get("config") if isinstance(provider, dict) else None
            return config if isinstance(config, dict) else None
    return None


async def _json(session: Any, method: str, url: str, *, ssl_context: ssl.SSLContext | None,
                data: Mapping[str, str] | None = None, authorization: str = "") -> dict[str, Any]:
    headers = {"Accept": "application/json", **({"Authorization": authorization} if authorization else {})}
    async with session.request(method, url, data=data, ssl=ssl_context if ssl_context else True,
                               headers=headers) as resp:
        body = await resp.text()
        if resp.status != 200:
            raise CredentialError(f"oidc: {method} {url}: {resp.status} {' '.join(body.split())[:80]}")
    try:
        value = json.loads(body)
    except ValueError:
        raise CredentialError(f"oidc: {method} {url}: the answer is not JSON") from None
    if not isinstance(value, dict):
        raise CredentialError(f"oidc: {method} {url}: the answer is not a JSON object")
    return value


Credentials = ExecCredentials | OidcCredentials

__all__ = ["CredentialConfigError", "CredentialError", "Credentials", "ExecConfig", "ExecCredentials",
           "OidcConfig", "OidcCredentials", "exec_cluster", "jwt_expiry"]
