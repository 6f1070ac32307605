"""Loading the cluster configuration: kubeconfig (TLS, token, insecure) and the service account."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.kit.fakeapi import FakeApiServer
from webhook.cluster.cache import ClusterCache
from webhook.cluster.client import ApiError, Client
from webhook.cluster.config import ConfigError, FileTokenSource, in_cluster, load


async def test_a_kubeconfig_with_ca_data_and_a_token_reaches_a_tls_server(tmp_path: Path) -> None:
    async with FakeApiServer("1.31.0", tls=True, token="s3cret") as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig", tls=True, token="s3cret")
        config = load(str(path), None)
        assert config.host == server.url and config.ssl_context is not None
        assert config.token() == "s3cret"
        api = Client(config, request_timeout=2.0)
        view = ClusterCache(api, watch_timeout=5.0)
        try:
            assert await api.version() == (1, 31)
            await view.start()
            assert await view.wait_synced(3.0)
            assert view.namespace_labels("default") is not None
        finally:
            await asyncio.wait_for(view.stop(), 3.0)
            await api.close()
        wrong = Client(load(str(server.write_kubeconfig(tmp_path / "wrong", tls=True, token="nope")), None))
        try:
            with pytest.raises(ApiError) as caught:
                await wrong.get("/api/v1/nodes")
            assert caught.value.status == 401 and caught.value.reason == "Unauthorized"
        finally:
            await wrong.close()


async def test_insecure_skip_tls_verify_is_honoured(tmp_path: Path) -> None:
    async with FakeApiServer("1.31.0", tls=True) as server:
        config = load(str(server.write_kubeconfig(tmp_path / "kubeconfig", tls=False)), None)
        assert config.token() is None
        api = Client(config, request_timeout=2.0)
        try:
            assert (await api.get("/api/v1/namespaces/default"))["metadata"]["name"] == "default"
        finally:
            await api.close()


def test_kubeconfig_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(ConfigError, match=str(missing)):
        load(str(missing), None)
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    with pytest.raises(ConfigError, match=str(broken)):
        load(str(broken), None)
    with FakeApiServer.in_thread("1.31.0") as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig")
        with pytest.raises(ConfigError, match=f"{path}.*nowhere"):
            load(str(path), "nowhere")


def test_without_a_kubeconfig_the_service_account_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST"):
        in_cluster(tmp_path, {})
    with pytest.raises(ConfigError, match=str(tmp_path / "ca.crt")):
        in_cluster(tmp_path, {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"})


async def test_in_cluster_config_reaches_the_server_with_the_mounted_token(tmp_path: Path) -> None:
    async with FakeApiServer("1.31.0", tls=True, token="first") as server:
        assert server.certificates is not None
        (tmp_path / "ca.crt").write_bytes(server.certificates.ca_pem)
        (tmp_path / "token").write_text("first\n")
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(server.port)}
        config = in_cluster(tmp_path, env)
        assert config.host == f"https://127.0.0.1:{server.port}" and config.source == "in-cluster"
        api = Client(config, request_timeout=2.0)
        try:
            assert await api.version() == (1, 31)
        finally:
            await api.close()


def test_the_token_file_is_re_read_every_minute(tmp_path: Path) -> None:
    now = [0.0]
    token = tmp_path / "token"
    token.write_text("one")
    source = FileTokenSource(token, clock=lambda: now[0])
    token.write_text("two")
    now[0] = 59.0
    assert source() == "one"  # cached, as transport.NewCachedFileTokenSource
    now[0] = 60.0
    assert source() == "two"
    token.unlink()
    now[0] = 200.0
    assert source() == "two"  # a failed re-read keeps the last good token
    with pytest.raises(ConfigError, match=str(token)):
        FileTokenSource(token)


def test_the_server_never_falls_back_to_a_kubeconfig_its_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rule: --kubeconfig, else the in-cluster service account; $KUBECONFIG is for the CLI only.
    stray = tmp_path / "stray.kubeconfig"
    stray.write_text("not: used\n")
    monkeypatch.setenv("KUBECONFIG", str(stray))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="not running in a cluster"):
        load(None)
    with pytest.raises(ConfigError, match="stray.kubeconfig: invalid kubeconfig"):
        load(None, user_default=True)


# --- $KUBECONFIG as a list (client-go's ClientConfigLoadingRules.Load) ------------------------


def _kubeconfig(path: Path, *, current: str | None, clusters: dict[str, str], users: dict[str, dict[str, str]],
                contexts: dict[str, tuple[str, str]]) -> Path:
    import yaml

    document: dict[str, object] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": url}} for n, url in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": {"cluster": c, "user": u}} for n, (c, u) in contexts.items()],
    }
    if current is not None:
        document["current-context"] = current
    path.write_text(yaml.safe_dump(document))
    return path


def _not_in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_a_kubeconfig_list_is_merged_with_the_first_file_winning_as_kubectl_merges_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _kubeconfig(tmp_path / "first", current="dev", clusters={"shared": "http://first.example:6443"},
                        users={"me": {"token": "first-token"}}, contexts={"dev": ("shared", "me")})
    second = _kubeconfig(tmp_path / "second", current="prod",
                         clusters={"shared": "http://second.example:6443", "prod": "http://prod.example:6443"},
                         users={"me": {"token": "second-token"}, "ops": {"token": "ops-token"}},
                         contexts={"prod": ("prod", "ops"), "dev": ("prod", "ops")})
    _not_in_a_pod(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    config = load(None, user_default=True)
    # current-context, and every name both files define, from the first file that sets it
    # (the official Python client's merger would take the last file's current-context).
    assert (config.host, config.token()) == ("http://first.example:6443", "first-token")
    # A context only the second file defines is there to choose.
    prod = load(None, "prod", user_default=True)
    assert (prod.host, prod.token()) == ("http://prod.example:6443", "ops-token")


def test_the_current_context_comes_from_the_first_file_that_sets_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clusters_only = _kubeconfig(tmp_path / "clusters", current=None, clusters={"a": "http://a.example:6443"},
                                users={"me": {"token": "t"}}, contexts={"a": ("a", "me")})
    chooser = _kubeconfig(tmp_path / "chooser", current="a", clusters={}, users={}, contexts={})
    _not_in_a_pod(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", f"{clusters_only}:{chooser}")
    assert load(None, user_default=True).host == "http://a.example:6443"


def test_missing_files_in_the_list_are_skipped_and_a_list_of_none_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _kubeconfig(tmp_path / "real", current="a", clusters={"a": "http://a.example:6443"},
                       users={"me": {"token": "t"}}, contexts={"a": ("a", "me")})
    _not_in_a_pod(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'gone'}::{real}:{real}")
    assert load(None, user_default=True).host == "http://a.example:6443"
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'gone'}:{tmp_path / 'also-gone'}")
    with pytest.raises(ConfigError, match="none of its kubeconfig files exists"):
        load(None, user_default=True)


def test_an_explicit_kubeconfig_is_one_file_even_with_a_list_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = _kubeconfig(tmp_path / "listed", current="a", clusters={"a": "http://listed.example:6443"},
                         users={"me": {"token": "t"}}, contexts={"a": ("a", "me")})
    explicit = _kubeconfig(tmp_path / "explicit", current="a", clusters={"a": "http://explicit.example:6443"},
                           users={"me": {"token": "t"}}, contexts={"a": ("a", "me")})
    _not_in_a_pod(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", f"{listed}:{explicit}")
    assert load(str(explicit), user_default=True).host == "http://explicit.example:6443"
