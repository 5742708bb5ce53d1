"""How soon does streamed speech start through the gateway, alone and under a load of short jobs?

    python benchmarks/speech_latency.py --out DIR --redis-server PATH      # GPU 0, about 3 minutes
    python benchmarks/speech_latency.py --out DIR --repeats 40 --load-rate 100 --load-seconds 30
    python benchmarks/speech_latency.py --out DIR --consumers 6   # the worker as for short jobs
    python benchmarks/speech_latency.py --out DIR --smoke          # tiny, on the CPU

Starts its own Redis (--port), one ``ttsfarm worker`` (--gpu 0, or --cpu with --smoke or
--cpu; the worker's defaults, or --consumers N) storing WAV files in a local folder, and the
gateway (``ttsfarm serve``, one process) with an API key of its own; waits for ``/readyz``,
then warms up with a few speech requests. A speech request is ``POST /v1/audio/speech`` with
``response_format: pcm`` and ``stream_format: audio``, for one sentence and for the first 600
characters of corpus.txt cut at a word (``first_byte.py``'s texts), timed from sending it to
its answer's headers, to the first byte of audio and to the last. The headers come once the
gateway has checked the key and its quotas, looked for a live worker (a ping, when its last look
is over 2 s old) and submitted the job; the audio once the worker has made the first segment.

- *alone*: --repeats requests per text, one at a time, the texts taking turns, nothing else on
  the farm: P50/P90/P99/max.
- *under load*: --submitters processes submit one-sentence jobs (``short_jobs.py``'s sentences)
  through ``Client`` at --load-rate jobs/s, evenly spaced, for --load-seconds (an open loop, as
  ``short_jobs.py``'s); from 2 s into it until it ends the same speech requests are repeated,
  up to --repeats per text. Then the load's jobs are waited for (at most --drain-seconds): their
  latency from submit to stored (from their job records), the rate they were submitted at and
  stored at. Speech jobs are ``interactive`` (the gateway's), load jobs ``bulk`` (``Client``'s
  default): speech is taken before every load job that waits. The output says when the
  submitters fell behind the offered rate (the producer was the limit, not the farm), and when
  the farm did (its queue grew through the load).

Each streamed answer is checked against its job's stored result (the same length of audio).
The client, the submitters, the gateway and the worker share the machine. Prints a table and
writes DIR/speech_latency.json (the worker's and gateway's logs too, if anything failed).
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
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import numpy as np
from farm_gpu import start_redis, start_worker, wait_all
from first_byte import TEXTS
from short_jobs import sentences

from bench.farm import free_port, stop_workers
from gateway.keys import KeyStore
from producer import Client
from ttsfarm.core.errors import TtsfarmError
from ttsfarm.core.jobs import JobStatus
from ttsfarm.core.settings import Settings

VOICE: Final = "alloy"
"""What OpenAI's clients send by default: the farm's default voice."""
WARMUP_PER_TEXT: Final = 3
SETTLE_SECONDS: Final = 2.0
"""Speech requests under load start this long after the load's first job, once it runs."""
GATEWAY_START_SECONDS: Final = 90.0
REQUEST_TIMEOUT_SECONDS: Final = 180.0
BEHIND_SHARE: Final = 0.95
"""Submitters that sent less than this share of the offered rate fell behind it."""
BACKLOG_SECONDS: Final = 2.0
"""A farm holding more than this many seconds of the offered load at its end fell behind it."""
PERCENTILES: Final = (50, 90, 99)


def start_gateway(env: dict[str, str], port: int, log_path: Path) -> subprocess.Popen[bytes]:
    """``ttsfarm serve`` on ``port``, returned once ``/readyz`` answers 200 (Redis and a worker)."""
    command = [sys.executable, "-m", "ttsfarm", "serve", "--port", str(port), "--log-level", "warning"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + GATEWAY_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gateway exited early:\n{log_path.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"gateway not ready after {GATEWAY_START_SECONDS:.0f} s (log: {log_path})")


def speak(http: httpx.Client, label: str) -> dict[str, Any]:
    """One streamed speech request for ``TEXTS[label]``: seconds to its headers, to the first
    byte of audio and to the last; the bytes and the seconds of audio they hold."""
    body = {
        "model": "tts-1",
        "input": TEXTS[label],
        "voice": VOICE,
        "response_format": "pcm",
        "stream_format": "audio",
    }
    run: dict[str, Any] = {"text": label}
    started = time.perf_counter()
    first, size = None, 0
    try:
        with http.stream("POST", "/v1/audio/speech", json=body) as answer:
            run["headers_s"] = time.perf_counter() - started
            run["job_id"] = answer.headers.get("X-Job-Id")
            if answer.status_code != 200:
                answer.read()
                return {**run, "error": f"{answer.status_code} {answer.text[:200]}"}
            for chunk in answer.iter_raw():
                if chunk and first is None:
                    first = time.perf_counter() - started
                size += len(chunk)
            rate = int(answer.headers.get("X-Sample-Rate", "22050"))
    except httpx.HTTPError as error:  # a stream cut off: its job stopped
        return {**run, "error": repr(error)}
    if first is None:
        return {**run, "error": "no audio"}
    return {
        **run,
        "first_s": first,
        "last_s": time.perf_counter() - started,
        "bytes": size,
        "audio_s": size / 2 / rate,
    }


def speak_rounds(http: httpx.Client, repeats: int, until: float | None = None) -> list[dict[str, Any]]:
    """Up to ``repeats`` requests per text, one at a time, the texts taking turns; none started
    after the wall clock ``until``."""
    runs: list[dict[str, Any]] = []
    for _ in range(repeats):
        for label in TEXTS:
            if until is not None and time.time() >= until:
                return runs
            runs.append(speak(http, label))
    return runs


def check_complete(client: Client, runs: list[dict[str, Any]]) -> None:
    """Mark each streamed answer complete when it holds as much audio as its job stored."""
    for run in runs:
        if "error" in run or not run.get("job_id"):
            continue
        status = client.status(run["job_id"])
        stored = status.result.duration if status.result else None
        run["stored_audio_s"] = stored
        run["complete"] = stored is not None and abs(stored - run["audio_s"]) < 0.01


TIMES: Final = ("headers", "first", "last")
"""What each speech request is timed to: its answer's headers, its first and its last byte."""


def rounded(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``runs`` as the JSON keeps them: the times in ms."""
    kept = []
    for run in runs:
        times = {f"{key}_ms": round(run[f"{key}_s"] * 1000, 1) for key in TIMES if f"{key}_s" in run}
        kept.append({**{k: v for k, v in run.items() if k.removesuffix("_s") not in TIMES}, **times})
    return kept


def ms_figures(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    found = {f"p{q}": round(float(np.percentile(values, q)) * 1000, 1) for q in PERCENTILES}
    return {**found, "max": round(max(values) * 1000, 1)}


def speech_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per text: requests, errors and the percentiles (ms) of each time."""
    found: dict[str, Any] = {}
    for label in TEXTS:
        mine = [run for run in runs if run["text"] == label]
        ok = [run for run in mine if "error" not in run]
        found[label] = {
            "requests": len(mine),
            "errors": [run["error"] for run in mine if "error" in run][:3],
            "error_count": len(mine) - len(ok),
            "incomplete": sum(1 for run in ok if run.get("complete") is False),
            "audio_s": round(float(np.mean([run["audio_s"] for run in ok])), 2) if ok else None,
            **{f"{key}_ms": ms_figures([run[f"{key}_s"] for run in ok]) for key in TIMES},
        }
    return found


def submit_share(
    settings: Settings, start: float, rate: float, indexes: list[int], texts: list[str]
) -> dict[str, Any]:
    """One submitter process: job ``i`` of ``indexes`` at ``start + i / rate`` (wall clock, shared
    by the processes). Refusals (a full queue) are counted, not raised."""
    ids, lags, refused, last = [], [], 0, start
    first_refusal = None
    with Client(settings) as client:
        for index, text in zip(indexes, texts, strict=True):
            due = start + index / rate
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            try:
                ids.append(client.submit(text))
            except TtsfarmError as error:
                refused += 1
                first_refusal = first_refusal or repr(error)
            last = time.time()
            lags.append(max(0.0, last - due))
    return {"ids": ids, "lags": lags, "refused": refused, "refusal": first_refusal, "last": last}


def load_figures(
    statuses: list[JobStatus], shares: list[dict[str, Any]], args: argparse.Namespace, start: float
) -> dict[str, Any]:
    """The load's offered, submitted and stored rates, latency from submit to stored (a job not
    stored by the end of the drain counts as slower than any), and the verdicts."""
    end = start + args.load_seconds
    sent = sum(len(share["ids"]) for share in shares)
    tried = sent + sum(share["refused"] for share in shares)
    tried_for = max(share["last"] for share in shares) - start + 1 / args.load_rate  # on time: tried / rate
    lags = [lag for share in shares for lag in share["lags"]]
    ok = [s for s in statuses if s.state == "succeeded" and s.submitted_at and s.finished_at]
    latencies = sorted((s.finished_at or 0.0) - (s.submitted_at or 0.0) for s in ok)
    last = max((s.finished_at or 0.0) for s in ok) if ok else end
    backlog = sent - sum(1 for s in ok if (s.finished_at or 0.0) <= end)
    row: dict[str, Any] = {
        "offered_per_s": round(args.load_rate, 1),
        "submitted_per_s": round(tried / tried_for, 1),
        "submit_lag_ms": ms_figures(lags),
        "refused": sum(share["refused"] for share in shares),
        "refusal": next((share["refusal"] for share in shares if share["refusal"]), None),
        "jobs": sent,
        "stored": len(ok),
        "not_stored": [f"{s.state}: {s.error}" for s in statuses if s.state != "succeeded"][:3],
        "stored_per_s": round(len(ok) / (last - start), 1) if ok and last > start else None,
        "backlog_at_end": backlog,
        "drained_s": round(max(0.0, last - end), 1),
    }
    for q in PERCENTILES:  # over every job sent: one never stored sits above all the stored ones
        rank = int(np.ceil(q / 100 * sent)) - 1 if sent else -1
        row[f"p{q}_ms"] = round(latencies[rank] * 1000, 1) if 0 <= rank < len(latencies) else None
    row["submitters_behind"] = (row["submitted_per_s"] or 0.0) < BEHIND_SHARE * args.load_rate
    row["farm_behind"] = backlog > args.load_rate * BACKLOG_SECONDS + 10 or len(ok) < sent
    return row


def under_load(
    http: httpx.Client, client: Client, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The speech requests while the open loop of short jobs runs; then the load's figures."""
    count = max(int(args.load_rate * args.load_seconds), 1)
    texts = sentences(count)
    start = time.time() + 1.0  # the submitter processes start meanwhile
    parts = [list(range(n, count, args.submitters)) for n in range(args.submitters)]
    with ProcessPoolExecutor(args.submitters) as pool:
        futures = [
            pool.submit(submit_share, client.settings, start, args.load_rate, part, [texts[i] for i in part])
            for part in parts
        ]
        time.sleep(max(0.0, start + SETTLE_SECONDS - time.time()))
        runs = speak_rounds(http, args.repeats, until=start + args.load_seconds)
        shares = [future.result() for future in futures]
    ids = [job_id for share in shares for job_id in share["ids"]]
    # from the load's end, or from its last submit where the submitters ran late
    drain = max(start + args.load_seconds - time.time(), 0.0) + args.drain_seconds
    statuses = wait_all(client, ids, drain, 0.1)
    return runs, load_figures(statuses, shares, args, start)


def measure(args: argparse.Namespace, folder: Path, results: dict[str, Any]) -> None:
    """Start the worker and the gateway, and fill ``results`` phase by phase."""
    redis_url = f"redis://127.0.0.1:{args.port}/0"
    storage = folder / "audio"
    env = {
        **os.environ,
        "TTSFARM_BROKER_URL": redis_url,
        "TTSFARM_STORAGE_URL": str(storage),
        "PYTHONUNBUFFERED": "1",
        **({"TTSFARM_CONSUMERS": str(args.consumers)} if args.consumers else {}),
    }
    cpu = args.smoke or args.cpu
    worker, ready_s = start_worker(env, folder / "worker.log", cpu)
    results["worker_ready_s"] = round(ready_s, 1)
    gateway = None
    try:
        port = free_port()
        gateway = start_gateway(env, port, folder / "gateway.log")
        key = KeyStore(redis_url).add("speech-latency")
        client = Client(Settings(broker_url=redis_url, storage_url=str(storage)))
        headers = {"Authorization": f"Bearer {key}"}
        url = f"http://127.0.0.1:{port}"
        with client, httpx.Client(base_url=url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS) as http:
            warm = speak_rounds(http, args.warmup)
            results["warmup_errors"] = [run["error"] for run in warm if "error" in run][:3]
            print(f"warm: {len(warm)} requests, {len(results['warmup_errors'])} failed", flush=True)
            alone = speak_rounds(http, args.repeats)
            check_complete(client, alone)
            results["alone"] = speech_figures(alone)
            results["runs"] = {"alone": rounded(alone)}
            save(args.out, results)
            print("alone", json.dumps(results["alone"]), flush=True)
            loaded, load = under_load(http, client, args)
            check_complete(client, loaded)
            results["under_load"] = {"speech": speech_figures(loaded), "load": load}
            results["runs"]["under_load"] = rounded(loaded)
            print("under load", json.dumps(results["under_load"]), flush=True)
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(30)
        stop_workers([worker])


def save(out: Path, results: dict[str, Any]) -> None:
    (out / "speech_latency.json").write_text(json.dumps(results, indent=1))


def stored_ms(value: float | None) -> str:
    return f"{value} ms" if value is not None else "over the drain (not stored)"


def quantiles(figures: dict[str, float], keys: tuple[str, ...]) -> str:
    return " / ".join(str(figures.get(key, "-")) for key in keys)


def print_table(results: dict[str, Any]) -> None:
    print(
        "| phase | text | requests | failed | headers P50 / max ms | first byte P50 / P90 / P99 / max ms "
        "| last byte P50 / P99 ms | audio s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    phases = {
        "alone": results.get("alone", {}),
        "under load": results.get("under_load", {}).get("speech", {}),
    }
    for phase, found in phases.items():
        for label, row in found.items():
            cells = [
                phase,
                label,
                row["requests"],
                row["error_count"] + row["incomplete"],
                quantiles(row["headers_ms"], ("p50", "max")),
                quantiles(row["first_ms"], ("p50", "p90", "p99", "max")),
                quantiles(row["last_ms"], ("p50", "p99")),
                row["audio_s"],
            ]
            print(f"| {' | '.join(map(str, cells))} |")
    load = results.get("under_load", {}).get("load")
    if not load:
        return
    lag = load["submit_lag_ms"]
    print(
        f"load: offered {load['offered_per_s']} jobs/s, submitted {load['submitted_per_s']}/s "
        f"(lag P99 {lag.get('p99')} ms, max {lag.get('max')} ms), stored {load['stored_per_s']}/s; "
        f"{load['stored']} of {load['jobs']} stored, {load['backlog_at_end']} not yet at the load's end, "
        f"drained {load['drained_s']} s after it; submit to stored P50 {stored_ms(load['p50_ms'])}, "
        f"P99 {stored_ms(load['p99_ms'])}"
    )
    if load["refused"]:
        print(f"the farm refused {load['refused']} load jobs: {load['refusal']}")
    if load["submitters_behind"]:
        print("the submitters fell behind the offered rate: the producer, not the farm, was the limit")
    if load["farm_behind"]:
        print("the farm fell behind the load: its queue grew (or jobs were not stored by the drain's end)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=20, help="speech requests per text, per phase")
    parser.add_argument("--warmup", type=int, default=WARMUP_PER_TEXT, help="warm-up requests per text")
    parser.add_argument("--load-rate", type=float, default=300.0, help="short jobs a second, offered")
    parser.add_argument("--load-seconds", type=float, default=30.0)
    parser.add_argument("--drain-seconds", type=float, default=60.0, help="most wait for the load after it")
    parser.add_argument("--submitters", type=int, default=8, help="processes submitting the load")
    parser.add_argument("--consumers", type=int, default=0, help="the worker's consumers (0: its default)")
    parser.add_argument("--port", type=int, default=6397)
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--cpu", action="store_true", help="a CPU worker")
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.warmup, args.submitters = 3, 1, 2
        args.load_rate, args.load_seconds, args.drain_seconds = 1.0, 15.0, 60.0
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    results: dict[str, Any] = {
        "device": "cpu" if args.smoke or args.cpu else "gpu 0",
        "options": {k: v for k, v in vars(args).items() if k not in ("out", "redis_server")},
        "texts": {label: len(text) for label, text in TEXTS.items()},
    }
    server = start_redis(args.redis_server, args.port)
    try:
        with tempfile.TemporaryDirectory(prefix="ttsfarm-speech-") as folder:
            try:
                measure(args, Path(folder), results)
            except Exception as error:
                results["error"] = repr(error)
                print(f"failed: {error!r}", file=sys.stderr, flush=True)
            failed = "error" in results or any(
                row["error_count"] or row["incomplete"]
                for phase in (results.get("alone", {}), results.get("under_load", {}).get("speech", {}))
                for row in phase.values()
            )
            if failed:
                for log in ("worker.log", "gateway.log"):
                    if (Path(folder) / log).exists():
                        shutil.copy(Path(folder) / log, args.out / log)
    finally:
        server.terminate()
        server.wait(30)
    results["total_s"] = round(time.monotonic() - began, 1)
    save(args.out, results)
    print_table(results)
    ready = results.get("worker_ready_s")
    print(f"{results['device']}, worker ready in {ready} s, {results['total_s']} s in all")
    if "error" in results:
        sys.exit(1)


if __name__ == "__main__":
    main()
