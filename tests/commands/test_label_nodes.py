"""placement-webhook label-nodes as a user runs it: --once, --dry-run, exit codes."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kit.kubeconfigs import token_kubeconfig
from tests.kit.fakeapi import FakeApiServer
from tests.labeler.conftest import node, pod
from webhook import cli
from webhook.labeler.values import PREFIX

P = PREFIX
ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["label-nodes", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def api(tmp_path: Path) -> FakeApiServer:
    with FakeApiServer.in_thread("1.31.0") as server:
        server.load([node("cpu-1", labels={P + "cpu-usage": "90"}), node("gpu-1", gpus=2), pod("web-1", "cpu-1"),
                     pod("train-1", "gpu-1", gpus=1)])
        server.write_kubeconfig(tmp_path / "kubeconfig")
        yield server


def test_once_labels_every_node_and_a_second_run_writes_nothing(
        api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--once", "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert code == 0 and "2 node(s): 2 written, 0 already right" in err
    assert api.get_object("Node", "gpu-1")["metadata"]["labels"][P + "gpu-available"] == "1"
    api.clear_requests()
    code, _, err = run(capsys, "--once", "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert code == 0 and "0 written, 2 already right" in err
    assert not [r for r in api.requests if r.method == "PATCH"]


def test_a_dry_run_prints_current_and_computed_labels_and_writes_nothing(
        api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dry-run", "--kubeconfig", str(tmp_path / "kubeconfig"))
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["NODE", "LABEL", "CURRENT", "COMPUTED", "CHANGE"]
    assert ["cpu-1", "cpu-usage", "90", "25", "write"] in [line.split() for line in lines]
    assert ["gpu-1", "gpu-available", "-", "1", "write"] in [line.split() for line in lines]
    assert not [r for r in api.requests if r.method == "PATCH"]


def test_once_exits_one_when_a_write_fails(api: FakeApiServer, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    api.fail_next("PATCH", r"/api/v1/nodes/cpu-1$", 403, times=5, message="nodes is forbidden")
    code, _, err = run(capsys, "--once", "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert code == 1 and "error: node cpu-1: 403" in err and "1 written" in err


def test_a_missing_kubeconfig_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--once", "--kubeconfig", str(tmp_path / "none"))
    assert code == 2 and "kubeconfig" in err


def test_steps_are_configurable_and_must_be_whole(api: FakeApiServer, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dry-run", "--cpu-step", "1000", "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert code == 0 and ["cpu-1", "cpu-available", "-", "3000", "write"] in [line.split() for line in out.splitlines()]
    with pytest.raises(SystemExit) as exit_:
        cli.main(["label-nodes", "--cpu-step", "0"])
    assert exit_.value.code == 2


# Short enough for a quick test, long enough that a replica starved of CPU on a loaded CI machine
# still renews in time: a leader that misses its renew deadline exits, as client-go's components do,
# and nothing here restarts it.
LEASE, RENEW, RETRY = 4.0, 3.0, 0.4


def _start(kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "webhook", "label-nodes", "--kubeconfig", str(kubeconfig), "--leader-elect",
            "--lease-duration", str(LEASE), "--renew-deadline", str(RENEW), "--retry-period", str(RETRY), "--interval", "0.5",
            "--metrics-port", "0"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log.open("wb"), cwd=ROOT)


def _holder(api: FakeApiServer) -> str:
    lease = api.get_object("Lease", "placement-webhook-label-nodes", "default")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _wait(check: Callable[[], bool], what: str | Callable[[], str], timeout: float = 15.0) -> None:
    """Poll ``check``; ``what`` (or what it returns, read at the time out) names the wait."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        time.sleep(0.05)


def test_with_leader_election_one_replica_writes_and_another_takes_over_when_it_dies(
        api: FakeApiServer, tmp_path: Path) -> None:
    replicas = [_start(tmp_path / "kubeconfig", tmp_path / f"replica-{i}.log") for i in range(2)]
    try:
        _wait(lambda: bool(_holder(api)), "a leader")
        _wait(lambda: P + "cpu-usage" in api.get_object("Node", "cpu-1")["metadata"]["labels"], "the first labels")
        first = _holder(api)

        def logs_now() -> list[str]:
            return [(tmp_path / f"replica-{i}.log").read_text() for i in range(2)]

        # The write lands before its log line does: wait for the line, then count the writers.
        _wait(lambda: any("labelled node" in text for text in logs_now()), "the leader's log of its write")
        logs = logs_now()
        writers = [i for i, text in enumerate(logs) if "labelled node" in text]
        assert len(writers) == 1, "only the leader writes"
        leader = writers[0]
        replicas[leader].kill()  # no release: the other waits out the lease
        died = time.monotonic()
        _wait(lambda: _holder(api) not in ("", first), "the other replica to take the lease")
        assert time.monotonic() - died < LEASE + 2.2 * RETRY + 1.0, "taken over within the lease duration"
        api.patch_object("Node", "gpu-1", {"metadata": {"labels": {P + "gpu-available": "7"}}})
        survivor = replicas[1 - leader]
        _wait(lambda: api.get_object("Node", "gpu-1")["metadata"]["labels"][P + "gpu-available"] == "1",
              lambda: f"the new leader to put the label back (exit code {survivor.poll()}; its log ends "
                      f"{logs_now()[1 - leader][-2000:]!r})")
    finally:
        for process in replicas:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in replicas:
            process.wait(timeout=10)
    assert _holder(api) == "", "the leader released the lease on SIGTERM"


def test_sigterm_stops_it_at_once_while_it_still_waits_for_the_api_server(tmp_path: Path) -> None:
    import urllib.request

    from tests.kit.envtest import free_port

    kubeconfig, port = _kubeconfig_for(tmp_path, f"http://127.0.0.1:{free_port()}"), free_port()  # a closed port
    argv = [sys.executable, "-m", "webhook", "label-nodes", "--kubeconfig", str(kubeconfig),
            "--metrics-host", "127.0.0.1", "--metrics-port", str(port)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        def alive() -> bool:  # its probes answer: its signal handlers are in place
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as answer:
                    return bool(answer.status == 200)
            except OSError:
                return False

        _wait(alive, "the probes")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0  # not after the 30 s between its "waiting" lines
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_once_against_a_closed_port_is_one_error_line_at_once_naming_the_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.envtest import free_port

    server = f"http://127.0.0.1:{free_port()}"  # a closed port
    kubeconfig = _kubeconfig_for(tmp_path, server)
    began = time.monotonic()
    code, _, err = run(capsys, "--once", "--kubeconfig", str(kubeconfig))
    assert time.monotonic() - began < 0.5  # not the 60 s --sync-timeout
    assert code == 2
    assert f"error: cannot reach the API server at {server}: connection refused\n" in err
    assert "SSLContext" not in err and "within 60 s" not in err


def test_a_view_that_does_not_sync_in_time_names_the_server_and_the_last_cause(
        api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api.fail_next("GET", r"^/api/v1/pods$", 500, times=10_000, message="etcd is sick")
    code, _, err = run(capsys, "--once", "--sync-timeout", "0.3", "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert code == 1
    assert (f"error: could not list the cluster's nodes and pods within 0.3 s: at {api.url}: "
            "pods: ApiError: 500 InternalError: etcd is sick\n") in err


def _kubeconfig_for(tmp_path: Path, server: str) -> Path:
    return token_kubeconfig(tmp_path / "kubeconfig", server)
