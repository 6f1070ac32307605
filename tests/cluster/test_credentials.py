"""Credentials that expire: exec plugins and the oidc auth-provider, renewed as client-go renews
them, against the fake API server (which accepts one bearer token at a time). Time is a fake
clock; nothing sleeps."""
from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import node
from webhook.cluster.cache import NODES, ClusterCache
from webhook.cluster.client import ApiError, Client
from webhook.cluster.config import ConfigError, from_kubeconfig, load
from webhook.cluster.credentials import ExecCredentials, OidcCredentials

T0 = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
HOUR = 3600.0
V1 = "client.authentication.k8s.io/v1"

# Counts its runs in a file, saves the KUBERNETES_EXEC_INFO it was given, and prints token-<run>
# expiring <run> hours after EXPIRES_BASE (seconds since the epoch, from the kubeconfig's env).
PLUGIN = """\
import datetime, json, os, pathlib, sys
here = pathlib.Path(sys.argv[0]).parent
runs = here / "runs"
n = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(n))
(here / "exec-info.json").write_text(os.environ.get("KUBERNETES_EXEC_INFO", ""))
if os.environ.get("FAIL"):
    print("the identity service is down", file=sys.stderr)
    sys.exit(3)
status = {"token": f"token-{n}"}
if os.environ.get("EXPIRES_BASE"):
    at = float(os.environ["EXPIRES_BASE"]) + 3600 * n
    status["expirationTimestamp"] = datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({"apiVersion": os.environ.get("ANSWER_VERSION", "V1"), "kind": "ExecCredential", "status": status}))
""".replace('"V1"', f'"{V1}"')


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def plugin(folder: Path) -> Path:
    """The fake plugin as an executable in ``folder/bin`` (named relative to the kubeconfig)."""
    script = folder / "bin" / "fake-login"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"#!{sys.executable}\n{PLUGIN}")
    script.chmod(0o755)
    return script


def runs(folder: Path) -> int:
    counter = folder / "bin" / "runs"
    return int(counter.read_text()) if counter.exists() else 0


def kubeconfig(folder: Path, server: str, user: dict[str, Any], **cluster: Any) -> Path:
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "me", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "me"}}]}))
    return path


def exec_user(**overrides: Any) -> dict[str, Any]:
    stanza: dict[str, Any] = {"apiVersion": V1, "command": "bin/fake-login", "interactiveMode": "Never",
                              "env": [{"name": "EXPIRES_BASE", "value": str(T0)}]}
    stanza.update(overrides)
    return {"exec": stanza}


def bearers(server: FakeApiServer) -> list[str]:
    return [r.headers.get("Authorization", "") for r in server.requests]


# ---- exec plugins ----

async def test_an_exec_plugin_runs_once_and_again_just_before_its_credential_expires(tmp_path: Path) -> None:
    plugin(tmp_path)
    clock = Clock(T0)  # the first credential expires at T0 + 1 h
    async with FakeApiServer("1.31.0", token="token-1") as server:
        config = from_kubeconfig(str(kubeconfig(tmp_path, server.url, exec_user())), clock=clock)
        assert runs(tmp_path) == 1  # when the kubeconfig is read
        api = Client(config, request_timeout=2.0)
        try:
            for _ in range(3):
                assert await api.version() == (1, 31)
            assert runs(tmp_path) == 1  # a credential is used until it expires
            server.accept_only("token-2")
            clock.now = T0 + HOUR - 5  # about to expire: obtained again before the request is sent
            await api.version()
            assert runs(tmp_path) == 2
            assert bearers(server) == ["Bearer token-1"] * 3 + ["Bearer token-2"]  # no 401 on the way
        finally:
            await api.close()


async def test_a_401_runs_the_plugin_again_once_however_many_requests_got_it(tmp_path: Path) -> None:
    plugin(tmp_path)
    async with FakeApiServer("1.31.0", token="token-1") as server:
        config = from_kubeconfig(str(kubeconfig(tmp_path, server.url, exec_user(env=[]))), clock=Clock(T0))
        api = Client(config, request_timeout=2.0)
        try:
            await api.version()
            server.accept_only("token-2")  # the server stops accepting token-1 (revoked, or its clock is ahead)
            answers = await asyncio.gather(*(api.get("/api/v1/nodes") for _ in range(5)), return_exceptions=True)
            assert [a.status for a in answers if isinstance(a, ApiError)] == [401] * 5  # not retried here
            assert runs(tmp_path) == 2  # one run for the five 401s (maybeRefreshCreds)
            assert (await api.get("/api/v1/nodes"))["kind"] == "NodeList"  # the next request sends token-2
        finally:
            await api.close()


async def test_a_long_running_view_keeps_syncing_when_its_token_is_rotated(tmp_path: Path,
                                                                           until: Callable[..., Any]) -> None:
    plugin(tmp_path)
    async with FakeApiServer("1.31.0", token="token-1", bookmark_interval=0.2) as server:
        config = from_kubeconfig(str(kubeconfig(tmp_path, server.url, exec_user(env=[]))), clock=Clock(T0))
        api = Client(config, request_timeout=2.0, watch_grace=2.0)
        from tests.cluster.conftest import make_cache

        view: ClusterCache = make_cache(api)
        await view.start()
        try:
            assert await view.wait_synced(3.0)
            server.accept_only("token-2")
            server.drop_watches()  # the watches must be opened again, with a token the server takes
            server.apply_object(node("after-rotation"))
            await until(lambda: view.informers[NODES].get("after-rotation") is not None, what="the new node")
            assert runs(tmp_path) == 2
        finally:
            await asyncio.wait_for(view.stop(), 3.0)
            await api.close()


async def test_the_plugin_gets_the_cluster_its_env_and_args_and_is_never_interactive(tmp_path: Path) -> None:
    plugin(tmp_path)
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nnot checked by the plugin\n").decode()
    user = exec_user(args=["--audience", "fleet"], provideClusterInfo=True, interactiveMode="IfAvailable",
                     env=[{"name": "ANSWER_VERSION", "value": V1}])
    path = kubeconfig(tmp_path, "http://127.0.0.1:1", user, **{
        "tls-server-name": "api.internal", "certificate-authority-data": ca,
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "fleet"}}]})
    config = from_kubeconfig(str(path), clock=Clock(T0))
    assert config.token() == "token-1"
    info = json.loads((tmp_path / "bin" / "exec-info.json").read_text())
    assert info == {"apiVersion": V1, "kind": "ExecCredential", "spec": {
        "interactive": False,
        "cluster": {"server": "http://127.0.0.1:1", "tls-server-name": "api.internal",
                    "certificate-authority-data": ca, "config": {"audience": "fleet"}}}}


async def test_without_provide_cluster_info_the_plugin_is_not_told_the_cluster(tmp_path: Path) -> None:
    plugin(tmp_path)
    from_kubeconfig(str(kubeconfig(tmp_path, "http://127.0.0.1:1", exec_user())), clock=Clock(T0))
    info = json.loads((tmp_path / "bin" / "exec-info.json").read_text())
    assert info == {"apiVersion": V1, "kind": "ExecCredential", "spec": {"interactive": False}}


def test_a_missing_plugin_is_a_usage_error_with_its_install_hint(tmp_path: Path) -> None:
    user = exec_user(command="kubectl-fake-login-not-installed",
                     installHint="Install it with:\n  brew install fake-login\n")
    path = kubeconfig(tmp_path, "http://127.0.0.1:1", user)
    with pytest.raises(ConfigError) as caught:
        load(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: user 'me': getting credentials: exec: executable "
                              "kubectl-fake-login-not-installed not found. ")
    assert message.endswith("Install it with: brew install fake-login") and "\n" not in message


def test_a_failing_plugin_is_a_usage_error_with_its_exit_code_and_what_it_said(tmp_path: Path) -> None:
    plugin(tmp_path)
    path = kubeconfig(tmp_path, "http://127.0.0.1:1", exec_user(env=[{"name": "FAIL", "value": "1"}]))
    with pytest.raises(ConfigError, match=r"bin/fake-login failed with exit code 3: the identity service is down$"):
        load(str(path))


@pytest.mark.parametrize(("stanza", "error"), [
    ({"interactiveMode": None}, "exec.interactiveMode must be specified"),
    ({"interactiveMode": "Always"}, "exec.interactiveMode is Always, but placement-webhook never runs a credential "
                                    "plugin interactively"),
    ({"interactiveMode": "Sometimes"}, "exec.interactiveMode 'Sometimes' is not one of Never, IfAvailable, Always"),
    ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "exec.apiVersion 'client.authentication.k8s.io/v1alpha1'"),
    ({"command": ""}, "exec.command must be specified"),
    ({"env": [{"value": "x"}]}, r"exec.env\[0\].name must be specified"),
])
def test_an_exec_stanza_clientcmd_would_refuse_is_a_usage_error_naming_the_field(
        tmp_path: Path, stanza: dict[str, Any], error: str) -> None:
    plugin(tmp_path)
    user = exec_user(**stanza)
    user["exec"] = {k: v for k, v in user["exec"].items() if v is not None}
    path = kubeconfig(tmp_path, "http://127.0.0.1:1", user)
    with pytest.raises(ConfigError, match=f"^{path}: user 'me': {error}"):
        load(str(path))
    assert runs(tmp_path) == 0


def test_v1beta1_defaults_to_if_available_and_the_answer_must_be_of_the_configured_version(tmp_path: Path) -> None:
    plugin(tmp_path)
    beta = "client.authentication.k8s.io/v1beta1"
    good = kubeconfig(tmp_path, "http://127.0.0.1:1", exec_user(
        apiVersion=beta, interactiveMode=None, env=[{"name": "ANSWER_VERSION", "value": beta}]))
    assert load(str(good)).token() == "token-1"
    wrong = kubeconfig(tmp_path, "http://127.0.0.1:1", exec_user(apiVersion=beta, interactiveMode="Never"))
    with pytest.raises(ConfigError, match=f"configured to use API version {beta}, plugin returned version {V1}"):
        load(str(wrong))


def test_a_token_in_the_user_wins_over_its_exec_plugin(tmp_path: Path) -> None:
    plugin(tmp_path)
    user = {**exec_user(), "token": "static"}
    config = load(str(kubeconfig(tmp_path, "http://127.0.0.1:1", user)))
    assert config.token() == "static" and config.credentials is None and runs(tmp_path) == 0


# ---- the oidc auth-provider ----

def jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def id_token(n: int) -> str:
    """The n-th id-token the fake issuer hands out: valid until T0 + n hours."""
    return jwt({"iss": "fake-idp", "sub": "me", "exp": int(T0 + HOUR * n)})


class Issuer:
    """A fake OpenID Connect issuer: discovery and the refresh_token grant, rotating refresh tokens."""

    def __init__(self) -> None:
        self.refresh_token = "refresh-0"
        self.grants: list[dict[str, str]] = []
        self.url = ""

    async def discovery(self, _: web.Request) -> web.Response:
        return web.json_response({"issuer": self.url, "token_endpoint": f"{self.url}/token"})

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.grants.append({**{k: str(v) for k, v in form.items()},
                            "authorization": request.headers.get("Authorization", "")})
        if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != self.refresh_token:
            return web.json_response({"error": "invalid_grant"}, status=400)
        n = len(self.grants)
        self.refresh_token = f"refresh-{n}"
        return web.json_response({"access_token": "unused", "token_type": "Bearer", "id_token": id_token(n + 1),
                                  "refresh_token": self.refresh_token})


@pytest.fixture
async def issuer() -> AsyncIterator[Issuer]:
    fake = Issuer()
    app = web.Application()
    app.router.add_get("/.well-known/openid-configuration", fake.discovery)
    app.router.add_post("/token", fake.token)
    server = TestServer(app)
    await server.start_server()
    fake.url = str(server.make_url("")).rstrip("/")
    yield fake
    await server.close()


def oidc_user(issuer: Issuer, token: str) -> dict[str, Any]:
    return {"auth-provider": {"name": "oidc", "config": {
        "idp-issuer-url": issuer.url, "client-id": "kubectl", "client-secret": "s3cret",
        "id-token": token, "refresh-token": "refresh-0"}}}


def stored(path: Path) -> dict[str, Any]:
    config = yaml.safe_load(path.read_text())["users"][0]["user"]["auth-provider"]["config"]
    assert isinstance(config, dict)
    return config


async def test_an_oidc_id_token_is_refreshed_near_its_exp_and_the_new_tokens_written_back(
        tmp_path: Path, issuer: Issuer) -> None:
    clock = Clock(T0)
    async with FakeApiServer("1.31.0", token=id_token(1)) as server:
        path = kubeconfig(tmp_path, server.url, oidc_user(issuer, id_token(1)))
        config = from_kubeconfig(str(path), clock=clock)
        api = Client(config, request_timeout=2.0)
        try:
            await api.version()
            assert issuer.grants == []  # valid until T0 + 1 h
            server.accept_only(id_token(2))
            clock.now = T0 + HOUR - 5  # within oidc.go's expiryDelta of 10 s
            await api.version()
        finally:
            await api.close()
    assert bearers(server) == [f"Bearer {id_token(1)}", f"Bearer {id_token(2)}"]
    basic = "Basic " + base64.b64encode(b"kubectl:s3cret").decode()
    assert issuer.grants == [{"grant_type": "refresh_token", "refresh_token": "refresh-0", "authorization": basic}]
    assert stored(path) == {**stored(path), "id-token": id_token(2), "refresh-token": "refresh-1"}
    assert stored(path)["idp-issuer-url"] == issuer.url  # the rest of the file is kept


async def test_a_401_to_an_oidc_token_refreshes_it_unless_the_kubeconfig_holds_a_newer_one(
        tmp_path: Path, issuer: Issuer) -> None:
    async with FakeApiServer("1.31.0", token=id_token(1)) as server:
        path = kubeconfig(tmp_path, server.url, oidc_user(issuer, id_token(1)))
        api = Client(from_kubeconfig(str(path), clock=Clock(T0)), request_timeout=2.0)
        try:
            await api.version()
            server.accept_only(id_token(2))
            with pytest.raises(ApiError, match="401"):
                await api.version()
            await api.version()  # refreshed after the 401
            assert len(issuer.grants) == 1
            # kubectl refreshed the tokens meanwhile and wrote them to the file: those are taken,
            # and the issuer is not asked (its refresh token would be stale).
            newer = jwt({"sub": "me", "exp": int(T0 + 5 * HOUR)})
            document = yaml.safe_load(path.read_text())
            document["users"][0]["user"]["auth-provider"]["config"].update({"id-token": newer,
                                                                            "refresh-token": "from-kubectl"})
            path.write_text(yaml.safe_dump(document))
            server.accept_only(newer)
            with pytest.raises(ApiError, match="401"):
                await api.version()
            await api.version()
            assert len(issuer.grants) == 1
            credentials = api.config.credentials
            assert isinstance(credentials, OidcCredentials) and credentials.refresh_token == "from-kubectl"
        finally:
            await api.close()


def test_an_oidc_provider_without_issuer_or_client_is_a_usage_error(tmp_path: Path) -> None:
    user = {"auth-provider": {"name": "oidc", "config": {"client-id": "kubectl", "id-token": "x.y.z"}}}
    path = kubeconfig(tmp_path, "http://127.0.0.1:1", user)
    with pytest.raises(ConfigError, match=f"^{path}: user 'me': auth-provider.config.idp-issuer-url must be provided"):
        load(str(path))


async def test_an_expired_oidc_token_without_a_refresh_token_is_one_line_naming_the_server(tmp_path: Path) -> None:
    user = {"auth-provider": {"name": "oidc", "config": {"idp-issuer-url": "http://127.0.0.1:1", "client-id": "k",
                                                         "id-token": id_token(1)}}}
    config = from_kubeconfig(str(kubeconfig(tmp_path, "http://127.0.0.1:1", user)), clock=Clock(T0 + 2 * HOUR))
    from webhook.cluster.snapshot import Refused, read_once

    answer = await read_once(config, timeout=30.0)
    assert isinstance(answer, Refused)
    assert answer == ("cannot get credentials for the API server at http://127.0.0.1:1: "
                      "no valid id-token, and cannot refresh without refresh-token")


def test_exec_credentials_are_what_the_config_reads_its_token_from(tmp_path: Path) -> None:
    plugin(tmp_path)
    config = load(str(kubeconfig(tmp_path, "http://127.0.0.1:1", exec_user())))
    assert isinstance(config.credentials, ExecCredentials) and config.token is config.credentials


# ---- a user defined in a later file of a $KUBECONFIG list ----


def _chooser(folder: Path, server: str) -> Path:
    """A kubeconfig that picks context c, naming a user it does not define (another file does)."""
    folder.mkdir()
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "me"}}]}))
    return path


async def test_an_exec_plugin_from_a_listed_file_runs_relative_to_that_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    users = tmp_path / "users"
    users.mkdir()
    plugin(users)
    async with FakeApiServer("1.31.0", token="token-1") as server:
        chooser = _chooser(tmp_path / "chooser", server.url)
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setenv("KUBECONFIG", f"{chooser}:{kubeconfig(users, server.url, exec_user())}")
        config = load(None, user_default=True)
        assert runs(users) == 1  # bin/fake-login beside the file that defines the user
        api = Client(config, request_timeout=2.0)
        try:
            assert await api.version() == (1, 31)
        finally:
            await api.close()


async def test_a_refreshed_oidc_token_is_written_to_the_listed_file_that_defines_the_user(
        tmp_path: Path, issuer: Issuer) -> None:
    users = tmp_path / "users"
    users.mkdir()
    clock = Clock(T0)
    async with FakeApiServer("1.31.0", token=id_token(1)) as server:
        chooser = _chooser(tmp_path / "chooser", server.url)
        defining = kubeconfig(users, server.url, oidc_user(issuer, id_token(1)))
        listed = f"{chooser}:{defining}"
        config = from_kubeconfig(listed, clock=clock, listed=True)
        api = Client(config, request_timeout=2.0)
        try:
            server.accept_only(id_token(2))
            clock.now = T0 + HOUR - 5
            await api.version()
        finally:
            await api.close()
    assert stored(defining)["id-token"] == id_token(2)
    assert "users" not in yaml.safe_load(chooser.read_text())  # the file that only chose the context is untouched
