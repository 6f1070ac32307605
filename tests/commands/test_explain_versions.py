"""explain speaks the cluster's Kubernetes version: given with --kubernetes-version, or learnt
from the API server (GET /version) with --kubeconfig; the newest release's words otherwise."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.commands.test_explain import ONE_PER_NODE, deployment, explain, node, running, write

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.fixture
def crowded(tmp_path: Path) -> tuple[str, str]:
    """A tainted node and a node whose running web pod repels the new one; a new Deployment."""
    state = write(tmp_path / "c.yaml", node("gpu-1", taints=[GPU_TAINT]), node("node-a"),
                  running("web-old", "node-a", labels={"app": "web"}))
    return state, write(tmp_path / "w.yaml", deployment(replicas=1, affinity=ONE_PER_NODE))


@pytest.mark.parametrize(("flags", "message"), [
    pytest.param(["--kubernetes-version", "1.20"],
                 "0/2 nodes are available: 1 node(s) didn't match pod affinity/anti-affinity, 1 node(s) didn't "
                 "match pod anti-affinity rules, 1 node(s) had taint {nvidia.com/gpu: present}, that the pod didn't "
                 "tolerate.", id="v1.20: v1.20.2's words, and no preemption part"),
    pytest.param(["--kubernetes-version", "v1.34.1"],
                 "0/2 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 1 node(s) had untolerated "
                 "taint {nvidia.com/gpu: present}. preemption: 0/2 nodes are available: 1 No preemption victims "
                 "found for incoming pod, 1 Preemption is not helpful for scheduling.",
                 id="v1.34.1: the taint is named"),
    pytest.param([], "0/2 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 1 node(s) had "
                 "untolerated taint(s). preemption: 0/2 nodes are available: 1 No preemption victims found for "
                 "incoming pod, 1 Preemption is not helpful for scheduling.", id="no version: the newest words"),
])
def test_the_message_is_worded_as_the_given_release_words_it(
        crowded: tuple[str, str], capsys: pytest.CaptureFixture[str], flags: list[str], message: str) -> None:
    state, manifest = crowded
    code, out, _ = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json", *flags)
    work = json.loads(out)["workloads"][0]
    assert code == 1 and work["replicas"][0]["message"] == message == work["diagnosis"]["message"]


def test_the_machine_form_and_a_note_say_which_release_the_words_are(
        crowded: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    state, manifest = crowded
    _, out, err = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json",
                          "--kubernetes-version", "1.20")
    assert json.loads(out)["kubernetesVersion"] == "v1.20"
    assert "note: the scheduler's messages are worded as Kubernetes v1.20 words them (--kubernetes-version)" in err
    _, out, err = explain(capsys, "-f", manifest, "--no-policies", "--cluster-state", state, "-o", "json")
    assert json.loads(out)["kubernetesVersion"] is None and "worded as" not in err


@pytest.mark.parametrize("text", ["latest", "1", "1.20.x", "1.20.2.1", "v1.31.2-eks"])
def test_a_version_that_is_not_major_minor_or_major_minor_patch_is_a_usage_error(
        text: str, capsys: pytest.CaptureFixture[str]) -> None:
    from webhook import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["explain", "-f", "x", "--kubernetes-version", text])
    assert exit_.value.code == 2 and "not a MAJOR.MINOR version" in capsys.readouterr().err


def test_a_live_cluster_is_explained_in_its_api_servers_words(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit.fakeapi import FakeApiServer

    manifest = write(tmp_path / "web.yaml", deployment(replicas=1, affinity=ONE_PER_NODE))
    with FakeApiServer.in_thread("1.20.2") as api:
        for obj in (node("gpu-1", taints=[GPU_TAINT]), node("node-a"), running("web-old", "node-a", labels={"app": "web"}),
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}):
            api.apply_object(obj)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = explain(capsys, "-f", manifest, "--no-policies", "--kubeconfig", str(kubeconfig), "-o", "json")
        _, _, overridden = explain(capsys, "-f", manifest, "--no-policies", "--kubeconfig", str(kubeconfig),
                                   "--kubernetes-version", "1.35")
    found = json.loads(out)
    assert code == 1, err
    assert found["kubernetesVersion"] == "v1.20"
    assert "1 node(s) had taint {nvidia.com/gpu: present}, that the pod didn't tolerate" in \
        found["workloads"][0]["replicas"][0]["message"]
    assert "(the API server's version)" in err and "v1.35 words them (--kubernetes-version)" in overridden
