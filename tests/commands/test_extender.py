"""placement-webhook extender as a user runs it: the scheduler stanza, configuration errors."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook import cli


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
