"""The waveform stage alone (flow and decoder, fp16, a captured CUDA graph) under CUDA provider
variants (layouts), and the front stage alone: where engine v2's time goes on the GPU.

    python benchmarks/waveform_kernels.py --out DIR [--shapes 32x512 32x1024] [--replays 30]

For each variant (extra CUDA provider options: NCHW as the engine runs, NHWC, Conv1D padded
as NC1D) a staged engine is built without warm-up; for
each ``ROWSxFRAMES`` shape its waveform slot is captured, filled with the same random prior,
and replayed --replays times on the graph lane. Printed per variant and shape: ms per replay,
padded audio seconds per second, and the output's relative L2 distance from the first variant's
(the layout must not change the audio; random priors are not real ones: NHWC passed here and
gave NaN on real batches with noise, docs/benchmarks.md run 11). Then the front stage alone, at
batches of corpus segments (``--front-rows``, 32 by default), run by 1 and by 3 threads.
Results go to DIR/waveform_kernels.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from synthesis.engine import EngineOptions, Scales
from synthesis.sessions import NHWC
from synthesis.staged import StagedEngine
from ttsfarm.cli.sweep import corpus_items
from ttsfarm.core.voices import resolve_voice

HERE = Path(__file__).resolve().parent
VARIANTS: dict[str, tuple[tuple[str, str], ...]] = {
    "nchw": (),
    "nhwc": (NHWC,),
    "nc1d": (("cudnn_conv1d_pad_to_nc1d", "1"),),
}
"""Variant name: extra CUDA provider options of the engine's waveform sessions."""
SEED = 11


def replays(engine: StagedEngine, rows: int, frames: int, count: int) -> tuple[list[float], np.ndarray]:
    graphs = engine.waveform
    assert graphs is not None, "the waveform slots need shape buckets"
    graphs.capture(rows, frames)
    slot = graphs.slot(rows, frames)
    rng = np.random.default_rng(SEED)
    for name, buffer in slot.inputs.items():
        shape = buffer.shape()
        value = rng.standard_normal(shape).astype(np.float32) if name != engine.stages.names.mask else None
        buffer.update_inplace(value if value is not None else np.ones(shape, dtype=np.float32))
    times = []
    for _ in range(count):
        started = time.perf_counter()
        graphs.replay(rows, frames)
        times.append(time.perf_counter() - started)
    return times, np.asarray(slot.output.numpy()).reshape(rows, -1)


def front_alone(engine: StagedEngine, rows: int, threads: int, batches: int) -> dict[str, float]:
    """The front of ``rows`` corpus segments of middle length (the 32 from the median up, repeated
    past 32 rows), run ``batches`` times by ``threads`` threads at once: ms per batch and per 32 rows."""
    items = sorted(
        corpus_items(engine.voice, (HERE / "corpus.txt").read_text()), key=lambda i: len(i.phoneme_ids)
    )
    middle = items[len(items) // 2 : len(items) // 2 + 32]
    batch = [middle[row % len(middle)] for row in range(rows)]
    scales = Scales(0.0, 1.0, 0.0)
    engine.front.run(batch, scales)
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: engine.front.run(batch, scales), range(batches)))
    wall = time.perf_counter() - started
    return {
        "rows": rows,
        "threads": threads,
        "ms_per_batch": round(wall / batches * 1000, 2),
        "ms_per_32_rows": round(wall / batches * 1000 * 32 / rows, 2),
        "ids": max(len(i.phoneme_ids) for i in batch),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=["1x128", "1x512", "8x256", "8x512", "16x512", "32x512", "32x1024", "64x768"],
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--replays", type=int, default=30)
    parser.add_argument("--front-rows", type=int, nargs="+", default=[32], help="rows of the front series")
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU (no graphs)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    voice = resolve_voice("joe")
    shapes = [tuple(int(n) for n in shape.split("x")) for shape in args.shapes]
    results: dict[str, Any] = {}
    reference: dict[tuple[int, ...], np.ndarray] = {}
    engine = None
    for variant in args.variants:
        options = EngineOptions(
            provider="cpu" if args.smoke else "cuda",
            warmup=False,
            shape_buckets=True,
            waveform_cuda_options=VARIANTS[variant],  # the front stays NCHW, as in the engine
        )
        engine = StagedEngine(voice, options)
        for rows, frames in shapes:
            try:
                times, audio = replays(engine, rows, frames, args.replays)
            except Exception as error:  # a variant the provider refuses is a result too
                results[f"{variant} {rows}x{frames}"] = {"error": str(error).splitlines()[0][:300]}
                print(variant, rows, frames, "error", error, flush=True)
                continue
            ms = float(np.median(times)) * 1000
            audio_s = rows * frames * voice.hop_length / voice.sample_rate
            base = reference.setdefault((rows, frames), audio)
            distance = float(np.linalg.norm(audio - base) / max(np.linalg.norm(base), 1e-9))
            row = {
                "ms": round(ms, 2),
                "padded_audio_per_s": round(audio_s / ms * 1000, 1),
                "rel_l2": round(distance, 5),
                "fp32": engine.waveform.slot(rows, frames).fp32,
            }
            results[f"{variant} {rows}x{frames}"] = row
            print(f"{variant:>10} {rows:>3}x{frames:<5} {row}", flush=True)
        (args.out / "waveform_kernels.json").write_text(json.dumps(results, indent=1))
    if engine is not None:
        for rows in args.front_rows:
            for threads in (1, 3):
                name = f"front b{rows} t{threads}"
                results[name] = front_alone(engine, rows, threads, 2 if args.smoke else max(20, 1920 // rows))
                print(name, results[name], flush=True)
    (args.out / "waveform_kernels.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
