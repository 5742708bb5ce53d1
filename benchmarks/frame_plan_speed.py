"""The frame plan, built in whole-array steps (``synthesis.frame_plan.frame_plan``) against the
loop over rows the staged engine used before run 31; both checked equal first.

    python benchmarks/frame_plan_speed.py [--rows 32] [--ids 160] [--runs 2000]

Durations are drawn like a voice's (0 to 5 frames per phoneme id, about 2.3 on average); the
frame count is the smallest bucket that holds the longest row. Prints microseconds per plan
(median of the runs), alone and while another thread keeps the GIL busy: each plan runs in a
batcher runner of a worker, where 32 job threads want the GIL too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from synthesis.frame_plan import Plan, frame_bucket, frame_plan


def loop_plan(durations: np.ndarray, frames: int) -> Plan:
    """The plan as the engine built it before run 31: one row at a time."""
    rows, width = durations.shape
    index = np.empty((rows, frames), dtype=np.int64)
    mask = np.zeros((rows, 1, frames), dtype=np.float32)
    for row in range(rows):
        spoken = np.repeat(np.arange(width, dtype=np.int64), durations[row])
        index[row, : len(spoken)] = spoken + row * width
        index[row, len(spoken) :] = row * width
        mask[row, 0, : len(spoken)] = 1.0
    return index, mask


PlanMaker = Callable[[np.ndarray, int], Plan]


def median_us(plan: PlanMaker, durations: np.ndarray, frames: int, runs: int) -> float:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        plan(durations, frames)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds) * 1e6


def busy_python(stop: threading.Event) -> None:
    """Pure Python work that holds the GIL until told to stop (as job threads do)."""
    while not stop.is_set():
        sum(range(1000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--ids", type=int, default=160)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    durations = rng.choice(np.arange(6), size=(args.rows, args.ids), p=[0.05, 0.2, 0.3, 0.25, 0.15, 0.05])
    frames = frame_bucket(int(durations.sum(axis=1).max()))
    for got, wanted in zip(frame_plan(durations, frames), loop_plan(durations, frames), strict=True):
        np.testing.assert_array_equal(got, wanted)
    print(f"{args.rows} rows x {args.ids} ids, {frames} frames; median of {args.runs} runs")
    print("| plan | alone, us | beside a GIL-bound thread, us |")
    print("|---|---|---|")
    for name, plan in (("loop over rows", loop_plan), ("whole arrays", frame_plan)):
        alone = median_us(plan, durations, frames, args.runs)
        stop = threading.Event()
        other = threading.Thread(target=busy_python, args=(stop,))
        other.start()
        try:
            contended = median_us(plan, durations, frames, max(args.runs // 10, 20))
        finally:
            stop.set()
            other.join()
        print(f"| {name} | {alone:.0f} | {contended:.0f} |")


if __name__ == "__main__":
    main()
