"""What 32 job threads writing their segments cost a worker's batch runners, on a CPU: a model
of the GPU worker's host side (docs/benchmarks.md, run 40), with the GPU's work as sleeps.

Three runner threads form batches of 32 segments from the jobs' requests and run each batch as
the staged engine does: the front (a GIL-free wait), the frame plan, expand, the waveform
replay handed to a lane thread of its own (``synthesis.lanes``), the copy, and the cut into
items (``synthesis.engine.cut_items``). Each step that waits on the "GPU" lets go of the
interpreter lock and has to win it back. 32 job threads each keep segments in flight and write
every finished one with ``synthesis.audio.SegmentWriter`` (FLAC to a temp file), as
``synthesis.pipeline`` does. Reported per batch: the run's wall time and its part beyond the
sleeps (the waits for the lock, and the runner's own Python), for the writes as the worker
makes them and with at most N job threads writing at once (a semaphore around the write: a
change the worker does not have, to be measured on a GPU first).

    .venv/bin/python benchmarks/job_threads_gil.py [--batches 150] [--writers 0 2 4] [--repeats 2]

Sizes are scaled to a small CPU (segments of 1.1 s, sleeps twice the H200's stage times) so the
writes do not run out of cores: the sizes show the mechanism, not a worker's.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthesis.audio import SegmentWriter
from synthesis.engine import cut_items

RATE = 22_050
ROWS = 32
SAMPLES = 24_576  # 1.1 s
JOBS = 32
AHEAD = 3 * ROWS
RUNNERS = 3
FRONT_S, EXPAND_S, REPLAY_S, COPY_S = 0.030, 0.001, 0.015, 0.001
SLEPT_S = FRONT_S + EXPAND_S + REPLAY_S + COPY_S


def speech_like(rng: np.random.Generator) -> np.ndarray:
    """A batch's audio: tones with noise, so FLAC has real work (silence would be free)."""
    t = np.arange(SAMPLES) / RATE
    row = 0.3 * np.sin(2 * np.pi * rng.uniform(90, 300) * t) + 0.05 * rng.standard_normal(SAMPLES)
    return np.tile(row.astype(np.float32), (ROWS, 1))


class Farm:
    def __init__(self, writers: int, batches: int) -> None:
        self.requests: queue.Queue[Future[np.ndarray] | None] = queue.Queue()
        self.writes = writers >= 0
        self.gate = threading.Semaphore(writers) if writers > 0 else contextlib.nullcontext()
        self.batches_left = batches
        self.count_lock = threading.Lock()
        self.lane = ThreadPoolExecutor(1, thread_name_prefix="lane")
        self.audio = speech_like(np.random.default_rng(0))
        self.samples = np.full(ROWS, SAMPLES)
        self.runs: list[float] = []
        self.stop = threading.Event()

    def runner(self) -> None:
        while True:
            with self.count_lock:
                if self.batches_left == 0:
                    return
                self.batches_left -= 1
            batch: list[Future[np.ndarray]] = []
            while len(batch) < ROWS:
                request = self.requests.get()
                if request is not None:
                    batch.append(request)
            started = time.perf_counter()
            time.sleep(FRONT_S)  # the front's session run, GIL free
            np.cumsum(self.samples)  # the plan's row sums, a small step
            time.sleep(EXPAND_S)
            self.lane.submit(time.sleep, REPLAY_S).result()
            time.sleep(COPY_S)
            items = cut_items(self.audio, self.samples, ROWS)
            for future, item in zip(batch, items, strict=True):
                future.set_result(item)
            self.runs.append(time.perf_counter() - started)

    def job(self, folder: Path, index: int) -> None:
        writer = SegmentWriter(folder / f"job{index}.flac", RATE, "flac")
        in_flight: list[Future[np.ndarray]] = []
        try:
            while not self.stop.is_set():
                while len(in_flight) < AHEAD:
                    future: Future[np.ndarray] = Future()
                    in_flight.append(future)
                    self.requests.put(future)
                try:
                    wave = in_flight[0].result(timeout=0.5)
                except TimeoutError:
                    continue
                in_flight.pop(0)
                if self.writes:
                    with self.gate:
                        writer.append(wave, "a segment", 0.3)
        finally:
            writer.close()


def measure(writers: int, batches: int) -> tuple[float, float, float]:
    farm = Farm(writers, batches)
    with tempfile.TemporaryDirectory(prefix="ttsfarm-gil-") as folder:
        jobs = [threading.Thread(target=farm.job, args=(Path(folder), n)) for n in range(JOBS)]
        runners = [threading.Thread(target=farm.runner) for _ in range(RUNNERS)]
        started = time.perf_counter()
        for thread in jobs + runners:
            thread.start()
        for thread in runners:
            thread.join()
        wall = time.perf_counter() - started
        farm.stop.set()
        for _ in range(JOBS * AHEAD):
            farm.requests.put(None)
        for thread in jobs:
            thread.join()
        farm.lane.shutdown()
    runs_ms = [run * 1000 for run in farm.runs[len(farm.runs) // 10 :]]  # past the start
    mean = statistics.fmean(runs_ms)
    return mean, mean - SLEPT_S * 1000, batches / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument(
        "--writers", type=int, nargs="+", default=[-1, 0, 2, 4], help="0: no limit (as now), -1: no writes"
    )
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(
        f"{RUNNERS} runners, batches of {ROWS}, {JOBS} job threads; sleeps {SLEPT_S * 1000:.0f} ms per batch"
    )
    print("| job threads writing at once | run ms | beyond the sleeps, ms | batches/s |")
    print("|---|---|---|---|")
    for _ in range(args.repeats):
        for writers in args.writers:
            run, beyond, rate = measure(writers, args.batches)
            label = {0: "no limit (as now)", -1: "none (segments dropped)"}.get(writers, writers)
            print(f"| {label} | {run:.1f} | {beyond:.1f} | {rate:.1f} |", flush=True)


if __name__ == "__main__":
    main()
