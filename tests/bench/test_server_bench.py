"""The server bench's harness: what it does to the machine, and that it runs end to end."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bench import server_bench
from tests.bench.conftest import RunBench

ROOT = Path(__file__).resolve().parent.parent.parent

linux_only = pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="reads /proc")


def _children() -> set[int]:
    """Pids of this process's children, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.add(int(entry.name))
    return found


@linux_only
def test_keeping_a_cpu_awake_runs_an_idle_priority_spinner_on_that_cpu_only_while_inside() -> None:
    cpu = max(os.sched_getaffinity(0))
    before = _children()
    with server_bench._kept_awake(cpu, enabled=True):
        spinners = _children() - before
        assert len(spinners) == 1
        (pid,) = spinners
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        assert os.sched_getaffinity(pid) == {cpu}
        # It is a busy loop: always runnable ("R"), whether or not the CPU is free to run it
        # (an idle-priority process gets no time on a busy CPU, so its CPU time proves nothing).
        time.sleep(0.1)
        assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
    assert _children() - before == set()


def test_keeping_awake_does_nothing_when_disabled_or_unpinned() -> None:
    before = _children() if Path("/proc").exists() else set()
    for cpu, enabled in ((0, False), (None, True)):
        with server_bench._kept_awake(cpu, enabled=enabled):
            if Path("/proc").exists():
                assert _children() == before


def test_a_polling_load_generator_never_blocks_its_event_loop_waiting_for_an_answer() -> None:
    """While ``_keep_polling`` runs, the loop asks its selector with a zero timeout, even with a
    socket that has nothing to read: an answer never has to wake the generator."""
    import asyncio
    import socket

    timeouts: list[float | None] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        selector = loop._selector  # type: ignore[attr-defined]
        select = selector.select

        def recording(timeout: float | None = None) -> list[object]:
            timeouts.append(timeout)
            return select(timeout)  # type: ignore[no-any-return]

        selector.select = recording
        quiet, other = socket.socketpair()
        with quiet, other:
            reader, _ = await asyncio.open_connection(sock=quiet)
            polling = asyncio.ensure_future(server_bench._keep_polling())
            timeouts.clear()
            try:
                read = asyncio.ensure_future(reader.read(1))
                await asyncio.sleep(0.05)  # the read waits; without polling the loop would block
                assert not read.done()
                read.cancel()
            finally:
                polling.cancel()

    asyncio.run(main())
    assert len(timeouts) > 10 and set(timeouts) == {0}


def test_stolen_share_is_per_cpu_and_unknown_without_progress() -> None:
    before = {"cpu": (10.0, 1000.0), "cpu1": (0.0, 500.0)}
    after = {"cpu": (30.0, 2000.0), "cpu1": (100.0, 1500.0)}
    assert server_bench._stolen(before, after, "cpu") == pytest.approx(0.02)
    assert server_bench._stolen(before, after, "cpu1") == pytest.approx(0.10)
    assert server_bench._stolen(before, before, "cpu") is None
    assert server_bench._stolen(before, after, "cpu7") is None


def test_cpu_per_review_is_the_median_round_ignoring_rounds_proc_could_not_read() -> None:
    rounds = [{"cpu_us": 410.0}, {"cpu_us": None}, {"cpu_us": 390.0}, {"cpu_us": 700.0}]
    assert server_bench._cpu_median(rounds) == 410.0
    assert server_bench._cpu_median([{"cpu_us": None}]) is None


def test_the_throughput_ratio_pairs_each_round_with_the_baseline_measured_beside_it() -> None:
    webhook = [{"rps": 300.0, "cpu_us": 400.0}, {"rps": 240.0, "cpu_us": None}, {"rps": 80.0, "cpu_us": 0.0}]
    bare = [{"rps": 400.0, "cpu_us": 300.0}, {"rps": 300.0, "cpu_us": 250.0}, {"rps": 100.0, "cpu_us": 90.0}]
    assert server_bench._paired(webhook, bare, "rps") == pytest.approx([0.75, 0.8, 0.8])
    assert server_bench._paired(bare, webhook, "cpu_us") == pytest.approx([0.75])  # unreadable rounds left out


@linux_only
def test_the_bench_runs_end_to_end_and_reports_every_figure(run_bench: RunBench) -> None:
    out = run_bench("server_bench.py", "--rounds", "1", "--seconds", "0.3", "--rate", "50", timeout=300)
    for server in ("bare aiohttp TLS app (json)", "bare aiohttp TLS app (webhook's codec)",
                   "webhook, 10 policies", "webhook, 1000 policies"):
        assert out.count(server) == 2, out  # the median row and the every-round row
    assert " us " in out and "load generator late p99" in out
    assert "CPU time stolen by the hypervisor during the run: machine" in out
    assert "10 policies:" in out and "server CPU per review, closed loop: webhook" in out
    assert "each round's pair: throughput " in out and "median of the rounds' pairs" in out
    for server in ("bare app, heavy review (json)", "webhook, heavy set (5 policies)"):
        assert out.count(server) == 2, out
    assert "review body: 8.3 KiB (heavy set: 8.6 KiB)" in out
    assert "heavy set / bare app on the heavy review, each round's pair: throughput " in out
    assert "of its throughput, median of the rounds' pairs (target >= 40%)" in out


def test_the_policies_from_the_cluster_are_the_set_the_files_hold() -> None:
    from bench.engine_bench import policy_set

    assert server_bench._same_policy_set(50) == policy_set(50).digest()


def test_the_cluster_objects_figure_pairs_each_round_with_the_files_run_beside_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    cluster = [{"rps": 950.0, "cpu_us": 330.0}, {"rps": 800.0, "cpu_us": 340.0}, {"rps": 990.0, "cpu_us": 320.0}]
    files = [{"rps": 1000.0, "cpu_us": 310.0}, {"rps": 1000.0, "cpu_us": 300.0}, {"rps": 1000.0, "cpu_us": 305.0}]
    assert server_bench._objects_summary(cluster, files) is True  # the median pair is 95%
    out = capsys.readouterr().out
    assert "1000 policies from the cluster / from files, each round's pair: throughput 95% 80% 99%" in out
    assert "1000 policies from the cluster: 950/s, from files: 1,000/s, ratio 95%" in out
    assert "(target >= 90%): ok" in out
    assert server_bench._objects_summary(cluster[1:2], files[1:2]) is False


def test_the_heavy_figure_says_what_share_of_the_bare_apps_reviews_its_cpu_alone_would_allow(
        capsys: pytest.CaptureFixture[str]) -> None:
    # Throughput pairs on a shared machine swing with whatever else runs; CPU per review does not.
    webhook = [{"rps": 900.0, "cpu_us": 510.0}, {"rps": 1500.0, "cpu_us": 500.0}, {"rps": 700.0, "cpu_us": 490.0}]
    bare = [{"rps": 2000.0, "cpu_us": 150.0}, {"rps": 2500.0, "cpu_us": 155.0}, {"rps": 1400.0, "cpu_us": 140.0}]
    server_bench._heavy_summary(webhook, bare)
    out = capsys.readouterr().out
    assert ("server CPU per review on the heavy set, closed loop: webhook 500 us, bare app 150 us"
            " -- by CPU alone the webhook would serve 30% of the bare app's reviews") in out
