"""Many short jobs: one-sentence jobs through one worker, burst capacity, then an open loop.

    python benchmarks/short_jobs.py --out DIR [--burst 2000] [--fraction 0.7] [--seconds 20]
    python benchmarks/short_jobs.py --out DIR --variants TTSFARM_CONCURRENCY=128   # settings
    python benchmarks/short_jobs.py --out DIR --variants TTSFARM_CONSUMERS=8 @../before:TTSFARM_CONSUMERS=8
    python benchmarks/short_jobs.py --out DIR --workers-per-gpu 1 2 4   # several workers, one GPU
    python benchmarks/short_jobs.py --out DIR --smoke        # tiny, on the CPU

Starts its own Redis (--port) and, per variant, one ``ttsfarm worker`` (--gpu 0, or --cpu with
--smoke or --cpu) storing WAV files in a local folder. Jobs are single sentences of held-out
prose (8 to 30 words, about 3 to 10 s of audio each), submitted through ``Client``.

- *engine*: the same sentences straight through the worker's engine kind in a process of its
  own (phonemes ready, batches of the worker's size, its runner count): the rate a worker
  could reach with no per-job cost at all. The worker's jobs/s against it is the per-job cost.
- *burst*: --burst jobs submitted at once, by --submitters processes with one
  ``Client.submit_many`` each; jobs/s from the first submit to the last finish. A GPU worker is
  timed once it has prepared its engine in the background.
  The CPU each stored job cost the worker, its processes, Redis and the whole machine, and the
  Redis commands it took (``--profile-consumers``: py-spy on the engine's process and each
  consumer, interpreter lock only).
- *open loop*: jobs submitted at --fraction of the burst rate for --seconds, evenly spaced,
  from --submitters processes; latency of each job from submit to stored, taken from its own
  job record.

Each says when the producer, not the farm, was the limit: a burst whose last submit came near
its end, or an open loop that submitted under 0.9 of the rate asked.

With --workers-per-gpu N [M ...], each variant runs again with N (then M ...) worker processes
sharing GPU 0, each with its own engine and batcher. ``TTSFARM_CONSUMERS=N`` as a variant is one
worker in N consumer processes sharing one engine (``worker/consumers.py``). Both show whether
the host's per-job work in one interpreter, or the GPU, limits short jobs. A variant
``@DIR:SETTINGS`` runs the worker from the checkout in DIR (the code before a change, for an
A/B in one run).

Prints a table and writes DIR/short_jobs.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from itertools import zip_longest
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import redis
from farm_gpu import (
    PROSE,
    cpu_seconds,
    machine_busy_seconds,
    start_profile,
    start_redis,
    start_worker,
    wait_all,
)

from bench.engines import until_prepared
from bench.farm import start_timeline, stop_workers
from producer import Client
from producer.client import JobSpec
from synthesis.text import split_sentences
from ttsfarm.cli.sweep import corpus_items
from ttsfarm.core.jobs import JobStatus
from ttsfarm.core.settings import Settings

MIN_WORDS, MAX_WORDS = 8, 30
POLL = 0.05
# a producer that submitted slower than this share of what was asked (open loop), or that was
# still submitting for this share of a burst, was the limit, not the farm
PRODUCER_BOUND = 0.9
PREPARED = " prepared in "  # a worker's log line once its engine is prepared (bucket_preparation)


def sentences(count: int) -> list[str]:
    pool = [
        s
        for s in split_sentences(PROSE.read_text().replace("\n", " "))
        if MIN_WORDS <= len(s.split()) <= MAX_WORDS
    ]
    return [pool[index % len(pool)] for index in range(count)]


def summary(statuses: list[JobStatus], wall: float | None = None) -> dict[str, Any]:
    ok = [s for s in statuses if s.state == "succeeded" and s.submitted_at and s.finished_at]
    latencies = [(s.finished_at or 0.0) - (s.submitted_at or 0.0) for s in ok]
    first = min((s.submitted_at or 0.0) for s in statuses) if statuses else 0.0
    last = max((s.finished_at or 0.0) for s in ok) if ok else first
    span = wall if wall is not None else last - first
    audio = sum(s.result.duration for s in ok if s.result)
    row: dict[str, Any] = {
        "jobs": len(statuses),
        "succeeded": len(ok),
        "not_succeeded": [f"{s.state}: {s.error}" for s in statuses if s.state != "succeeded"][:3],
        "seconds": round(span, 2),
        "jobs_per_s": round(len(ok) / span, 1) if span > 0 else None,
        "audio_per_s": round(audio / span, 1) if span > 0 else None,
    }
    if latencies:
        for name, q in (("p50_ms", 50), ("p95_ms", 95), ("p99_ms", 99)):
            row[name] = round(float(np.percentile(latencies, q)) * 1000, 1)
    return row


def burst(client: Client, count: int, timeout: float, submitters: int) -> dict[str, Any]:
    """``count`` jobs at once: ``submitters`` processes each queue their share in one call
    (``Client.submit_many``), all starting at the same moment."""
    texts = sentences(count)
    submitters = min(submitters, count)
    start = time.time() + 1.0
    shares = [texts[n::submitters] for n in range(submitters)]
    with ProcessPoolExecutor(submitters) as pool:
        sent = list(pool.map(submit_at, [client.settings] * submitters, [start] * submitters, shares))
    ids = [job_id for share in zip_longest(*(i for i, _ in sent)) for job_id in share if job_id is not None]
    submit_s = max(done for _, done in sent) - start
    row = summary(wait_all(client, ids, timeout, POLL))
    row["submitted_per_s"] = round(count / submit_s, 1) if submit_s > 0 else None
    # the farm was done right after the last submit: it kept pace with the producer
    row["producer_limited"] = submit_s >= PRODUCER_BOUND * row["seconds"]
    return row


def submit_at(settings: Settings, start: float, texts: list[str]) -> tuple[list[str], float]:
    """One burst submitter process: its texts in one call at ``start``; the ids and when done."""
    with Client(settings) as client:
        client.ping()  # connected before the clock starts
        time.sleep(max(start - time.time(), 0.0))
        ids = client.submit_many([JobSpec(text) for text in texts])
        return ids, time.time()


def open_loop(client: Client, rate: float, seconds: float, timeout: float, submitters: int) -> dict[str, Any]:
    """Submit at ``rate`` jobs/s, evenly spaced, from ``submitters`` processes (one client each:
    one process's submits top out near 220 a second), so that the load offered is the load asked."""
    texts = sentences(max(int(rate * seconds), 1))
    submitters = min(submitters, len(texts))
    start = time.time() + 1.0
    schedule = [(start + index / rate, text) for index, text in enumerate(texts)]
    shares = [schedule[n::submitters] for n in range(submitters)]
    settings = client.settings
    with ProcessPoolExecutor(submitters) as pool:
        sent = list(pool.map(submit_on_schedule, [settings] * submitters, shares))
    ids = [job_id for share in zip_longest(*sent) for job_id in share if job_id is not None]
    sent_for = time.time() - start
    row = summary(wait_all(client, ids, timeout, POLL))
    row["offered_per_s"] = round(rate, 1)
    row["submitted_per_s"] = round(len(ids) / sent_for, 1)
    row["producer_limited"] = row["submitted_per_s"] < PRODUCER_BOUND * rate
    return row


def submit_on_schedule(settings: Settings, schedule: list[tuple[float, str]]) -> list[str]:
    """One submitter process: each text at its time (wall clock, shared by the processes)."""
    with Client(settings) as client:
        ids = []
        for due, text in schedule:
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            ids.append(client.submit(text))
        return ids


def engine_rate(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """The engine's own rate on the same sentences, in a process of its own."""
    command = [sys.executable, __file__, "--engine-only", "--out", str(args.out), "--burst", str(args.burst)]
    if args.smoke or args.cpu:
        command.append("--cpu")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"error": done.stderr[-1500:]}
    return dict(json.loads(lines[-1]))


def engine_only(args: argparse.Namespace) -> None:
    """Run by :func:`engine_rate` in its own process: prints one JSON line."""
    from synthesis.build import build_synthesizer

    settings = Settings.load().with_options(provider="cpu" if args.cpu else "cuda", prewarm=True)
    synthesizer = build_synthesizer(settings)
    batcher = synthesizer.batcher
    engine = batcher.engine(synthesizer.voice(settings.voice))
    until_prepared(engine.background)  # timed once the engine is prepared
    items = [item for text in sentences(args.burst) for item in corpus_items(engine.voice, text)]
    items.sort(key=lambda item: len(item.phoneme_ids))
    size = batcher.max_batch
    batches = [items[start : start + size] for start in range(0, len(items), size)]
    scales = engine.default_scales()
    engine.run(batches[0], scales)
    started = time.perf_counter()
    with ThreadPoolExecutor(batcher.runners) as pool:
        samples = sum(sum(map(len, waves)) for waves in pool.map(lambda b: engine.run(b, scales), batches))
    wall = time.perf_counter() - started
    print(
        json.dumps(
            {
                "sentences": args.burst,
                "segments": len(items),
                "batch": size,
                "runners": batcher.runners,
                "jobs_per_s": round(args.burst / wall, 1),
                "audio_per_s": round(samples / engine.voice.sample_rate / wall, 1),
            }
        ),
        flush=True,
    )


def measure(variant: str, count: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    tree, _, settings = variant.rpartition(":") if variant.startswith("@") else ("", "", variant)
    checkout = Path(tree[1:]).resolve() if tree else None
    label = variant.replace(",", "-").replace("=", "").replace("@", "").replace("/", "_") or "default"
    label = label.replace(":", "-") + f"-x{count}"
    storage = folder / f"out-{label}"
    env = {
        **os.environ,
        "TTSFARM_BROKER_URL": f"redis://127.0.0.1:{args.port}/0",
        "TTSFARM_STORAGE_URL": str(storage),
        "PYTHONUNBUFFERED": "1",
        **({"TTSFARM_CUDA_LAYOUT": "nchw"} if count > 1 else {}),  # NHWC's memory is for one worker a GPU
        **dict(pair.split("=", 1) for pair in settings.split(",") if pair),
    }
    cpu = args.smoke or args.cpu
    names = [
        f"ttsfarm-{'cpu' if cpu else 'gpu0'}-{index}@%h" if count > 1 else None for index in range(count)
    ]

    def start(index: int) -> tuple[subprocess.Popen[bytes], float]:
        return start_worker(env, folder / f"worker-{label}-{index}.log", cpu, 0, names[index], checkout)

    with ThreadPoolExecutor(count) as pool:
        started = list(pool.map(start, range(count)))
    workers = [worker for worker, _ in started]
    ready_s = max(seconds for _, seconds in started)
    worker = workers[0]
    try:
        client = Client(Settings(broker_url=env["TTSFARM_BROKER_URL"], storage_url=str(storage)))
        burst(client, max(args.burst // 10, 4), args.timeout, args.submitters)  # warm-up
        prepared_s = (
            None if cpu else wait_prepared([folder / f"worker-{label}-{n}.log" for n in range(count)])
        )
        profiler = start_profile(worker.pid, args.out / f"profile-{label}.txt") if args.profile else None
        held = [  # the engine's process ("host") and each consumer, the lock's holder only
            start_profile(
                pid,
                args.out / f"profile-{label}-{name}-gil.txt",
                seconds=args.profile_seconds,
                gil=True,
                rate=1000,
            )
            for name, pid in (profiled_processes(worker.pid) if args.profile_consumers else [])
        ]
        calls_before = redis_calls(args.port)
        before, began = cpu_use(worker.pid, args.redis_pid), time.monotonic()
        capacity = burst(client, args.burst, args.timeout, args.submitters)
        after, wall = cpu_use(worker.pid, args.redis_pid), time.monotonic() - began  # submitters' start too
        capacity["cpu_ms_per_job"] = per_job(before, after, capacity["succeeded"], wall)
        calls_after = redis_calls(args.port)
        capacity["redis_calls_per_job"] = calls_per_job(calls_before, calls_after, capacity["succeeded"])
        for spy in [profiler, *held]:
            if spy is not None:
                spy.wait(120)
        rate = (capacity.get("jobs_per_s") or 1.0) * args.fraction
        loop = open_loop(client, rate, args.seconds, args.timeout, args.submitters)
        client.close()
    finally:
        stop_workers(workers)
        redis.Redis(port=args.port).flushall()
        shutil.rmtree(storage, ignore_errors=True)
    start = start_timeline(folder / f"worker-{label}-0.log")
    row = {"workers": count, "ready_s": round(ready_s, 1), "start": start, "prepared_s": prepared_s}
    return {**row, "burst": capacity, "open_loop": loop}


def profiled_processes(worker_pid: int) -> list[tuple[str, int]]:
    """What ``--profile-consumers`` samples: the worker's own process, which runs the engine's
    batcher for every consumer, and each consumer."""
    consumers = [(f"consumer-{n}", pid) for n, pid in enumerate(consumer_pids(worker_pid), 1)]
    return [("host", worker_pid), *consumers]


def consumer_pids(worker_pid: int) -> list[int]:
    """The worker's consumer processes (``TTSFARM_CONSUMERS``): its children that multiprocessing
    spawned (their text processes are their own children)."""
    import psutil

    children = psutil.Process(worker_pid).children()
    return [child.pid for child in children if "spawn_main" in " ".join(child.cmdline())]


def cpu_use(worker_pid: int, redis_pid: int) -> dict[str, float]:
    """CPU seconds so far: the worker's own process (with consumers, the one that owns the
    engine), its child processes (consumers, text and finishing processes), of those the
    consumers alone (``consumers_own``: each one's interpreter, without its text processes),
    Redis, and every process of the machine (the producers and this script too)."""
    import psutil

    own, children = cpu_seconds(worker_pid) or (0.0, 0.0)
    consumers = 0.0
    for pid in consumer_pids(worker_pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            times = psutil.Process(pid).cpu_times()
            consumers += times.user + times.system
    server = psutil.Process(redis_pid).cpu_times()
    return {
        "worker": own,
        "its_processes": children,
        "consumers_own": consumers,
        "redis": server.user + server.system,
        "machine": machine_busy_seconds(),
    }


def redis_calls(port: int) -> dict[str, int]:
    """How many times Redis has run each command so far, and accepted a connection
    (``connections``: a client that connects anew for a command shows here)."""
    server = redis.Redis(port=port)
    stats = server.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}
    return {**calls, "connections": int(server.info("stats")["total_connections_received"])}


def calls_per_job(before: dict[str, int], after: dict[str, int], jobs: int) -> dict[str, float]:
    """Redis commands per stored job, by command, busiest first: the worker's and the producers'
    (submits, and the polls of the jobs' ends), ``total`` among them; and the connections Redis
    accepted per job."""
    found = {name: (calls - before.get(name, 0)) / max(jobs, 1) for name, calls in after.items()}
    connections = found.pop("connections", 0.0)
    kept = {name: round(n, 2) for name, n in sorted(found.items(), key=lambda kv: -kv[1]) if n >= 0.05}
    return {"total": round(sum(found.values()), 2), **kept, "connections": round(connections, 2)}


def per_job(before: dict[str, float], after: dict[str, float], jobs: int, wall: float) -> dict[str, float]:
    """The CPU milliseconds each of ``jobs`` cost each part, and the machine's busy cores over
    ``wall`` seconds."""
    found = {part: round((after[part] - before[part]) * 1000 / max(jobs, 1), 2) for part in before}
    found["machine_cores_busy"] = round((after["machine"] - before["machine"]) / wall, 1)
    return found


def wait_prepared(logs: list[Path], timeout: float = 120.0) -> float | None:
    """Wait until each GPU worker has prepared its engine in the background (its log says so),
    so that the jobs timed run at full speed; how long that was waited for (None: never said)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if all(PREPARED in log.read_text(errors="replace") for log in logs):
            return round(time.monotonic() - started, 1)
        time.sleep(0.5)
    print(f"no worker said it was prepared within {timeout:.0f} s: timing anyway", flush=True)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--variants", nargs="+", default=[""], help="worker settings, e.g. TTSFARM_CONCURRENCY=64"
    )
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument(
        "--workers-per-gpu", type=int, nargs="+", default=[1], help="worker processes sharing GPU 0"
    )
    parser.add_argument("--fraction", type=float, default=0.7)
    parser.add_argument("--submitters", type=int, default=8, help="processes submitting the jobs")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--port", type=int, default=6391)
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--cpu", action="store_true", help="a CPU worker")
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU")
    parser.add_argument("--profile", action="store_true", help="py-spy the worker during the burst")
    parser.add_argument(
        "--profile-consumers",
        action="store_true",
        help="py-spy the engine's process and each consumer during the burst, only the thread "
        "holding the interpreter lock (1,000 samples a second)",
    )
    parser.add_argument(
        "--profile-seconds", type=int, default=30, help="how long --profile-consumers samples"
    )
    parser.add_argument("--engine-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine_only:
        engine_only(args)
        return
    if args.smoke:
        args.burst, args.seconds, args.submitters = 6, 2.0, 2
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"engine": engine_rate(args, dict(os.environ))}
    print("engine", json.dumps(results["engine"]), flush=True)
    server = start_redis(args.redis_server, args.port)
    args.redis_pid = server.pid
    try:
        with tempfile.TemporaryDirectory(prefix="ttsfarm-short-") as folder:
            for variant, count in [(v, n) for v in args.variants for n in args.workers_per_gpu]:
                name = f"{variant or 'default'} x{count}"
                seen = sum(1 for key in results if key == name or key.startswith(f"{name} #"))
                name = f"{name} #{seen + 1}" if seen else name  # a variant named twice: A B B A
                try:
                    results[name] = measure(variant, count, args, Path(folder))
                except Exception as error:
                    results[name] = {"error": repr(error)}
                    for log in Path(folder).glob("worker-*.log"):
                        shutil.copy(log, args.out / log.name)
                print(name, json.dumps(results[name]), flush=True)
                (args.out / "short_jobs.json").write_text(json.dumps(results, indent=1))
    finally:
        server.terminate()
    engine = results["engine"].get("jobs_per_s")
    print(f"engine alone: {engine} jobs/s ({results['engine'].get('audio_per_s')} audio s/s)")
    print(
        "| worker settings | workers | burst jobs/s | share of engine | open loop jobs/s | P50 ms | P95 ms "
        "| P99 ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, found in results.items():
        if name == "engine" or "burst" not in found:
            continue
        b, o = found["burst"], found["open_loop"]
        share = f"{b['jobs_per_s'] / engine:.2f}" if engine and b.get("jobs_per_s") else "-"
        print(
            f"| {name} | {found['workers']} | {b.get('jobs_per_s')} | {share} | {o.get('jobs_per_s')} | "
            f"{o.get('p50_ms')} | {o.get('p95_ms')} | {o.get('p99_ms')} |"
        )
    for name, found in results.items():
        cpu = found.get("burst", {}).get("cpu_ms_per_job") if isinstance(found, dict) else None
        if cpu:
            print(f"{name}, burst: CPU ms per job {json.dumps(cpu)}")
            calls = found["burst"]["redis_calls_per_job"]
            print(f"{name}, burst: Redis commands per job {json.dumps(calls)}")
    for name, found in results.items():
        for part in ("burst", "open_loop"):
            row = found.get(part) if isinstance(found, dict) else None
            if row and row.get("producer_limited"):
                print(
                    f"{name}, {part}: the producer, not the farm, was the limit "
                    f"(submitted {row.get('submitted_per_s')} jobs/s"
                    + ("; add --submitters)" if part == "open_loop" else ")")
                )


if __name__ == "__main__":
    main()
