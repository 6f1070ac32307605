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
