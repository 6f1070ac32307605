"""placement-webhook rebalance as a user runs it: --dry-run's table, the flags, configuration errors."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from tests.kit.kubeconfigs import token_kubeconfig
from tests.kit.fakeapi import FakeApiServer
from tests.kit.fakeapi.objects import pdb
from tests.rebalance.conftest import ON_DEMAND_NODE, SPOT_NODES, capacity_node, replica_set, web
from webhook import cli
from webhook.commands import rebalance
from webhook.rebalance import decide
from webhook.spot.config import SpotConfig


def cluster() -> list[dict[str, object]]:
    """Four interruptible replicas on on-demand, two spot nodes, a budget of one."""
    return [capacity_node(ON_DEMAND_NODE, "on-demand"), *(capacity_node(n, "spot") for n in SPOT_NODES),
            replica_set("rs-1", 4), *(web(f"web-{i}") for i in range(1, 5)),
            pdb("web", "shop", match={"app": "web"}, max_unavailable=1, api_version="policy/v1beta1")]


def test_a_dry_run_prints_what_it_would_move_from_where_to_where_and_the_gain_and_evicts_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeApiServer.in_thread("1.20.2", pdb_controller=True) as api:
        api.load(cluster())
        api.sync_pdbs()
        api.write_kubeconfig(tmp_path / "kubeconfig")
        code = cli.main(["rebalance", "--dry-run", "--kubeconfig", str(tmp_path / "kubeconfig"), "--metrics-port", "0"])
        writes = [f"{r.method} {r.path}" for r in api.requests if r.method in ("POST", "PATCH", "PUT", "DELETE")]
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and writes == []
    assert lines[0].split() == ["POD", "OWNER", "FROM", "TO", "NOW", "THERE", "GAIN", "VERDICT", "REASON"]
    moved, *skipped = [line.split()[:8] for line in lines[1:5]]
    assert moved[1:] == ["ReplicaSet/web-rs-1", "od-1", "spot-1", "0", "100", "+100", "move"]
    assert sorted([moved[0], *(row[0] for row in skipped)]) == [f"shop/web-{i}" for i in (1, 2, 3, 4)]
    assert all(row[1:] == ["ReplicaSet/web-rs-1", "od-1", "-", "-", "-", "-", "skip"] for row in skipped)
    assert all("one pod per owner" in line for line in lines[2:5]), "one of four moves; its siblings wait"
    assert lines[-1] == "1 to move, 0 to stay, 3 skipped"


def test_a_dry_run_with_nothing_to_move_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeApiServer.in_thread("1.20.2") as api:
        api.load([capacity_node(ON_DEMAND_NODE, "on-demand")])
        api.write_kubeconfig(tmp_path / "kubeconfig")
        code = cli.main(["rebalance", "--dry-run", "--kubeconfig", str(tmp_path / "kubeconfig")])
    assert code == 0
    assert capsys.readouterr().out == "no candidates: every pod runs where its policies prefer\n"


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["rebalance", *argv])


def test_the_flags_become_the_settings_plan_decides_with() -> None:
    spot = SpotConfig()
    args = parse("--interval", "90s", "--max-evictions-per-interval", "3", "--min-gain", "25",
                 "--exclude-namespace", "batch", "--exclude-namespace", "ops", "--leader-elect")
    settings = rebalance.settings(args, spot)
    assert settings.interval == 90.0 and not settings.dry_run
    assert settings.policy == decide.Settings(min_gain=25, max_evictions=3, excluded_namespaces=frozenset({"batch", "ops"}),
                                              spot=spot)
    assert args.leader_elect and args.lease_name == "placement-webhook-rebalance"


def test_the_defaults_are_plan_s() -> None:
    settings = rebalance.settings(parse(), SpotConfig())
    assert settings.interval == 60.0
    defaults = decide.Settings()
    assert (settings.policy.min_gain, settings.policy.max_evictions, settings.policy.excluded_namespaces) == \
        (defaults.min_gain, defaults.max_evictions, defaults.excluded_namespaces)


@pytest.mark.parametrize(("text", "seconds"), [("60", 60.0), ("60s", 60.0), ("1m30s", 90.0), ("2m", 120.0),
                                               ("1h", 3600.0), ("500ms", 0.5), ("0.5", 0.5), ("1.5m", 90.0)])
def test_an_interval_is_seconds_or_a_go_duration(text: str, seconds: float) -> None:
    assert parse("--interval", text).interval == seconds


@pytest.mark.parametrize(("flag", "value", "complaint"), [
    ("--interval", "0s", "must be positive: 0s"),
    ("--interval", "1d", "not a duration: '1d' (say 60s, 5m or 1m30s)"),
    ("--interval", "s60", "not a duration"),
    ("--max-evictions-per-interval", "0", "must be at least 1: 0"),
    ("--min-gain", "ten", "not a whole number: 'ten'"),
])
def test_bad_flags_are_usage_errors_that_say_why(flag: str, value: str, complaint: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(flag, value)
    assert exited.value.code == 2 and complaint in capsys.readouterr().err


def test_a_broken_spot_config_is_a_usage_error_with_file_and_line(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spot.yaml"
    path.write_text("interruptible:\n  annotaton: x\n")
    assert cli.main(["rebalance", "--config", str(path), "--dry-run"]) == 2
    assert f"{path}:2: interruptible.annotaton" in capsys.readouterr().err


def test_a_dry_run_against_a_closed_port_is_one_error_line_at_once_naming_the_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.envtest import free_port

    server = f"http://127.0.0.1:{free_port()}"  # a closed port
    kubeconfig = token_kubeconfig(tmp_path / "kubeconfig", server)
    began = time.monotonic()
    code = cli.main(["rebalance", "--dry-run", "--kubeconfig", str(kubeconfig)])
    err = capsys.readouterr().err
    assert time.monotonic() - began < 0.5  # not the 60 s --sync-timeout
    assert code == 2 and err.endswith(f"error: cannot reach the API server at {server}: connection refused\n")
