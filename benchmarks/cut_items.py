"""Cutting a batch's audio into its items beside busy Python threads: the mechanism behind a
GPU worker's slow cut (docs/benchmarks.md, run 39), not a model of its size.

A worker's batch runner shares the interpreter lock with 40-odd threads (jobs, Celery). A numpy
copy of a few hundred kilobytes lets go of the lock and then waits its turn to take it back.
This times a batch of 32 rows of 4.5 s (22,050 Hz; items of 2.2 to 4.5 s) cut three ways: one
numpy copy per item (the engines until run 39), one numpy copy of the batch with the items as
views of it, and ``synthesis.engine.cut_items`` (one ``bytearray`` copy per item, which keeps
the lock), beside 0, 8 and 32 threads that never block, each running small numpy steps and
Python (heavier than a worker's job threads, which mostly wait).

    .venv/bin/python benchmarks/cut_items.py [--threads 0 8 32] [--repeats 20]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthesis.engine import cut_items

ROWS = 32
ROW_SAMPLES = 98_304  # 4.5 s: 384 frames of 256 samples


def copy_each(audio: np.ndarray, samples: np.ndarray, count: int) -> list[np.ndarray]:
    """The way before run 39: one numpy copy per item."""
    return [audio[row, : samples[row]].copy() for row in range(count)]


def copy_batch(audio: np.ndarray, samples: np.ndarray, count: int) -> list[np.ndarray]:
    """One numpy copy of the batch, the items views of it (each keeps the whole copy alive)."""
    batch = np.array(audio[:count, : int(samples[:count].max())])
    return [batch[row, : samples[row]] for row in range(count)]


WAYS = {
    "one numpy copy per item": copy_each,
    "one numpy copy, items as views": copy_batch,
    "cut_items": cut_items,
}


def job_thread(stop: threading.Event) -> None:
    """Small numpy steps with Python between them, as a job thread's segment handling."""
    wave = np.ones(2_000, dtype=np.float32)
    while not stop.is_set():
        np.clip(wave, -0.5, 0.5)
        sum(range(200))


def timed(
    cut: Callable[[np.ndarray, np.ndarray, int], list[np.ndarray]],
    audio: np.ndarray,
    samples: np.ndarray,
    repeats: int,
) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        cut(audio, samples, ROWS)
    return (time.perf_counter() - started) / repeats * 1000


def _both(times: list[float]) -> str:
    return " and ".join(f"{ms:.1f}" for ms in times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[0, 8, 32])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    audio = rng.standard_normal((ROWS, ROW_SAMPLES)).astype(np.float32)
    samples = rng.integers(ROW_SAMPLES // 2, ROW_SAMPLES, ROWS)
    expected = copy_each(audio, samples, ROWS)
    for cut in WAYS.values():  # every way gives the same audio
        assert all(np.array_equal(a, b) for a, b in zip(cut(audio, samples, ROWS), expected, strict=True))
    print(f"| busy threads | {' | '.join(f'{name}, ms per batch' for name in WAYS)} |")
    print("|---|" + "---|" * len(WAYS))
    for threads in args.threads:
        stop = threading.Event()
        busy = [threading.Thread(target=job_thread, args=(stop,), daemon=True) for _ in range(threads)]
        for thread in busy:
            thread.start()
        time.sleep(0.2)
        times = {
            name: [timed(cut, audio, samples, args.repeats) for _ in range(2)] for name, cut in WAYS.items()
        }
        stop.set()
        for thread in busy:
            thread.join()
        print(f"| {threads} | {' | '.join(_both(ms) for ms in times.values())} |")


if __name__ == "__main__":
    main()
