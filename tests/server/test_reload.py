"""Policy hot reload: digest polling, ConfigMap ``..data`` swaps, broken changes, reload under load."""
from __future__ import annotations

import asyncio
import gc
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.kit.policies import SSD_POLICY
from tests.kit.reviews import admission_review, decode_patch
from tests.kit.server import BROKEN_POLICY, ZONE_POLICY, Pki, sample
from tests.kit.workloads import deployment
from tests.kit.yaml_bombs import billion_laughs
from webhook.engine import admission, review
from webhook.server import app, reload

Client = TestClient[web.Request, web.Application]
RELOADS = "placement_webhook_policy_reloads_total"


def test_the_first_poll_loads_and_an_unchanged_folder_is_not_reloaded(policy_dir: Path) -> None:
    source = reload.PolicySource([policy_dir])
    assert not source.ready
    assert source.poll() is True
    assert source.policies is not None and source.policies.names == ("ssd",)
    assert source.poll() is None


def test_a_new_file_is_picked_up(policy_dir: Path) -> None:
    source = reload.PolicySource([policy_dir])
    source.poll()
    (policy_dir / "zone.yaml").write_text(ZONE_POLICY)
    assert source.poll() is True
    assert source.policies is not None and source.policies.names == ("ssd", "zone")


def test_a_set_a_reload_replaced_is_freed_once_admission_has_used_it(policy_dir: Path) -> None:
    # Admission memoises per-set data; none of it may outlive the set, or every reload of a
    # long-running server would keep one more policy set in memory.
    source = reload.PolicySource([policy_dir])
    source.poll()
    assert source.policies is not None
    outcome = admission.admit(review.parse(admission_review(deployment())), policies=source.policies)
    assert outcome.applied == ["ssd"]
    old = weakref.ref(source.policies)
    (policy_dir / "zone.yaml").write_text(ZONE_POLICY)
    gc.disable()  # reference counting alone must free it
    try:
        assert source.poll() is True
        assert old() is None
    finally:
        gc.enable()


def test_a_broken_change_keeps_the_last_good_set_and_reports_file_and_line(policy_dir: Path) -> None:
    source = reload.PolicySource([policy_dir])
    source.poll()
    good = source.policies
    (policy_dir / "broken.yaml").write_text(BROKEN_POLICY)
    assert source.poll() is False
    assert source.policies is good
    assert any("broken.yaml:7" in e and "nodeSelectr" in e for e in source.errors), source.errors
    assert source.poll() is None  # the same broken state is reported once
    (policy_dir / "broken.yaml").unlink()
    assert source.poll() is None  # back to the files in force: nothing to load
    assert source.errors == [] and source.policies is good


BILLION_LAUGHS = SSD_POLICY.replace("name: ssd", "name: bomb") + """\
  bomb:
""" + billion_laughs("    ")


def test_a_billion_laughs_change_is_refused_quickly_and_the_set_in_force_kept(policy_dir: Path) -> None:
    source = reload.PolicySource([policy_dir])
    assert source.poll() is True
    good = source.policies
    (policy_dir / "bomb.yaml").write_text(BILLION_LAUGHS)
    started = time.monotonic()
    assert source.poll() is False
    assert time.monotonic() - started < 5, "the reload must refuse the expansion, not run it"
    assert source.policies is good
    assert any("bomb.yaml:" in e and "excessive aliasing" in e for e in source.errors), source.errors


def test_a_missing_folder_is_a_failed_load_not_a_crash(tmp_path: Path) -> None:
    source = reload.PolicySource([tmp_path / "absent"])
    assert source.poll() is False
    assert not source.ready and source.errors


def _configmap(mount: Path, version: str, files: dict[str, str]) -> None:
    """Lay out files as the kubelet does for a ConfigMap volume and (re)point ``..data``."""
    folder = mount / f"..{version}"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
        if not (mount / name).is_symlink():
            (mount / name).symlink_to(f"..data/{name}")
    (mount / "..data_tmp").symlink_to(folder.name)
    os.replace(mount / "..data_tmp", mount / "..data")  # the atomic swap


def test_a_configmap_data_symlink_swap_is_reloaded_once_without_duplicates(tmp_path: Path) -> None:
    mount = tmp_path / "policies"
    _configmap(mount, "2024_01_01", {"policy.yaml": SSD_POLICY})
    source = reload.PolicySource([mount])
    assert source.poll() is True
    assert source.policies is not None and source.policies.names == ("ssd",)
    _configmap(mount, "2024_02_01", {"policy.yaml": ZONE_POLICY})
    assert source.poll() is True
    assert source.policies is not None and source.policies.names == ("zone",)
    assert source.poll() is None


async def _until(condition: Callable[[], bool], *, tasks: Sequence[asyncio.Task[Any]] = (), timeout: float = 10.0) -> None:
    """Wait until ``condition()`` holds. Fails, instead of hanging, after ``timeout`` seconds or
    as soon as one of ``tasks`` has ended (its own failed assertion is raised here)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        for task in tasks:
            if task.done():
                task.result()  # raises what the task raised
                pytest.fail(f"{task.get_name()} ended before the condition held")
        if loop.time() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(0.001)


def _state(pki: Pki, folder: Path) -> app.State:
    return app.State(app.ServerConfig(policies=(folder,), tls_cert=pki.cert, tls_key=pki.key, reload_interval=3600))


async def test_reloads_are_counted_and_the_loaded_gauge_follows(pki: Pki, policy_dir: Path) -> None:
    state = _state(pki, policy_dir)
    await state.reload_policies()
    (policy_dir / "broken.yaml").write_text(BROKEN_POLICY)
    await state.reload_policies()
    (policy_dir / "broken.yaml").write_text(ZONE_POLICY)
    await state.reload_policies()
    registry = state.metrics.registry
    assert sample(registry, RELOADS, {"result": "success"}) == 2
    assert sample(registry, RELOADS, {"result": "failure"}) == 1
    assert sample(registry, "placement_webhook_policies_loaded") == 2


def _node_selector(answer: dict[str, Any]) -> Any:
    ops = [op for op in decode_patch(answer) if op["path"] == "/spec/template/spec/nodeSelector"]
    return ops[0]["value"] if ops else None


async def test_policy_reload_under_load_answers_every_review_and_switches_sets(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, tmp_path: Path
) -> None:
    mount = tmp_path / "policies"
    _configmap(mount, "2024_01_01", {"policy.yaml": SSD_POLICY})
    state = _state(pki, mount)
    client = await aiohttp_client(app.make_app(state))
    answers: list[dict[str, Any]] = []
    stop = asyncio.Event()

    async def keep_sending() -> None:
        while not stop.is_set():
            resp = await client.post("/mutate", json=admission_review(deployment()))
            assert resp.status == 200
            answers.append(await resp.json())

    senders = [asyncio.create_task(keep_sending(), name=f"sender-{i}") for i in range(4)]
    await _until(lambda: len(answers) >= 20, tasks=senders)
    _configmap(mount, "2024_02_01", {"policy.yaml": ZONE_POLICY})
    await state.reload_policies()
    swapped_at = len(answers)
    await _until(lambda: len(answers) >= swapped_at + 20, tasks=senders)
    stop.set()
    await asyncio.gather(*senders)
    selectors = [_node_selector(a) for a in answers if a["response"].get("patch")]
    assert len(selectors) == len(answers)
    assert selectors[0] == {"disktype": "ssd"}
    assert selectors[-1] == {"zone": "a"}
    assert set(map(str, selectors)) == {str({"disktype": "ssd"}), str({"zone": "a"})}


@pytest.mark.parametrize("interval", [0.01])
async def test_the_running_app_polls_the_folder_on_its_own(
    aiohttp_client: Callable[..., Awaitable[Client]], pki: Pki, policy_dir: Path, interval: float
) -> None:
    config = app.ServerConfig(policies=(policy_dir,), tls_cert=pki.cert, tls_key=pki.key, reload_interval=interval)
    state = app.State(config)
    await aiohttp_client(app.make_app(state))
    # Renamed into place: a poll between ``write_text``'s create and its write would load
    # the empty file as a set of its own, and count one success more.
    staged = policy_dir.parent / "zone.yaml.staged"
    staged.write_text(ZONE_POLICY)
    staged.replace(policy_dir / "zone.yaml")
    await _until(lambda: state.policy_set().names == ("ssd", "zone"))
    assert sample(state.metrics.registry, RELOADS, {"result": "success"}) == 2


async def test_a_first_policy_load_that_fails_never_claims_a_previous_set_keeps_serving(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = _state(pki, tmp_path / "absent")
    with caplog.at_level("ERROR", logger=app.__name__):
        await state.reload_policies()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["policy set not loaded, no set is serving"]
    assert not state.policies.ready


def test_a_first_certificate_load_that_fails_never_claims_a_previous_one_is_kept(
    tmp_path: Path, policy_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nothing = tmp_path / "no-certificate"
    state = app.State(app.ServerConfig(policies=(policy_dir,), tls_cert=nothing / "tls.crt", tls_key=nothing / "tls.key"))
    with caplog.at_level("ERROR", logger=app.__name__):
        state.reload_certificate()
    assert [r.getMessage() for r in caplog.records] == ["serving certificate not loaded, none is serving"]
