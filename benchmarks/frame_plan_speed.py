"""What a batcher runner spends on a batch's frame plan: the host-built plan the staged engine
used before 2026-12-01 (each frame's phoneme index and the frame mask, in whole-array numpy steps)
against what is left on the host now (the durations' row sums, for the frame bucket; the index
and mask are computed inside the expand stage, ``synthesis.stages``). The expand stage's plan
is checked against the host-built one first, and timed last, on the CPU (and on CUDA where
this machine has it).

    python benchmarks/frame_plan_speed.py [--rows 32] [--ids 160] [--runs 2000] [--busy 1 8]

Durations are drawn like a voice's (0 to 5 frames per phoneme id, about 2.3 on average); the
frame count is the smallest bucket that holds the longest row. Prints microseconds per plan
(the mean of the runs: a wait for the GIL is rare but long), alone and beside threads that keep
the GIL busy: each plan runs in a batcher runner of a worker, where 32 job threads want the GIL
too. A numpy step on a large array lets go of the GIL and then waits to win it back. Threads
that never block are a stress model: the sizes show the mechanism, not a worker's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnx
import onnxruntime as ort
from onnx.utils import Extractor

from synthesis.frame_plan import Plan, frame_bucket
from synthesis.sessions import wants_cuda
from synthesis.stages import EXPAND_DURATIONS, EXPAND_FRAMES, PLAN_INDEX, PLAN_MASK, split_voice
from ttsfarm.core.voices import resolve_voice


def host_built(durations: np.ndarray, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """The plan as the host built it before 2026-12-01."""
    rows, width = durations.shape
    spoken = np.arange(frames) < durations.sum(axis=1)[:, None]
    index = np.repeat(np.arange(0, rows * width, width, dtype=np.int64)[:, None], frames, axis=1)
    index[spoken] = np.repeat(np.arange(rows * width, dtype=np.int64), durations.ravel())
    return index, spoken[:, None, :].astype(np.float32)


def host_part(durations: np.ndarray, frames: int) -> Plan:
    """What the host does now (``StagedEngine._frame_plan``): the bucket from the row sums."""
    return Plan(durations, frame_bucket(max(int(durations.sum(axis=1).max()), 1)))


PlanWay = Callable[[np.ndarray, int], object]


def mean_us(plan: PlanWay, durations: np.ndarray, frames: int, runs: int) -> float:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        plan(durations, frames)
        seconds.append(time.perf_counter() - started)
    return statistics.fmean(seconds) * 1e6


def busy_python(stop: threading.Event) -> None:
    """Pure Python work that holds the GIL until told to stop (as job threads do)."""
    while not stop.is_set():
        sum(range(1000))


def beside_busy(threads: int, work: Callable[[], float]) -> float:
    stop = threading.Event()
    others = [threading.Thread(target=busy_python, args=(stop,)) for _ in range(threads)]
    for other in others:
        other.start()
    try:
        return work()
    finally:
        stop.set()
        for other in others:
            other.join()


def expand_plan_sessions() -> dict[str, ort.InferenceSession]:
    """The expand stage's plan (joe's graph, cut down to the durations in and the index and mask
    out) as a session per provider this machine has: CPU, and CUDA where there is one."""
    expand = split_voice(onnx.load(str(resolve_voice("joe").model_path))).expand
    plan = Extractor(onnx.shape_inference.infer_shapes(expand)).extract_model(
        [EXPAND_DURATIONS, EXPAND_FRAMES], [PLAN_INDEX, PLAN_MASK]
    )
    providers = ["CPUExecutionProvider", *(["CUDAExecutionProvider"] if wants_cuda("auto") else [])]
    model = plan.SerializeToString()
    return {provider: ort.InferenceSession(model, providers=[provider]) for provider in providers}


def run_plan(session: ort.InferenceSession, durations: np.ndarray, frames: int) -> list[np.ndarray]:
    feeds = {EXPAND_DURATIONS: durations, EXPAND_FRAMES: np.array(frames, dtype=np.int64)}
    computed: list[np.ndarray] = session.run([PLAN_INDEX, PLAN_MASK], feeds)
    return computed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--ids", type=int, default=160)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--busy", type=int, nargs="+", default=[1, 8], help="GIL-bound threads beside")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    durations = rng.choice(np.arange(6), size=(args.rows, args.ids), p=[0.05, 0.2, 0.3, 0.25, 0.15, 0.05])
    frames = frame_bucket(int(durations.sum(axis=1).max()))
    sessions = expand_plan_sessions()
    expected = host_built(durations, frames)
    for session in sessions.values():  # the expand stage's plan is the host-built one
        for got, wanted in zip(run_plan(session, durations, frames), expected, strict=True):
            np.testing.assert_array_equal(got, wanted)
    print(f"{args.rows} rows x {args.ids} ids, {frames} frames; mean of {args.runs} runs alone")
    print("(a tenth of them beside busy threads); the expand stage's plan equals the host-built one")
    print("| plan on the host | alone, us | " + " | ".join(f"beside {n} busy, us" for n in args.busy) + " |")
    print("|---|---|" + "---|" * len(args.busy))
    ways: tuple[tuple[str, PlanWay], ...] = (
        ("index and mask (before)", host_built),
        ("row sums and bucket (now)", host_part),
    )
    for name, plan in ways:
        alone = mean_us(plan, durations, frames, args.runs)
        timed = partial(mean_us, plan, durations, frames, max(args.runs // 10, 20))
        contended = [beside_busy(n, timed) for n in args.busy]
        print(f"| {name} | {alone:.0f} | " + " | ".join(f"{us:.0f}" for us in contended) + " |")
    for provider, session in sessions.items():  # a session run: the GIL is free while it runs
        graph_us = mean_us(partial(run_plan, session), durations, frames, max(args.runs // 10, 20))
        print(f"the expand stage's plan on {provider}, alone: {graph_us:.0f} us (part of expand's run)")


if __name__ == "__main__":
    main()
