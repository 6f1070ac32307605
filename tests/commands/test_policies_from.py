"""``--policies-from`` on every command that reads policies: ``serve`` (files, cluster or both,
its status Lease), and ``mutate``, ``explain``, ``lint`` and ``test``, which list the cluster's
PlacementPolicies once (a file's policy replacing the object of its name) and leave out, with a
warning, an object the server would leave out."""
from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit.fakeapi import FakeApiServer
from tests.kit.policy_objects import SSD_SPEC, manifest
from webhook import cli
from webhook.commands import serve

GOLD = {"match": {"kinds": ["Deployment"]}, "scheduling": {"priorityClassName": "gold"}}
TYPO = {"match": {"kinds": ["Deploymnet"]}, "placement": {"nodeSelector": {"disk": "ssd"}}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
              "spec": {"selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}
TYPO_WARNING = ("warning: cluster:PlacementPolicy/typo: spec.match.kinds[0]: unknown kind 'Deploymnet'; "
                "did you mean \"Deployment\"? (left out, as the server leaves it out)")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Path]]:
    with FakeApiServer.in_thread("1.31.0", placement_policies=True) as server:
        server.apply_object(manifest("ssd"))
        server.apply_object(manifest("typo", TYPO))
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kubeconfig(cluster: tuple[FakeApiServer, Path]) -> Path:
    return cluster[1]


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    path = tmp_path / "web.yaml"
    path.write_text(yaml.safe_dump(DEPLOYMENT))
    return path


def _files(tmp_path: Path, **specs: dict[str, Any]) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir(exist_ok=True)
    for name, spec in specs.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(manifest(name, spec)))
    return folder


def _warnings(err: str) -> list[str]:
    """The warning lines (--kubeconfig also reads the cluster view, whose informers may log)."""
    return [line for line in err.splitlines() if line.startswith("warning:")]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- serve ---------------------------------------------------------------------------------------


def _args(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["serve", *argv])


REQUIRED = {"PLACEMENT_WEBHOOK_TLS_CERT": "c", "PLACEMENT_WEBHOOK_TLS_KEY": "k"}


def test_serve_reads_files_by_default_and_needs_no_policy_path_for_the_cluster_alone() -> None:
    assert serve.resolve(_args("--policies", "p"), REQUIRED)["policies_from"] == ("files",)
    values = serve.resolve(_args("--policies-from", "cluster"), REQUIRED)
    assert values["policies_from"] == ("cluster",) and values["policies"] is None
    both = serve.resolve(_args("--policies", "p"), {**REQUIRED, "PLACEMENT_WEBHOOK_POLICIES_FROM": "cluster,files"})
    assert both["policies_from"] == ("files", "cluster")


def test_serve_refuses_policy_paths_it_would_not_read() -> None:
    with pytest.raises(serve.ConfigError, match="--policies .* is read with --policies-from files or files,cluster"):
        serve.resolve(_args("--policies", "p", "--policies-from", "cluster"), REQUIRED)


@pytest.mark.parametrize("value", ["configmap", "files,files", ""])
def test_serve_refuses_a_source_it_does_not_know(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--policies-from", value])
    assert "--policies-from: must be files, cluster or files,cluster" in capsys.readouterr().err


def test_serve_with_cluster_policies_outside_a_pod_needs_a_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    values = {"cluster_view": "auto", "kubeconfig": None, "context": None, "policies_from": ("cluster",)}
    with pytest.raises(serve.ConfigError, match="^--policies-from cluster: "):
        serve.cluster_config(values)
    assert not serve.view_on(values)  # the view keeps its own rule


def test_serve_with_cluster_policies_reads_the_kubeconfig_without_turning_the_view_on(kubeconfig: Path) -> None:
    values = {"cluster_view": "off", "kubeconfig": kubeconfig, "context": None, "policies_from": ("cluster",)}
    config = serve.cluster_config(values)
    assert config is not None and not serve.view_on(values)


def test_serve_names_its_status_lease() -> None:
    values = serve.resolve(_args("--policies-from", "cluster", "--lease-name", "pw", "--lease-namespace", "ops"), REQUIRED)
    assert (values["lease_name"], values["lease_namespace"]) == ("pw", "ops")
    assert serve.resolve(_args("--policies-from", "cluster"), REQUIRED)["lease_name"] == "placement-webhook"


# --- mutate ------------------------------------------------------------------------------------------


def test_mutate_applies_the_clusters_policies_and_warns_of_one_the_server_leaves_out(
        capsys: pytest.CaptureFixture[str], kubeconfig: Path, workload: Path) -> None:
    code, out, err = _run(capsys, "mutate", "-f", workload, "--policies-from", "cluster", "--kubeconfig", kubeconfig,
                          "-o", "json")
    assert code == 0, err
    assert json.loads(out)["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert _warnings(err) == [TYPO_WARNING]


def test_mutate_with_files_and_cluster_takes_a_file_as_the_change_to_the_object_of_its_name(
        capsys: pytest.CaptureFixture[str], kubeconfig: Path, workload: Path, tmp_path: Path) -> None:
    folder = _files(tmp_path, ssd={**SSD_SPEC, "placement": {"nodeSelector": {"disk": "nvme"}}}, gold=GOLD)
    code, out, err = _run(capsys, "mutate", "-f", workload, "--policies", folder, "--policies-from", "files,cluster",
                          "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 0, err
    pod = json.loads(out)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"disk": "nvme"} and pod["priorityClassName"] == "gold"


def test_mutate_refuses_policy_paths_it_would_not_read(capsys: pytest.CaptureFixture[str], workload: Path,
                                                      tmp_path: Path) -> None:
    code, _, err = _run(capsys, "mutate", "-f", workload, "--policies", _files(tmp_path, gold=GOLD),
                        "--policies-from", "cluster")
    assert code == 2 and "--policies is read with --policies-from files or files,cluster" in err


def test_a_cluster_without_the_crd_is_a_usage_error_that_says_so(
        capsys: pytest.CaptureFixture[str], workload: Path, tmp_path: Path) -> None:
    with FakeApiServer.in_thread("1.31.0") as bare:
        kubeconfig = bare.write_kubeconfig(tmp_path / "bare")
        code, _, err = _run(capsys, "mutate", "-f", workload, "--policies-from", "cluster", "--kubeconfig", kubeconfig)
    assert code == 2
    assert err.startswith(f"error: the API server at {bare.url} answered 404")
    assert "is its CustomResourceDefinition installed?" in err


def test_an_unreachable_cluster_is_a_usage_error_in_one_line(capsys: pytest.CaptureFixture[str], workload: Path,
                                                            tmp_path: Path) -> None:
    with FakeApiServer.in_thread("1.31.0") as gone:
        kubeconfig = gone.write_kubeconfig(tmp_path / "gone")
    code, _, err = _run(capsys, "mutate", "-f", workload, "--policies-from", "cluster", "--kubeconfig", kubeconfig)
    assert code == 2 and err == f"error: cannot reach the API server at {gone.url}: connection refused\n"


# --- explain --------------------------------------------------------------------------------------


def test_explain_takes_cluster_policies_or_none_not_both(capsys: pytest.CaptureFixture[str], workload: Path) -> None:
    code, _, err = _run(capsys, "explain", "-f", workload, "--no-policies", "--policies-from", "cluster")
    assert code == 2 and "give --policies-from or --no-policies, not both" in err


# --- lint -----------------------------------------------------------------------------------------


def test_lint_of_the_cluster_reports_each_object_the_loader_refuses(capsys: pytest.CaptureFixture[str],
                                                                   kubeconfig: Path) -> None:
    code, out, err = _run(capsys, "lint", "--policies-from", "cluster", "--kubeconfig", kubeconfig)
    assert (code, out) == (1, "")
    assert err.splitlines() == ["cluster:PlacementPolicy/typo: spec.match.kinds[0]: unknown kind 'Deploymnet'; "
                                "did you mean \"Deployment\"?", "1 error"]


def test_lint_of_files_against_the_cluster_finds_their_conflicts(
        capsys: pytest.CaptureFixture[str], cluster: tuple[FakeApiServer, Path], tmp_path: Path) -> None:
    server, kubeconfig = cluster
    server.delete_object("PlacementPolicy", "typo")
    server.apply_object(manifest("gold", GOLD))
    folder = _files(tmp_path, silver={**GOLD, "scheduling": {"priorityClassName": "silver"}})
    code, _, err = _run(capsys, "lint", folder, "--policies-from", "files,cluster", "--kubeconfig", kubeconfig)
    assert code == 1
    assert "spec.scheduling.priorityClassName: conflicts with policy 'gold' (cluster:PlacementPolicy/gold)" in err


def test_lint_of_a_clean_cluster_counts_its_policies(capsys: pytest.CaptureFixture[str],
                                                    cluster: tuple[FakeApiServer, Path]) -> None:
    server, kubeconfig = cluster
    server.delete_object("PlacementPolicy", "typo")
    assert _run(capsys, "lint", "--policies-from", "cluster", "--kubeconfig", kubeconfig)[:2] == (0, "1 policy OK\n")


def test_lint_refuses_a_kubeconfig_it_would_not_read(capsys: pytest.CaptureFixture[str], kubeconfig: Path,
                                                    tmp_path: Path) -> None:
    code, _, err = _run(capsys, "lint", _files(tmp_path, gold=GOLD), "--kubeconfig", kubeconfig)
    assert code == 2 and "--kubeconfig and --context are read with --policies-from cluster" in err


# --- test -----------------------------------------------------------------------------------------


SUITE = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementTest
metadata: {name: ssd}
policies: [policies/]
cases:
- name: a Deployment goes to ssd nodes
  object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: shop},
           spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}},
                  spec: {containers: [{name: web, image: nginx}]}}}}
  expect:
    applied: [ssd]
"""


def test_test_runs_the_suites_against_the_clusters_policies(capsys: pytest.CaptureFixture[str], kubeconfig: Path,
                                                           tmp_path: Path) -> None:
    _files(tmp_path, other={**GOLD})
    (tmp_path / "ssd.suite.yaml").write_text(SUITE)
    code, out, err = _run(capsys, "test", tmp_path, "--policies-from", "cluster", "--kubeconfig", kubeconfig)
    assert code == 0, out + err
    assert out.splitlines()[-1] == "1 passed, 0 failed"
    assert _warnings(err) == [TYPO_WARNING]
    code, out, _ = _run(capsys, "test", tmp_path)  # the suite's own policies hold no ssd policy
    assert code == 1


def test_test_with_files_and_cluster_puts_the_suites_own_policy_in_place_of_the_objects(
        capsys: pytest.CaptureFixture[str], kubeconfig: Path, tmp_path: Path) -> None:
    _files(tmp_path, ssd={**SSD_SPEC, "match": {"kinds": ["StatefulSet"]}})
    (tmp_path / "ssd.suite.yaml").write_text(SUITE)
    code, out, _ = _run(capsys, "test", tmp_path, "--policies-from", "files,cluster", "--kubeconfig", kubeconfig)
    assert code == 1 and out.splitlines()[-1] == "0 passed, 1 failed"
