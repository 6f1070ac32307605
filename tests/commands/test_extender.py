"""placement-webhook extender as a user runs it: the scheduler stanza, configuration errors."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.kit.envtest import free_port
from tests.kit.fakeapi import FakeApiServer
from webhook import cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_scheduler_stanza_is_ignorable_and_uses_https_for_an_https_url(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["extender", "--print-scheduler-config", "https://spot.placement-system.svc:8888",
                     "--url-prefix", "/v1", "--weight", "7"])
    out = capsys.readouterr().out
    (entry,) = yaml.safe_load(out)["extenders"]
    assert code == 0 and out.startswith("# Add to the KubeSchedulerConfiguration")
    assert entry["urlPrefix"] == "https://spot.placement-system.svc:8888/v1" and entry["ignorable"] is True
    assert (entry["filterVerb"], entry["prioritizeVerb"], entry["weight"], entry["nodeCacheCapable"]) == \
        ("filter", "prioritize", 7, True)
    assert entry["enableHTTPS"] is True and "caFile" in entry["tlsConfig"]


def test_objects_mode_and_plain_http_are_printed_as_asked(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["extender", "--print-scheduler-config", "http://127.0.0.1:8888", "--no-node-cache-capable"])
    (entry,) = yaml.safe_load(capsys.readouterr().out)["extenders"]
    assert entry["nodeCacheCapable"] is False and "enableHTTPS" not in entry


def test_a_broken_config_file_is_a_usage_error_naming_file_and_line(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spot.yaml"
    path.write_text("critical:\n  priorityThreshold: high\n")
    code = cli.main(["extender", "--config", str(path), "--no-cluster"])
    assert code == 2 and f"{path}:2: critical.priorityThreshold" in capsys.readouterr().err


def test_a_certificate_without_its_key_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["extender", "--tls-cert", "tls.crt", "--no-cluster"]) == 2
    assert "--tls-cert and --tls-key together" in capsys.readouterr().err


def _extender_reads_nodes_with(env: dict[str, str], api: FakeApiServer, tmp_path: Path) -> tuple[bool, str]:
    """Start ``extender`` with ``env`` and no --kubeconfig; whether it lists the fake API server's
    nodes before it exits or 20 s pass, and what it logged."""
    log = tmp_path / "extender.log"
    argv = [sys.executable, "-m", "webhook", "extender", "--host", "127.0.0.1", "--port", str(free_port())]
    with log.open("wb") as err:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT, env=env)
    try:
        listed = wait_for(lambda: any(r.path == "/api/v1/nodes" for r in api.requests) or process.poll() is not None)
        return listed and process.poll() is None, log.read_text()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _outside_a_pod(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(home)
    return env


def test_without_a_kubeconfig_flag_outside_a_pod_the_extender_reads_dollar_kubeconfig(tmp_path: Path) -> None:
    with FakeApiServer.in_thread("1.31.0") as api:
        env = _outside_a_pod(tmp_path / "home")
        env["KUBECONFIG"] = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        listed, log = _extender_reads_nodes_with(env, api, tmp_path)
    assert listed, log


def test_without_kubeconfig_flag_or_variable_the_extender_reads_the_home_kubeconfig(tmp_path: Path) -> None:
    with FakeApiServer.in_thread("1.31.0") as api:
        (tmp_path / "home" / ".kube").mkdir(parents=True)
        api.write_kubeconfig(tmp_path / "home" / ".kube" / "config")
        listed, log = _extender_reads_nodes_with(_outside_a_pod(tmp_path / "home"), api, tmp_path)
    assert listed, log
