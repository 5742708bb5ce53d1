"""Load test of the HTTP gateway: how many job submissions (POST /v1/jobs) a second it takes.

Starts `ttsfarm serve` here against the Redis given (a database of its own: the jobs go to a queue
no worker reads, and are removed afterwards with their records and the API key), then keeps
--concurrency requests in flight from one asyncio client (httpx) for --requests submissions after
a warm-up. Prints requests per second and latency percentiles. The client shares the machine with
the server, so on a small machine it takes a share of the CPU the figure could have had.

    .venv/bin/python benchmarks/gateway_load.py --redis redis://127.0.0.1:6379/14 \\
        --processes 1 2 --concurrency 32 --requests 3000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import redis

from gateway.keys import KeyStore
from ttsfarm.farm.registry import KEY_PREFIX

ROOT = Path(__file__).resolve().parent.parent
TEXT = "Gateway load test: one short sentence per job."
WARMUP_REQUESTS = 200


def start_gateway(
    redis_url: str, queue: str, processes: int, port: int, folder: str
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTSFARM_")}
    env.update(
        TTSFARM_BROKER_URL=redis_url,
        TTSFARM_QUEUE=queue,
        TTSFARM_STORAGE_URL=folder,
        TTSFARM_GATEWAY_RATE_LIMIT=str(10**9),  # never reached, but counted: its INCR is part of the cost
    )
    command = [sys.executable, "-m", "ttsfarm", "serve", "--port", str(port), "--workers", str(processes)]
    process = subprocess.Popen([*command, "--log-level", "warning"], env=env, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                time.sleep(1.0 * processes)  # every process up, not only the first
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the gateway did not start")


async def load(url: str, key: str, concurrency: int, total: int) -> tuple[list[float], list[str], float]:
    """``total`` submissions, ``concurrency`` at a time: (latencies, job ids, wall seconds)."""
    latencies: list[float] = []
    ids: list[str] = []
    errors: list[str] = []
    remaining = total
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as client:

        async def producer() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                answer = await client.post("/v1/jobs", json={"text": TEXT})
                latencies.append(time.perf_counter() - started)
                if answer.status_code == 202:
                    ids.append(answer.json()["id"])
                else:
                    errors.append(f"{answer.status_code} {answer.text[:120]}")

        started = time.perf_counter()
        await asyncio.gather(*(producer() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    if errors:
        print(f"  {len(errors)} errors, e.g. {errors[0]}", file=sys.stderr)
    return latencies, ids, wall


def clean(redis_url: str, queue: str, ids: list[str]) -> None:
    client = redis.Redis.from_url(redis_url)
    client.delete(queue)
    for start in range(0, len(ids), 1000):
        client.delete(*(f"{KEY_PREFIX}job:{job_id}" for job_id in ids[start : start + 1000]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--redis", default="redis://127.0.0.1:6379/14", help="Redis URL, a database of its own"
    )
    parser.add_argument(
        "--processes", type=int, nargs="+", default=[1], help="gateway processes (ttsfarm serve --workers)"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--requests", type=int, default=3000, help="submissions measured, after a warm-up")
    parser.add_argument("--port", type=int, default=18765)
    args = parser.parse_args()

    keys = KeyStore(args.redis)
    name = f"bench-{uuid.uuid4().hex[:8]}"
    key = keys.add(name)
    queue = f"ttsfarm-bench-{uuid.uuid4().hex[:8]}"
    print(f"cores: {os.cpu_count()}, concurrency {args.concurrency}, {args.requests} requests per run")
    print(f"{'processes':>9} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    try:
        with tempfile.TemporaryDirectory() as folder:
            for processes in args.processes:
                server = start_gateway(args.redis, queue, processes, args.port, folder)
                url = f"http://127.0.0.1:{args.port}"
                try:
                    _, warm_ids, _ = asyncio.run(load(url, key, args.concurrency, WARMUP_REQUESTS))
                    latencies, ids, wall = asyncio.run(load(url, key, args.concurrency, args.requests))
                finally:
                    server.terminate()
                    server.wait(30)
                    clean(args.redis, queue, warm_ids + ids)
                ms = np.array(latencies) * 1000
                print(
                    f"{processes:>9} {len(ids) / wall:>8.0f} {np.percentile(ms, 50):>8.1f} "
                    f"{np.percentile(ms, 99):>8.1f} {ms.max():>8.1f}"
                )
    finally:
        keys.revoke(name)


if __name__ == "__main__":
    main()
