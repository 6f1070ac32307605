"""placement-webhook spot-controller as a user runs it: --dry-run, configuration errors."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.kit.kubeconfigs import token_kubeconfig
from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import pod
from webhook import cli


def test_a_dry_run_prints_the_plan_and_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeApiServer.in_thread("1.31.0") as api:
        api.load([{"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": "spot-1", "labels": {"karpenter.sh/capacity-type": "spot"}},
                   "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}},
                  pod("web-1", "shop", node_name="spot-1")])
        api.write_kubeconfig(tmp_path / "kubeconfig")
        code = cli.main(["spot-controller", "--dry-run", "--provider", "karpenter",
                         "--kubeconfig", str(tmp_path / "kubeconfig")])
        writes = [r for r in api.requests if r.method in ("POST", "PATCH", "PUT", "DELETE")]
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines() == ["node spot-1: taint karpenter.sh/disrupted: cordon it, then evict:",
                                              "  shop/web-1"]
    assert writes == []


def test_a_broken_config_is_a_usage_error_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spot.yaml"
    path.write_text("reclaim:\n  notReadySecond: 60\n")
    assert cli.main(["spot-controller", "--config", str(path), "--dry-run"]) == 2
    assert f"{path}:2: reclaim.notReadySecond" in capsys.readouterr().err


def test_a_dry_run_against_a_closed_port_is_one_error_line_at_once_naming_the_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.envtest import free_port

    server = f"http://127.0.0.1:{free_port()}"  # a closed port
    kubeconfig = token_kubeconfig(tmp_path / "kubeconfig", server)
    began = time.monotonic()
    code = cli.main(["spot-controller", "--dry-run", "--kubeconfig", str(kubeconfig)])
    err = capsys.readouterr().err
    assert time.monotonic() - began < 0.5  # not the 60 s --sync-timeout
    assert code == 2
    assert f"error: cannot reach the API server at {server}: connection refused\n" in err
    assert "SSLContext" not in err and "within 60 s" not in err
