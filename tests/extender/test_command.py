"""``placement-webhook extender`` as a user runs it by hand: it listens on 127.0.0.1 unless told
otherwise, answers what its HTTP parser refuses in JSON, and ``--print-scheduler-config`` refuses a
URL the scheduler could not use, saying why."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

import pytest
import yaml

from tests.server.garbage import assert_error_shape
from tests.runtime.test_errors import assert_parse_errors_are_json, exchange, free_port
from webhook import cli
from webhook.commands import extender as command
from webhook.extender.component import component
from webhook.runtime.run import run
from webhook.spot.config import SpotConfig


def parsed(*argv: str) -> object:
    return cli.build_parser().parse_args(["extender", *argv])


def test_a_hand_run_extender_listens_on_this_machine_only() -> None:
    assert parsed().host == "127.0.0.1"  # type: ignore[attr-defined]


@pytest.mark.parametrize("flag", ["--address", "--host"])
def test_the_address_is_given_with_address_or_its_old_name_host(flag: str) -> None:
    assert parsed(flag, "0.0.0.0").host == "0.0.0.0"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("url", "problem"), [
    ("placement-extender:8888", "must start with http:// or https://"),
    ("ftp://placement-extender:8888", "must start with http:// or https://"),
    ("https://", "does not name a valid host"),
    ("https://:8888", "does not name a valid host"),
    ("https://bad host:8888", "does not name a valid host"),
    ("https://placement-extender:http", "is not a URL: Port could not be cast to integer"),
    ("https://placement-extender:70000", "is not a URL: Port out of range"),
    ("https://placement-extender:0", "names port 0"),
    ("https://placement-extender:8888/filter", "give the path the verbs are served under with --url-prefix"),
    ("https://placement-extender:8888?x=1", "give the path the verbs are served under with --url-prefix"),
    ("https://placement-extender:8888#top", "give the path the verbs are served under with --url-prefix"),
    ("https://admin:secret@placement-extender:8888", "carries a user name"),
])
def test_a_url_the_scheduler_cannot_use_is_a_usage_error_saying_why(
    url: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["extender", "--print-scheduler-config", url]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"placement-webhook extender: --print-scheduler-config: {url!r} ")
    assert problem in err


@pytest.mark.parametrize(("url", "prefix"), [
    ("https://placement-extender.placement-system.svc:8888", "https://placement-extender.placement-system.svc:8888"),
    ("https://placement-extender.placement-system.svc:8888/", "https://placement-extender.placement-system.svc:8888"),
    ("HTTP://10.96.0.50:8888", "http://10.96.0.50:8888"),
    ("http://[fd00::50]:8888", "http://[fd00::50]:8888"),
    (" https://extender ", "https://extender"),
])
def test_a_usable_url_is_printed_as_the_scheduler_reads_it(url: str, prefix: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["extender", "--print-scheduler-config", url, "--url-prefix", "/spot"]) == 0
    (entry,) = yaml.safe_load(capsys.readouterr().out)["extenders"]
    assert entry["urlPrefix"] == prefix + "/spot"
    assert entry.get("enableHTTPS", False) is prefix.startswith("https://")


@pytest.fixture
async def hand_run(caplog: pytest.LogCaptureFixture) -> AsyncIterator[int]:
    """``extender --no-cluster`` on a free port, in process; cancelled afterwards."""
    port = free_port()
    config = command.extender_config(cli.build_parser().parse_args(["extender", "--no-cluster", "--port", str(port)]))
    assert not isinstance(config, int)
    with caplog.at_level(logging.INFO, logger="webhook.extender"):
        task = asyncio.create_task(run(component(SpotConfig(), config)))
        for _ in range(500):  # until it listens: the loop runs it between the attempts
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            await asyncio.sleep(0.01)
        try:
            yield port
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_the_hand_run_extender_says_where_it_listens_and_answers_errors_in_json(
    hand_run: int, caplog: pytest.LogCaptureFixture
) -> None:
    (serving,) = [r for r in caplog.get_records("setup") if r.getMessage() == "serving"]
    assert serving.fields["address"] == f"127.0.0.1:{hand_run}"  # type: ignore[attr-defined]
    status, _, body = await exchange(hand_run, b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_error_shape(status, body)
    assert json.loads(body) == {"error": "no endpoint at /nope", "status": 404}
    await assert_parse_errors_are_json(hand_run)

