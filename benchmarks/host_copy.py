"""How fast a waveform slot's audio reaches host memory, by the way it is copied.

    python benchmarks/host_copy.py --out DIR [--rows 32] [--frames 768] [--runs 30]

One CUDA buffer of ``rows x frames x 256`` float samples (the shape of a slot's audio), copied
to host memory ``--runs`` times each way:

- ``numpy``: ``OrtValue.numpy()`` (the GIL held for the whole copy);
- ``bound-fresh``: the engine's copier session (``synthesis.stages.copy_model``), its output
  bound to a new numpy array each time (what the engine did before runs 30-31);
- ``bound-reused``: the same, into one array allocated once;
- ``bound-pinned``: into an array lent by the engine's page-locked pool
  (``synthesis.host_buffers``, what ``StagedEngine._to_host`` does), so the GPU writes it directly;
- ``trim``: the per-item copies ``StagedEngine.run`` makes out of the host buffer (rows of
  75% of the frames on average), for scale.

Prints milliseconds per copy (P50, and the mean) and GB/s; writes DIR/host_copy.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnxruntime as ort

from synthesis.host_buffers import HostBuffers
from synthesis.stages import COPY_INPUT, COPY_OUTPUT, copy_model

HOP = 256


def timed(copy: Callable[[], object], runs: int) -> list[float]:
    copy()
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        copy()
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--frames", type=int, default=768)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ort.preload_dlls()
    shape = [args.rows, 1, 1, args.frames * HOP]
    device = ort.OrtValue.ortvalue_from_numpy(
        np.random.default_rng(0).standard_normal(shape, dtype=np.float32), "cuda", 0
    )
    copier = ort.InferenceSession(copy_model().SerializeToString(), providers=["CUDAExecutionProvider"])

    def bound(host: np.ndarray) -> np.ndarray:
        binding = copier.io_binding()
        binding.bind_ortvalue_input(COPY_INPUT, device)
        binding.bind_output(COPY_OUTPUT, "cpu", 0, np.float32, shape, host.ctypes.data)
        copier.run_with_iobinding(binding)
        return host

    reused = np.empty(shape, dtype=np.float32)
    buffers = HostBuffers(0)
    pinned = buffers.take(shape)
    ways: dict[str, Callable[[], object]] = {
        "numpy": device.numpy,
        "bound-fresh": lambda: bound(np.empty(shape, dtype=np.float32)),
        "bound-reused": lambda: bound(reused),
    }
    if buffers.pinned:
        ways["bound-pinned"] = lambda: bound(pinned)
    else:
        print("host memory could not be page-locked (the log says why): no pinned variant")
    lengths = (np.linspace(0.5, 1.0, args.rows) * args.frames * HOP).astype(int)
    flat = reused.reshape(args.rows, -1)
    ways["trim"] = lambda: [flat[row, : lengths[row]].copy() for row in range(args.rows)]
    expected = device.numpy()
    for name in ("bound-fresh", "bound-reused", "bound-pinned"):
        if name in ways and not np.array_equal(np.asarray(ways[name]()), expected):
            raise SystemExit(f"{name}: the copy differs from OrtValue.numpy()")
    results = {}
    megabytes = reused.nbytes / 1e6
    print(f"{args.rows} x {args.frames} frames: {megabytes:.1f} MB per copy, {args.runs} runs each")
    print("| way | P50 ms | mean ms | GB/s at P50 |")
    print("|---|---|---|---|")
    for name, copy in ways.items():
        seconds = timed(copy, args.runs)
        p50, mean = statistics.median(seconds), statistics.fmean(seconds)
        results[name] = {"p50_ms": round(p50 * 1e3, 3), "mean_ms": round(mean * 1e3, 3)}
        print(f"| {name} | {p50 * 1e3:.2f} | {mean * 1e3:.2f} | {megabytes / 1e3 / p50:.1f} |")
    buffers.give(pinned)
    buffers.close()
    report = {"rows": args.rows, "frames": args.frames, "mb": round(megabytes, 1), "ways": results}
    (args.out / "host_copy.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
