"""Scale-out on one host: N workers, one per GPU, sharing one Redis and one storage folder.

    python benchmarks/scale_out.py --out DIR --gpus 1 2 [4 8] [--jobs 300]
    python benchmarks/scale_out.py --out DIR --smoke          # tiny, CPU workers

For each N: start Redis and N ``ttsfarm worker --gpu i`` (CPU workers with --smoke), warm them
up with a round of jobs, then submit --jobs jobs per worker at once through ``Client`` (held-out
prose, each job rotated to start at another sentence, FLAC to a local folder) and wait for
all. Reported per N, from the job records and the workers' own counters:

- stored audio seconds per second in total and per GPU, and the scaling against N x the
  one-GPU figure of the same run;
- each worker's share of the segments it synthesized (``celery inspect ttsfarm_stats``);
- queue wait (submit to start) P50/P99 and submit-to-stored P50/P99;
- the host's CPU use over the timed round, in cores (and how many it has).

Prints a table and writes DIR/scale_out.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import psutil
import redis
from farm_gpu import job_texts, machine_busy_seconds, start_redis, start_worker, wait_all

from bench.farm import stop_workers
from producer import Client
from producer.client import JobSpec
from ttsfarm.core.settings import Settings

JOB_WORDS = 420


def percentiles(values: list[float], name: str) -> dict[str, float]:
    if not values:
        return {}
    return {f"{name}_p{q}_s": round(float(np.percentile(values, q)), 2) for q in (50, 99)}


def worker_items(client: Client) -> dict[str, float]:
    """Segments synthesized so far, per worker (by its Celery host name)."""
    replies = client._app.control.inspect(timeout=5.0)._request("ttsfarm_stats") or {}
    return {name: float(reply["items"]) for name, reply in replies.items()}


def run_round(client: Client, texts: list[str], timeout: float) -> dict[str, Any]:
    busy_before = machine_busy_seconds()
    ids = client.submit_many([JobSpec(text, format="flac") for text in texts])
    statuses = wait_all(client, ids, timeout)
    busy = machine_busy_seconds() - busy_before
    ok = [s for s in statuses if s.state == "succeeded" and s.result]
    first = min(s.submitted_at or 0.0 for s in statuses)
    last = max((s.finished_at or 0.0) for s in ok) if ok else first
    wall = last - first
    waits = [(s.started_at or 0.0) - (s.submitted_at or 0.0) for s in ok if s.started_at and s.submitted_at]
    totals = [(s.finished_at or 0.0) - (s.submitted_at or 0.0) for s in ok]
    audio = sum(s.result.duration for s in ok if s.result)
    return {
        "jobs": len(ids),
        "succeeded": len(ok),
        "not_succeeded": [f"{s.state}: {s.error}" for s in statuses if s not in ok][:3],
        "audio_s": round(audio, 1),
        "wall_s": round(wall, 2),
        "stored_audio_per_s": round(audio / wall, 1) if wall > 0 else None,
        "host_cores_busy": round(busy / wall, 2) if wall > 0 else None,
        "host_cores": psutil.cpu_count(),
        **percentiles(waits, "queue_wait"),
        **percentiles(totals, "submit_to_stored"),
    }


def measure(workers: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    storage = folder / f"out-{workers}"
    env = {
        **os.environ,
        "TTSFARM_BROKER_URL": f"redis://127.0.0.1:{args.port}/0",
        "TTSFARM_STORAGE_URL": str(storage),
        "PYTHONUNBUFFERED": "1",
        **dict(pair.split("=", 1) for pair in args.settings),
    }
    started = [
        start_worker(env, folder / f"worker-{workers}-{gpu}.log", args.smoke, gpu) for gpu in range(workers)
    ]
    try:
        client = Client(Settings(broker_url=env["TTSFARM_BROKER_URL"], storage_url=str(storage)))
        run_round(client, job_texts(args.warmup * workers, args.words), args.timeout)
        before = worker_items(client)
        timed = run_round(client, job_texts(args.jobs * workers, args.words), args.timeout)
        after = worker_items(client)
        made = {name: after[name] - before.get(name, 0.0) for name in after}
        total = sum(made.values()) or 1.0
        timed["worker_share"] = {name: round(count / total, 3) for name, count in sorted(made.items())}
        timed["ready_s"] = round(max(seconds for _, seconds in started), 1)
        client.close()
    finally:
        stop_workers([worker for worker, _ in started])
        redis.Redis(port=args.port).flushall()
        shutil.rmtree(storage, ignore_errors=True)
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--jobs", type=int, default=300, help="jobs per worker in the timed round")
    parser.add_argument("--warmup", type=int, default=32, help="jobs per worker in the warm-up round")
    parser.add_argument("--words", type=int, default=JOB_WORDS)
    parser.add_argument(
        "--settings", nargs="*", default=[], help="worker settings, e.g. TTSFARM_TEXT_PROCESSES=4"
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--port", type=int, default=6392)
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--smoke", action="store_true", help="tiny, CPU workers")
    args = parser.parse_args()
    if args.smoke:
        args.jobs, args.warmup, args.words = 3, 1, 12
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    server = start_redis(args.redis_server, args.port)
    try:
        with tempfile.TemporaryDirectory(prefix="ttsfarm-scale-") as folder:
            for workers in args.gpus:
                try:
                    results[str(workers)] = measure(workers, args, Path(folder))
                except Exception as error:
                    results[str(workers)] = {"error": repr(error)}
                    for log in Path(folder).glob("worker-*.log"):
                        shutil.copy(log, args.out / log.name)
                print(workers, json.dumps(results[str(workers)]), flush=True)
                (args.out / "scale_out.json").write_text(json.dumps(results, indent=1))
    finally:
        server.terminate()
    one = results.get(str(min(args.gpus)), {}).get("stored_audio_per_s")
    base = one / min(args.gpus) if one else None
    print(
        "| workers | stored audio s/s | per worker | vs linear | worker shares "
        "| queue wait P50 / P99 s | host cores busy |"
    )
    print("|---|---|---|---|---|---|---|")
    for workers, found in results.items():
        rate = found.get("stored_audio_per_s")
        n = int(workers)
        linear = f"{rate / (base * n):.2f}" if rate and base else "-"
        shares = " / ".join(f"{share:.2f}" for share in found.get("worker_share", {}).values())
        print(
            f"| {n} | {rate} | {round(rate / n, 1) if rate else '-'} | {linear} | {shares} | "
            f"{found.get('queue_wait_p50_s')} / {found.get('queue_wait_p99_s')} | "
            f"{found.get('host_cores_busy')} of {found.get('host_cores')} |"
        )


if __name__ == "__main__":
    main()
