"""Server benchmark: the real webhook over TLS against a bare aiohttp TLS app, same run.

    python bench/server_bench.py [--seconds 3] [--rounds 5] [--connections 8] [--rate 500] [--check]

Starts each server in its own process (`placement-webhook serve` with 10 and with 1,000
policies, and `bench/bare_app.py` parsing with json and with the webhook's codec), then
drives it from a separate process over keep-alive TLS connections with a typical ~8 KiB
Deployment review, loopback only, nothing installed. Servers share one CPU and the load
generator has another; rounds are interleaved across servers and the median round counts:
- closed loop: N connections send back to back -> throughput, p50/p99 latency;
- fixed rate: reviews started on a fixed schedule over a warm pool of N keep-alive
  connections (latency counted from the scheduled start, so a stalled server cannot hide
  its queueing) -> p50/p99 at --rate reviews/s. The generator sleeps until just before
  each start and then yields to its event loop until the start time (the loop's timer
  alone wakes on millisecond ticks). How late it still started reviews is printed beside
  them: that part of the latency is the generator's and the machine's, not the server's.
On a VM, the share of CPU time the hypervisor stole during the run is printed: a stolen
slice stalls every server alike and shows up in their tails.
Targets (issue 3): at 10 policies >= 75% of the bare app's throughput; p99 < 5 ms at 500/s.
The container image runs the compiled build (setup.py); build it in place to measure that:
    PLACEMENT_WEBHOOK_COMPILE=1 python setup.py build_ext --inplace   (then run with PYTHONPATH=.)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from engine_bench import policy_yaml, typical_deployment

from webhook import certs


def review_body(i: int = 7, *, size: int = 8 * 1024) -> bytes:
    """A v1 AdmissionReview for a typical Deployment, grown to about ``size`` bytes with the
    managedFields entries an API server adds."""
    obj = typical_deployment(i)
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:argocd:argocd-application-controller"},
            "object": obj,
            "dryRun": False,
        },
    }
    managed = obj["metadata"].setdefault("managedFields", [])
    while len(json.dumps(review)) < size - 200:
        managed.append({"manager": f"controller-{len(managed)}", "operation": "Apply", "apiVersion": "apps/v1",
                        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}})
    return json.dumps(review).encode()


# --- the load generator (runs in its own process: `--drive`) ---------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _closed_loop(url: str, ctx: ssl.SSLContext, body: bytes, *, connections: int, seconds: float) -> dict[str, Any]:
    import aiohttp

    latencies: list[float] = []
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections, ssl=ctx)) as session:
        async def worker(deadline: float) -> None:
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    assert resp.status == 200, resp.status
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(worker(time.perf_counter() + 0.5) for _ in range(connections)))  # warm-up
        latencies.clear()
        started = time.perf_counter()
        await asyncio.gather(*(worker(started + seconds) for _ in range(connections)))
        elapsed = time.perf_counter() - started
    return {"rps": len(latencies) / elapsed, "p50": _percentile(latencies, 0.5), "p99": _percentile(latencies, 0.99)}


async def _fixed_rate(
    url: str, ctx: ssl.SSLContext, body: bytes, *, rate: float, seconds: float, connections: int
) -> dict[str, Any]:
    import aiohttp

    latencies: list[float] = []
    lateness: list[float] = []  # how late this load generator itself started each review
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64, ssl=ctx)) as session:
        async def one(scheduled: float) -> None:
            lateness.append(time.perf_counter() - scheduled)
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                assert resp.status == 200, resp.status
            latencies.append(time.perf_counter() - scheduled)

        # Warm up a pool of keep-alive connections, as the API server keeps to a webhook:
        # otherwise the first bursts of the schedule open connections, and their TLS
        # handshakes land in the latencies.
        for _ in range(10):
            await asyncio.gather(*(one(time.perf_counter()) for _ in range(connections)))
        latencies.clear()
        lateness.clear()
        tasks = []
        start = time.perf_counter()
        for i in range(int(rate * seconds)):
            scheduled = start + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0.002:  # the loop's timer wakes on millisecond ticks: sleep short ...
                await asyncio.sleep(delay - 0.0015)
            while time.perf_counter() < scheduled:  # ... then yield until it is time, serving I/O meanwhile
                await asyncio.sleep(0)
            tasks.append(asyncio.create_task(one(scheduled)))
        # A server that cannot keep up would make this run last for minutes: reviews still
        # unanswered 2 s after the schedule ends count as infinitely late.
        _done, late = await asyncio.wait(tasks, timeout=2.0)
        for task in late:
            task.cancel()
        latencies.extend([float("inf")] * len(late))
    return {"rps": rate, "p50": _percentile(latencies, 0.5), "p99": _percentile(latencies, 0.99),
            "late_p99": _percentile(lateness, 0.99)}


def drive(args: argparse.Namespace) -> None:
    ctx = ssl.create_default_context(cafile=args.ca)
    body = review_body()
    url = f"https://localhost:{args.port}/mutate"
    if args.rate:
        result = asyncio.run(_fixed_rate(url, ctx, body, rate=args.rate, seconds=args.seconds, connections=args.connections))
    else:
        result = asyncio.run(_closed_loop(url, ctx, body, connections=args.connections, seconds=args.seconds))
    print(json.dumps(result))


# --- the orchestration --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=_insecure()) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server at {url} did not become ready")


def _insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


# With two CPUs or more, every server runs on the last one and the load generator on the
# first: the scheduler moving either of them about is noise both runs would not share.
_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
SERVER_CPU, DRIVER_CPU = (_CPUS[-1], _CPUS[0]) if len(_CPUS) >= 2 else (None, None)


def _pinned(cpu: int | None) -> Callable[[], None] | None:
    return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))


def _server_env() -> dict[str, str]:
    """The checkout on the path: an in-place compiled build keeps mypyc's runtime library there."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


@contextmanager
def _running(servers: dict[str, tuple[list[str], int, str]]) -> Iterator[None]:
    """Start every server at once (idle ones cost nothing) so rounds can interleave them."""
    procs = []
    try:
        for argv, _port, ready in servers.values():
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                                    env=_server_env(), preexec_fn=_pinned(SERVER_CPU))
            procs.append(proc)
            _wait_ready(ready, proc)
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


def _measure(port: int, ca: Path, args: argparse.Namespace, *, rate: float = 0) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--drive", "--port", str(port), "--ca", str(ca), "--seconds", str(args.seconds),
            "--connections", str(args.connections), "--rate", str(rate)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, preexec_fn=_pinned(DRIVER_CPU)).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def _webhook(folder: Path, count: int, tls: Path) -> tuple[list[str], int, str]:
    policies = folder / f"policies-{count}"
    policies.mkdir()
    (policies / "generated.yaml").write_text("---\n".join(policy_yaml(i) for i in range(count)))
    port, metrics = _free_port(), _free_port()
    argv = [sys.executable, "-m", "webhook", "serve", "--policies", str(policies), "--tls-cert", str(tls / "tls.crt"),
            "--tls-key", str(tls / "tls.key"), "--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics)]
    return argv, port, f"http://127.0.0.1:{metrics}/readyz"


def _bare(tls: Path, json_codec: str = "stdlib") -> tuple[list[str], int, str]:
    port = _free_port()
    argv = [sys.executable, str(ROOT / "bench" / "bare_app.py"), "--port", str(port), "--json", json_codec,
            "--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key")]
    return argv, port, f"https://127.0.0.1:{port}/readyz"


def _build() -> str:
    """Which build of the engine the servers import: the compiled one the image ships, or
    the pure-Python source (``PLACEMENT_WEBHOOK_COMPILE=1 python setup.py build_ext --inplace``)."""
    import webhook

    return "compiled (mypyc)" if webhook.compiled_build() else "pure Python (build in place to measure what the image ships)"


def _median(results: list[dict[str, Any]], key: str = "rps") -> dict[str, Any]:
    """The round with the median ``key`` (throughput, or p99 at a fixed rate), as a whole."""
    return sorted(results, key=lambda r: r[key])[len(results) // 2]


def _cpu_times() -> tuple[float, float] | None:
    """(stolen, total) CPU ticks of the machine so far: on a VM the hypervisor's steal is
    time no process ran, and it lands in the latencies of whatever was waiting."""
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0.0), sum(fields)


def _row(name: str, r: dict[str, Any]) -> str:
    return f"{name:<40} {r['rps']:>7,.0f}/s  p50 {r['p50'] * 1000:6.2f} ms  p99 {r['p99'] * 1000:6.2f} ms"


BASELINE = "bare aiohttp TLS app (json)"
STEAL_LIMIT = 0.05  # above it, stalls of the whole VM dominate tails and swing throughput
CODEC_BASELINE = "bare aiohttp TLS app (webhook's codec)"


def orchestrate(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="placement-bench-") as tmp:
        folder = Path(tmp)
        tls = folder / "tls"
        certs.ensure(tls, service="placement-webhook", namespace="default", dns=["localhost"], ips=["127.0.0.1"])
        pinning = f"servers on CPU {SERVER_CPU}, load on CPU {DRIVER_CPU}" if SERVER_CPU is not None else "no pinning"
        print(f"review body: {len(review_body()) / 1024:.1f} KiB, {args.connections} keep-alive connections, "
              f"{args.rounds} interleaved rounds of {args.seconds:g} s, {os.cpu_count()} CPUs ({pinning})")
        print(f"engine build: {_build()}")
        servers = {BASELINE: _bare(tls), CODEC_BASELINE: _bare(tls, "codec")}
        for count in (10, 1000):
            servers[f"webhook, {count} policies"] = _webhook(folder, count, tls)
        ca = tls / "ca.crt"
        closed: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        fixed: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        before = _cpu_times()
        with _running(servers):
            for _ in range(args.rounds):  # interleaved: a slow minute of the machine hits every server
                for name, (_argv, port, _ready) in servers.items():
                    closed[name].append(_measure(port, ca, args))
            for _ in range(args.rounds):
                for name, (_argv, port, _ready) in servers.items():
                    fixed[name].append(_measure(port, ca, args, rate=args.rate))
        after = _cpu_times()
        print(f"{'closed loop, median round':<42}{'':<37}fixed rate {args.rate:g}/s, median round")
        for name in servers:
            row, slow = _row(name, _median(closed[name])), _median(fixed[name], "p99")
            print(f"  {row}   p50 {slow['p50'] * 1000:6.2f} ms  p99 {slow['p99'] * 1000:6.2f} ms"
                  f"  (load generator late p99 {slow['late_p99'] * 1000:5.2f} ms)")
        print("every round, in order (closed loop reviews/s | fixed-rate p99 ms / load generator late p99 ms):")
        for name in servers:
            rates = " ".join(f"{r['rps']:,.0f}" for r in closed[name])
            tails = " ".join(f"{r['p99'] * 1000:.1f}/{r['late_p99'] * 1000:.1f}" for r in fixed[name])
            print(f"  {name:<40} {rates} | {tails}")
        if before and after and after[1] > before[1]:
            stolen = (after[0] - before[0]) / (after[1] - before[1])
            print(f"CPU time stolen by the hypervisor during the run: {stolen:.0%}"
                  + (" -- too much for the figures to mean much; run again when the machine is quieter"
                     if stolen > STEAL_LIMIT else ""))
        webhook = _median(closed["webhook, 10 policies"])["rps"]
        ratio = webhook / _median(closed[BASELINE])["rps"]
        codec_ratio = webhook / _median(closed[CODEC_BASELINE])["rps"]
        p99 = _median(fixed["webhook, 10 policies"], "p99")["p99"]
        ok = ratio >= 0.75 and p99 < 0.005
        print(f"10 policies: {ratio:.0%} of the bare app's throughput (target >= 75%; {codec_ratio:.0%} of a bare app "
              f"parsing with the webhook's codec), p99 {p99 * 1000:.2f} ms at {args.rate:g}/s (target < 5 ms): "
              f"{'ok' if ok else 'MISSED'}")
        return 1 if (args.check and not ok) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each closed-loop round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per server and load (the median counts)")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections of the closed loop")
    parser.add_argument("--rate", type=float, default=500.0, help="reviews per second of the fixed-rate run")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        drive(args)
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
