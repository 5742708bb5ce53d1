"""The farm end to end, as users run it: Redis, one `ttsfarm worker`, jobs from `Client`.

For each variant in turn (an engine kind, ``TTSFARM_ENGINE``, and optional settings after a
colon, e.g. ``staged:TTSFARM_CONCURRENCY=32,TTSFARM_TEXT_PROCESSES=8``; ``staged@DIR`` runs the
worker from the source tree in DIR, another commit, for an A/B in one run): start a worker, time
its start to "ready", warm it up with a round of jobs, then submit --jobs jobs at once
per GPU (held-out prose, each job rotated to start at another sentence, FLAC to a local folder) and
wait for all of them. Stored audio seconds per second is the audio of every job over the time
from the first submit to the last job's finish, both taken from the job records, which also
give how many jobs were running at once on average (``jobs_running``). Also
reported: the worker's batcher counters (``celery inspect ttsfarm_stats``), with each batch's
time split into its run and the engine's stages (ms per batch), how busy the engine was (at
least one batch running) and its runners (each run's time over runners x wall), the CPU time of
the worker and its text processes over the timed round, the worker's peak resident memory and
the GPU memory in use after it. Starts its own Redis on --port.

    python benchmarks/farm_gpu.py --out DIR --variants staged single --jobs 400
    python benchmarks/farm_gpu.py --out DIR --gpus 2 --variants staged   # one worker per GPU
    python benchmarks/farm_gpu.py --out DIR --variants staged --profile 15  # py-spy: DIR/profile-*.txt
    python benchmarks/farm_gpu.py --out DIR --variants staged --loudness -18  # every job mastered
    python benchmarks/farm_gpu.py --out DIR --variants staged staged@../before staged@../before staged
    python benchmarks/farm_gpu.py --out DIR --smoke        # tiny, on the CPU
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from bench.farm import start_timeline, stop_workers
from bench.farm import start_worker as start_farm_worker
from producer import Client
from producer.client import JobSpec
from synthesis.staged import STAGES
from synthesis.text import split_sentences
from ttsfarm.core.jobs import JobStatus
from ttsfarm.core.settings import Settings

HERE = Path(__file__).resolve().parent
PROSE = HERE / "corpus.txt"
JOB_WORDS = 420
POLL = 0.2
STATUSES_PER_READ = 500  # job statuses read in one round trip while waiting
STAGE_COLUMNS = ("run", *STAGES)


def job_texts(count: int, words: int) -> list[str]:
    sentences = split_sentences(PROSE.read_text().replace("\n", " "))
    texts = []
    for index in range(count):
        start = index % len(sentences)
        rotated = sentences[start:] + sentences[:start]
        picked: list[str] = []
        while sum(len(s.split()) for s in picked) < words:
            picked.append(rotated[len(picked) % len(rotated)])
        texts.append(" ".join(picked))
    return texts


def start_redis(server: str, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            return process
        except redis.ConnectionError:
            time.sleep(0.1)
    raise RuntimeError("redis did not start")


def start_worker(
    env: dict[str, str],
    log_path: Path,
    smoke: bool,
    gpu: int = 0,
    name: str | None = None,
    checkout: Path | None = None,
) -> tuple[subprocess.Popen[bytes], float]:
    """Start ``ttsfarm worker`` (on GPU ``gpu``, or the CPU with ``smoke``; from ``checkout``
    where given) and wait for it to be ready; ``name`` sets its Celery name, for several workers
    on one GPU."""
    started = time.monotonic()
    where = ["--cpu", "--hostname", name or f"ttsfarm-cpu{gpu}@%h"] if smoke else ["--gpu", str(gpu)]
    if name and not smoke:
        where += ["--hostname", name]
    env = {"TTSFARM_METRICS_PORT": "0", **env}  # workers of one host would share the default port
    process = start_farm_worker(where, env, log_path, checkout=checkout)
    return process, time.monotonic() - started


def wait_all(client: Client, ids: list[str], timeout: float = 3600.0, poll: float = POLL) -> list[JobStatus]:
    """Every job's final status (polling only those still open), in the order of ``ids``."""
    done: dict[str, JobStatus] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(ids) and time.monotonic() < deadline:
        open_ids = [job_id for job_id in ids if job_id not in done]
        for start in range(0, len(open_ids), STATUSES_PER_READ):
            chunk = open_ids[start : start + STATUSES_PER_READ]
            done.update(
                (job_id, s) for job_id, s in zip(chunk, client.statuses(chunk), strict=True) if s.done
            )
        time.sleep(poll)
    return [done.get(job_id) or client.status(job_id) for job_id in ids]


def run_jobs(
    client: Client, texts: list[str], audio_format: str, loudness: float | None = None
) -> dict[str, Any]:
    ids = client.submit_many([JobSpec(text, format=audio_format, loudness=loudness) for text in texts])
    statuses = wait_all(client, ids)
    done = [s for s in statuses if s.result is not None]
    audio = sum(s.result.duration for s in done if s.result)
    first = min(s.submitted_at or 0.0 for s in statuses)
    last = max(s.finished_at or 0.0 for s in statuses)
    return {
        "jobs": len(ids),
        "succeeded": len(done),
        "failed": [s.error for s in statuses if s.result is None][:3],
        "audio_s": round(audio, 1),
        "wall_s": round(last - first, 2),
        "stored_audio_per_s": round(audio / (last - first), 1) if last > first else None,
        "jobs_running": jobs_running(statuses, first, last),
    }


def jobs_running(statuses: list[JobStatus], first: float, last: float) -> float | None:
    """How many jobs were running at once on average (from each job's start on a worker to its
    finish), over the middle 80% of the round: against the jobs a worker takes at once, the
    slots lost between one job's end and the next one's start."""
    low, high = first + 0.1 * (last - first), last - 0.1 * (last - first)
    if high <= low:
        return None
    spans = [(s.started_at, s.finished_at) for s in statuses if s.started_at and s.finished_at]
    running = sum(max(0.0, min(end, high) - max(start, low)) for start, end in spans)
    return round(running / (high - low), 2)


def cpu_seconds(pid: int) -> tuple[float, float] | None:
    """CPU time (user and system) so far of a process, and of its children (None without psutil)."""
    try:
        import psutil
    except ImportError:
        return None
    process = psutil.Process(pid)
    own = process.cpu_times()
    children = sum(t.user + t.system for t in (c.cpu_times() for c in process.children(recursive=True)))
    return own.user + own.system, children


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy so far (not idle, not waiting)."""
    import psutil

    times = psutil.cpu_times()
    return sum(getattr(times, part, 0.0) for part in ("user", "nice", "system", "irq", "softirq"))


def peak_memory_mib(pid: int) -> dict[str, float]:
    """The worker's peak resident memory (``VmHWM``, its own process) and the GPU memory used on
    the whole machine, every GPU and process (nvidia-smi, where there is one), in MiB."""
    found: dict[str, float] = {}
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # the worker is gone
        status = ""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            found["worker_peak_rss_mib"] = round(int(line.split()[1]) / 1024, 1)
    smi = shutil.which("nvidia-smi")
    if smi:
        used = subprocess.run(
            [smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if used and all(value.isdigit() for value in used):  # not "[N/A]"
            found["gpu_used_mib"] = float(sum(int(value) for value in used))
    return found


def batcher_stats(client: Client) -> dict[str, float] | None:
    """The engines' batcher counters, added up: the consumers of one engine (same host, same
    engine process) each report all of its counts, so each engine counts once."""
    replies = client._app.control.inspect(timeout=5.0)._request("ttsfarm_stats")
    if not replies:
        return None
    engines = {  # trees before the consumers' engine process: each worker its own engine
        (name.partition("@")[2], reply.get("engine_process", name)): reply for name, reply in replies.items()
    }
    keys = ("batches", "items", "busy_seconds", "run_seconds", "runners")
    totals = {key: float(sum(reply.get(key, 0.0) for reply in engines.values())) for key in keys}
    for reply in engines.values():
        for stage, seconds in reply.get("stage_seconds", {}).items():
            totals[f"stage {stage}"] = totals.get(f"stage {stage}", 0.0) + seconds
    return totals


def per_batch_ms(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Milliseconds per batch over the timed round: each engine run (``run``, from its runner's
    start to its audio), and the staged engine's stages and the steps and waits between them
    (``synthesis.staged.STAGES``; older trees count fewer, and ran expand and the copy on the
    graph lane). What a run holds beyond them is host work between the steps, and the
    interpreter lock."""
    batches = after["batches"] - before["batches"]
    if not batches:
        return {}
    keys = ["run_seconds", *(key for key in after if key.startswith("stage "))]
    ms = {
        key.removeprefix("stage ").removesuffix("_seconds"): (after[key] - before.get(key, 0.0))
        * 1000
        / batches
        for key in keys
    }
    return {key: round(value, 2) for key, value in ms.items()}


def start_profile(
    pid: int, path: Path, seconds: int = 8, gil: bool = False, rate: int = 100
) -> subprocess.Popen[bytes] | None:
    """py-spy's samples of a worker as folded stacks, ``rate`` a second: every thread, its text
    processes too; or with ``gil`` only the thread that holds the GIL, which is what the
    worker's Python queues on."""
    spy = shutil.which("py-spy")
    if spy is None:
        print("no py-spy on PATH: no profile", flush=True)
        return None
    command = [spy, "record", "--pid", str(pid), "--duration", str(seconds), "--rate", str(rate)]
    command += ["--format", "raw"]
    command += ["--gil"] if gil else ["--subprocesses"]
    return subprocess.Popen([*command, "--nonblocking", "--output", str(path)])


def measure(
    variant: str, args: argparse.Namespace, port: int, folder: Path, name: str | None = None
) -> dict[str, Any]:
    """One variant's round; ``name`` (default: the variant) names its files, for repeats."""
    engine, _, extra = variant.partition(":")
    kind, _, tree = engine.partition("@")
    checkout = Path(tree).resolve() if tree else None
    label = (name or variant).replace(":", "-").replace(",", "-").replace("=", "").replace("@", "-")
    label = label.replace("/", "_").replace(" #", "-")
    storage = folder / f"out-{label}"
    env = {
        **os.environ,
        "TTSFARM_BROKER_URL": f"redis://127.0.0.1:{port}/0",
        "TTSFARM_STORAGE_URL": str(storage),
        "TTSFARM_ENGINE": kind,
        "PYTHONUNBUFFERED": "1",
        **dict(pair.split("=", 1) for pair in extra.split(",") if pair),
    }
    started = [
        start_worker(env, folder / f"worker-{label}-{gpu}.log", args.smoke, gpu, checkout=checkout)
        for gpu in range(args.gpus)
    ]
    workers = [worker for worker, _ in started]
    ready_s = max(seconds for _, seconds in started)
    try:
        client = Client(Settings(broker_url=env["TTSFARM_BROKER_URL"], storage_url=str(storage)))
        warm = run_jobs(client, job_texts(args.warmup, args.words), args.format, args.loudness)
        before_stats, before_cpu = batcher_stats(client), cpu_seconds(workers[0].pid)
        profilers = [
            start_profile(workers[0].pid, args.out / f"profile-{label}{suffix}.txt", args.profile, gil)
            for suffix, gil in (("", False), ("-gil", True))
            if args.profile
        ]
        timed = run_jobs(client, job_texts(args.jobs * args.gpus, args.words), args.format, args.loudness)
        for profiler in profilers:
            if profiler is not None:
                profiler.wait(args.profile + 60)
        after_stats, after_cpu = batcher_stats(client), cpu_seconds(workers[0].pid)
        timed.update(peak_memory_mib(workers[0].pid))
        if before_cpu is not None and after_cpu is not None and timed["wall_s"]:
            own, children = (
                round((b - a) / timed["wall_s"], 2) for a, b in zip(before_cpu, after_cpu, strict=True)
            )
            timed["worker_cores"], timed["text_cores"] = own, children
        if before_stats and after_stats:
            batches = after_stats["batches"] - before_stats["batches"]
            items = after_stats["items"] - before_stats["items"]
            timed["batches"], timed["mean_batch"] = batches, round(items / max(batches, 1), 2)
            busy = after_stats["busy_seconds"] - before_stats["busy_seconds"]
            timed["engine_busy"] = round(busy / args.gpus / timed["wall_s"], 3) if timed["wall_s"] else None
            running = after_stats["run_seconds"] - before_stats["run_seconds"]
            places = after_stats["runners"] * timed["wall_s"]
            timed["runners_busy"] = round(running / places, 3) if places else None
            timed["ms_per_batch"] = per_batch_ms(before_stats, after_stats)
        client.close()
    finally:
        stop_workers(workers)
        redis.Redis(port=port).flushall()
        shutil.rmtree(storage, ignore_errors=True)
    log_tail = (folder / f"worker-{label}-0.log").read_text(errors="replace").splitlines()
    marks = ("loaded on", "engine ready", "prepared in")
    engine_lines = [line for line in log_tail if any(mark in line for mark in marks)]
    start = start_timeline(folder / f"worker-{label}-0.log")
    found = {"ready_s": round(ready_s, 1), "start": start, "warmup": warm, "timed": timed}
    return {**found, "log": engine_lines[-4:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variants", nargs="+", default=["staged", "single"])
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=48)
    parser.add_argument("--words", type=int, default=JOB_WORDS)
    parser.add_argument("--format", default="flac")
    parser.add_argument(
        "--loudness", type=float, default=None, metavar="LUFS", help="master every job to this loudness"
    )
    parser.add_argument("--port", type=int, default=6390)
    parser.add_argument("--gpus", type=int, default=1, help="workers, one per GPU; --jobs is per GPU")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="SECONDS",
        help="py-spy the worker this long from the timed jobs' start (all threads; the GIL's); costs CPU",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU")
    args = parser.parse_args()
    if args.smoke:
        args.jobs, args.warmup, args.words = 3, 1, 12
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    server = start_redis(args.redis_server, args.port)
    try:
        with tempfile.TemporaryDirectory(prefix="ttsfarm-farm-") as folder:
            for index, kind in enumerate(args.variants):
                seen = args.variants[:index].count(kind)
                label = f"{kind} #{seen + 1}" if seen else kind  # a variant named twice: A B B A
                print(f"== {label}", flush=True)
                try:
                    results[label] = measure(kind, args, args.port, Path(folder), label)
                except Exception as error:
                    results[label] = {"error": repr(error)}
                for log in sorted(Path(folder).glob("worker-*.log")):  # kept: a failed job's details
                    shutil.copy(log, args.out / log.name)
                print(json.dumps(results[label]), flush=True)
                (args.out / "farm.json").write_text(json.dumps(results, indent=1))
    finally:
        server.terminate()
    columns = "ready s | first round: stored audio s/s, done s after start"
    columns += " | jobs | audio s | wall s | stored audio s/s | jobs running | mean batch"
    columns += " | engine / runners busy | cores"
    columns += f" (worker / text) | peak RSS / machine's GPU MiB | ms per batch: {' / '.join(STAGE_COLUMNS)}"
    print(f"| variant | {columns} |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind, found in results.items():
        timed, warm = found.get("timed", {}), found.get("warmup", {})
        first_done = round(found["ready_s"] + warm["wall_s"], 1) if warm.get("wall_s") else None
        ms = timed.get("ms_per_batch", {})
        print(
            f"| {kind} | {found.get('ready_s')} | {warm.get('stored_audio_per_s')}, {first_done} | "
            f"{timed.get('succeeded')}/{timed.get('jobs')} | "
            f"{timed.get('audio_s')} | {timed.get('wall_s')} | {timed.get('stored_audio_per_s')} | "
            f"{timed.get('jobs_running')} | "
            f"{timed.get('mean_batch')} | {timed.get('engine_busy')} / {timed.get('runners_busy')} | "
            f"{timed.get('worker_cores')} / {timed.get('text_cores')} | "
            f"{timed.get('worker_peak_rss_mib')} / {timed.get('gpu_used_mib')} | "
            f"{' / '.join(str(ms.get(key, '-')) for key in STAGE_COLUMNS)} |"
        )


if __name__ == "__main__":
    main()
