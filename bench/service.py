"""Service benchmark (issue #6): API submission rate and latency, one big scheduling pass.

1. Submissions through the REST API of a real ``ilucid serve`` process (SQLite
   in WAL mode, a temporary data directory) from one keep-alive HTTP client:
   jobs per second and p50/p99 latency; goal >= 500/s and p99 <= 50 ms. One
   8-GPU job holds the 8 virtual GPUs, so the submitted jobs only queue.
2. One scheduling pass of the tiered policy with 10,000 pending jobs on a
   2,048-node x 8-GPU inventory that is full except for a few GPUs, median
   of 7 passes; goal <= 100 ms. The baseline printed beside it is the same
   pass on an empty queue (the fixed cost). Also the first pass on an empty
   inventory, which places as many of the 10,000 jobs as fit (scan depth 200
   bounds how many it tries).
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ilucid.core import Cluster, JobSpec, Scheduler, make_policy


def api_submissions(count: int = 3000) -> tuple[float, float, float]:
    """Through a real ``ilucid serve`` process over HTTP (keep-alive client)."""
    with tempfile.TemporaryDirectory() as folder:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ilucid.cli",
                "serve",
                "--data-dir",
                folder,
                "--gpus",
                "8",
                "--port",
                str(port),
                "--policy",
                "fifo",
                "--interval",
                "60",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            token_file = Path(folder) / "admin.token"
            deadline = time.monotonic() + 30
            while not token_file.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            token = token_file.read_text().strip()
            client = httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
            )
            while time.monotonic() < deadline:
                try:
                    client.get("/healthz")
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            # one job holds all 8 GPUs, so the submissions below only queue
            client.post("/jobs", json={"command": ["sleep", "600"], "gpus": 8})
            body = {"command": ["true"], "gpus": 8, "estimate_s": 600}
            latencies = []
            started = time.perf_counter()
            for _ in range(count):
                t0 = time.perf_counter()
                response = client.post("/jobs", json=body)
                latencies.append(time.perf_counter() - t0)
                assert response.status_code == 201, response.text
            elapsed = time.perf_counter() - started
        finally:
            server.terminate()
            server.wait(timeout=10)
    latencies.sort()
    return count / elapsed, latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]


def first_pass_on_empty(pending: int = 10_000, nodes: int = 2048) -> tuple[float, int]:
    """The pass that places ``pending`` jobs on an empty inventory: (seconds, starts)."""
    scheduler = Scheduler(Cluster.homogeneous(nodes, 8), make_policy("tiered"))
    for k in range(pending):
        gpus = (1, 2, 4, 8)[k % 4]
        scheduler.submit(JobSpec(f"p{k}", 0, gpus, 100, estimate=100.0 * (1 + k % 50)), 0)
    t0 = time.perf_counter()
    decisions = scheduler.schedule(1)
    return time.perf_counter() - t0, len(decisions)


def scheduling_pass(pending: int, nodes: int = 2048, repeats: int = 7) -> float:
    cluster = Cluster.homogeneous(nodes, 8)
    scheduler = Scheduler(cluster, make_policy("tiered"))
    # fill the cluster, leaving 3 GPUs free, then queue the pending jobs
    for k in range(nodes - 1):
        scheduler.submit(JobSpec(f"f{k}", 0, 8, 1e9, estimate=1e9), 0)
    scheduler.submit(JobSpec("f-last", 0, 5, 1e9, estimate=1e9), 0)
    scheduler.schedule(0)
    assert scheduler.free.free_total == 3
    for k in range(pending):  # none fits in the 3 free GPUs: every pass scans the queue
        gpus = (4, 8)[k % 2]
        scheduler.submit(JobSpec(f"p{k}", 1, gpus, 100, estimate=100.0 * (1 + k % 50)), 1)
    times = []
    for repeat in range(repeats):
        t0 = time.perf_counter()
        scheduler.schedule(2 + repeat)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    rate, p50, p99 = api_submissions()
    print(
        f"API submissions (SQLite WAL): {rate:,.0f}/s, p50 {p50 * 1000:.1f} ms,"
        f" p99 {p99 * 1000:.1f} ms (goals >= 500/s, p99 <= 50 ms)"
    )
    busy = scheduling_pass(10_000)
    empty = scheduling_pass(0)
    print(
        f"one tiered pass, 10,000 pending on 2,048 x 8 GPUs: {busy * 1000:.3f} ms median"
        f" (goal <= 100 ms); with an empty queue {empty * 1000:.3f} ms"
        f" ({busy / max(empty, 1e-9):,.0f}x)"
    )
    seconds, starts = first_pass_on_empty()
    print(
        f"the first pass on an empty 2,048 x 8 inventory with 10,000 pending: {seconds * 1000:.0f}"
        f" ms, {starts:,} jobs started ({seconds / max(starts, 1) * 1e6:.0f} us per start)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
