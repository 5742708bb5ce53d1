"""Which GPU kernels a stage of the staged engine spends its time in, at one batch of corpus
segments: the front (text encoder and duration predictor) or the waveform (expand, the replay of
the flow and decoder in fp16 NHWC as a captured CUDA graph, and the copy of the audio to host
memory); the kernels' and copies' own times, from CUDA's profiler.

    python benchmarks/stage_kernels.py --out DIR [--stage front] [--rows 32] [--runs 20] [--engine-batches 30]
    python benchmarks/stage_kernels.py --out DIR --stage waveform --engine-batches 0

Needs PyTorch with CUDA beside onnxruntime-gpu (not a dependency of ttsfarm): its profiler
(Kineto, through CUPTI) records every kernel the process launches, onnxruntime's included.
Prints the kernels by total GPU time and the stage's GPU time per run against its wall time;
writes DIR/stage_kernels-STAGE[-NAME].json (NAME: --name, for variants).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthesis.engine import EngineItem, EngineOptions, Scales
from synthesis.sessions import NHWC
from synthesis.staged import StagedEngine
from ttsfarm.cli.sweep import corpus_items
from ttsfarm.core.voices import Voice, resolve_voice

HERE = Path(__file__).resolve().parent
EXACT = Scales(0.0, 1.0, 0.0)
TOP = 30
THREADS = 3


def profiled(work: Callable[[], object]) -> tuple[float, list[Any]]:
    """Wall seconds of ``work`` and the CUDA kernels it ran, from PyTorch's profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        started = time.perf_counter()
        work()
        wall = time.perf_counter() - started
    return wall, [event for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA]


def busy_us(kernels: list[Any]) -> float:
    """The union of the kernels' intervals: microseconds the GPU ran at least one kernel."""
    busy, end = 0.0, float("-inf")
    for start, stop in sorted((event.time_range.start, event.time_range.end) for event in kernels):
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return busy


def whole_engine(
    voice: Voice, items: list[EngineItem], batches: int, variant: EngineOptions
) -> dict[str, float]:
    """The engine as a GPU worker runs it (NHWC waveform, 3 threads, batches of 32 grouped by
    length): how much of the wall time the GPU was busy."""
    engine = StagedEngine(voice, replace(variant, concurrent_runs=THREADS, warmup=True))
    engine.prepare([32])
    pool = [items[index % len(items)] for index in range(32 * batches)]
    pool.sort(key=lambda item: len(item.phoneme_ids))
    grouped = [pool[start : start + 32] for start in range(0, len(pool), 32)]
    with ThreadPoolExecutor(THREADS) as threads:
        list(threads.map(lambda batch: engine.run(batch, EXACT), grouped))  # warm every bucket
        wall, kernels = profiled(lambda: list(threads.map(lambda batch: engine.run(batch, EXACT), grouped)))
    busy = busy_us(kernels) / 1e6
    return {
        "batches": len(grouped),
        "wall_s": round(wall, 3),
        "gpu_busy_s": round(busy, 3),
        "gpu_busy_share": round(busy / wall, 3),
        "kernel_s": round(sum(event.time_range.elapsed_us() for event in kernels) / 1e6, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--engine-batches", type=int, default=30, help="0: the front only")
    parser.add_argument("--stage", choices=["front", "waveform"], default="front")
    parser.add_argument("--exported-positions", action="store_true", help="relative positions as exported")
    parser.add_argument("--name", default="", help="suffix of the result file, for variants")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        parser.error("this benchmark needs PyTorch (with CUDA) for its profiler")
    torch.cuda.init()
    args.out.mkdir(parents=True, exist_ok=True)
    voice = resolve_voice("joe")
    variant = EngineOptions(
        provider="cuda",
        warmup=False,
        shape_buckets=True,
        waveform_cuda_options=(NHWC,),
        gathered_positions=not args.exported_positions,
    )
    engine = StagedEngine(voice, variant)
    items = sorted(corpus_items(voice, (HERE / "corpus.txt").read_text()), key=lambda i: len(i.phoneme_ids))
    middle = items[len(items) // 2 : len(items) // 2 + 32]
    batch = [middle[row % len(middle)] for row in range(args.rows)]
    front = engine.front.run(batch, EXACT)
    planned = engine.plan(front, len(batch))
    if planned is None:
        parser.error(f"{args.rows} rows need more frames than one run may take")

    def stage() -> None:
        if args.stage == "front":
            engine.front.run(batch, EXACT)
        else:
            engine.release(engine.waveform_audio(front, planned[0], 0.0))  # as the engine's own runs

    for _ in range(5):
        stage()
    wall, kernels = profiled(lambda: [stage() for _ in range(args.runs)])
    by_name: dict[str, list[float]] = {}
    for event in kernels:
        by_name.setdefault(event.name, []).append(event.time_range.elapsed_us())
    total = sum(sum(times) for times in by_name.values())
    table = sorted(by_name.items(), key=lambda pair: -sum(pair[1]))
    result: dict[str, Any] = {
        "stage": args.stage,
        "rows": args.rows,
        "ids": max(len(item.phoneme_ids) for item in batch),
        "frames": planned[0].frames,
        "runs": args.runs,
        "wall_ms_per_run": round(wall / args.runs * 1000, 2),
        "gpu_busy_ms_per_run": round(busy_us(kernels) / args.runs / 1000, 2),
        "kernel_ms_per_run": round(total / args.runs / 1000, 2),
        "gpu_events_per_run": round(len(kernels) / args.runs, 1),  # kernels, copies, memsets
        "top": [
            {
                "kernel": name[:160],
                "ms_per_run": round(sum(times) / args.runs / 1000, 3),
                "calls_per_run": round(len(times) / args.runs, 1),
                "share": round(sum(times) / total, 3),
            }
            for name, times in table[:TOP]
        ],
    }
    if args.engine_batches:
        result["engine"] = whole_engine(voice, items, args.engine_batches, variant)
    name = f"stage_kernels-{args.stage}{'-' + args.name if args.name else ''}.json"
    (args.out / name).write_text(json.dumps(result, indent=1))
    print({key: value for key, value in result.items() if key != "top"}, flush=True)
    for row in result["top"]:
        share = f"{row['share']:6.1%}"
        print(f"{row['ms_per_run']:8.3f} ms {row['calls_per_run']:7.1f} calls {share}  {row['kernel']}")


if __name__ == "__main__":
    main()
