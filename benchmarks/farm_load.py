"""Load test of the farm: N concurrent producers of short sentences against real workers.

Starts what it needs on this machine: an S3 endpoint (moto's server) unless --s3-endpoint is
given, and --workers worker processes on the CPU (or GPU with --provider). Redis must be
running (scripts/services). Each producer submits a sentence, waits until its audio is in
storage, and submits the next (closed loop). Prints jobs per second and latency percentiles
from submit to object in storage, for each producer count in one run.

    .venv/bin/python benchmarks/farm_load.py --producers 1 4 16 --seconds 30
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import boto3
import numpy as np
import redis

from bench.farm import CREDENTIALS, farm_env, start_s3, start_worker
from producer import Client
from synthesis.text import split_sentences
from ttsfarm.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = split_sentences((ROOT / "examples" / "ellery.txt").read_text().replace("\n", " "))
BUCKET = "ttsfarm-load"


def farm_setup(redis_url: str, endpoint: str, prefix: str, provider: str) -> tuple[dict[str, str], Settings]:
    """Empty the Redis database, create the bucket; the workers' environment and the client's settings."""
    redis.Redis.from_url(redis_url).flushdb()
    os.environ.update(CREDENTIALS)
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    storage_url = f"s3://{BUCKET}/{prefix}"
    env = farm_env(redis_url, endpoint, storage_url, TTSFARM_PROVIDER=provider)
    return env, Settings(broker_url=redis_url, storage_url=storage_url, s3_endpoint_url=endpoint)


def start_workers(
    count: int, env: dict[str, str], concurrency: int, logs: Path
) -> list[subprocess.Popen[bytes]]:
    return [
        start_worker(["-c", str(concurrency), "-n", f"load{n}@%h"], env, logs / f"worker{n}.log")
        for n in range(count)
    ]


def run_load(client: Client, producers: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    audio: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def producer(offset: int) -> None:
        n = offset
        while time.monotonic() < stop_at:
            sent = time.monotonic()
            job_id = client.submit(SENTENCES[n % len(SENTENCES)])
            result = client.wait(job_id, timeout=300, poll=0.01)
            with lock:
                latencies.append(time.monotonic() - sent)
                audio.append(result.duration)
            n += producers

    started = time.monotonic()
    threads = [threading.Thread(target=producer, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    p50, p95, p99 = np.percentile(latencies, [50, 95, 99])
    return {
        "producers": producers,
        "jobs": len(latencies),
        "jobs_per_s": len(latencies) / elapsed,
        "audio_s_per_s": sum(audio) / elapsed,
        "p50": p50,
        "p95": p95,
        "p99": p99,
    }


def batch_stats(client: Client) -> tuple[int, int]:
    replies = client._app.control.broadcast("ttsfarm_stats", reply=True, timeout=5)
    stats = [next(iter(r.values())) for r in replies]
    return sum(s["batches"] for s in stats), sum(s["items"] for s in stats)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--producers", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=30.0, help="Load duration per producer count.")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16, help="Jobs in flight per worker.")
    parser.add_argument("--provider", default="cpu")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--s3-endpoint", help="Use this S3 endpoint instead of starting moto's server.")
    args = parser.parse_args()

    server = None
    endpoint = args.s3_endpoint
    if endpoint is None:
        server, endpoint = start_s3()
    env, settings = farm_setup(args.redis_url, endpoint, "load", args.provider)
    with tempfile.TemporaryDirectory() as logs:
        workers = start_workers(args.workers, env, args.concurrency, Path(logs))
        try:
            with Client(settings) as client:
                client.wait(client.submit("Warm up."), timeout=60)
                print(f"workers: {args.workers} x concurrency {args.concurrency}, provider {args.provider}")
                print("| producers | jobs | jobs/s | audio s/s | P50 ms | P95 ms | P99 ms | mean batch |")
                print("|---|---|---|---|---|---|---|---|")
                for producers in args.producers:
                    b0, i0 = batch_stats(client)
                    row = run_load(client, producers, args.seconds)
                    b1, i1 = batch_stats(client)
                    mean_batch = (i1 - i0) / max(1, b1 - b0)
                    print(
                        f"| {producers} | {row['jobs']:.0f} | {row['jobs_per_s']:.2f} "
                        f"| {row['audio_s_per_s']:.1f} "
                        f"| {row['p50'] * 1000:.0f} | {row['p95'] * 1000:.0f} | {row['p99'] * 1000:.0f} "
                        f"| {mean_batch:.2f} |",
                        flush=True,
                    )
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(30)
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
