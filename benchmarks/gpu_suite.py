"""The GPU measurements behind docs/benchmarks.md, every variant in one process and one run.

    python benchmarks/gpu_suite.py engine  --out DIR   # variants, accuracy, sweeps, memory
    python benchmarks/gpu_suite.py system  --out DIR   # end to end, piper --cuda, cold start, profile
    python benchmarks/gpu_suite.py final   --out DIR   # the default engine warmed up, end to end
    python benchmarks/gpu_suite.py reuse   --out DIR   # the same, shorter, after session reuse
    python benchmarks/gpu_suite.py steady  --out DIR   # steady state, host-side variants
    python benchmarks/gpu_suite.py confirm --out DIR   # rounds: full-corpus ceiling vs end to end

``engine`` writes its pick of the fastest variant to a state file that ``system`` reads, so run
them one after the other on the same machine. ``--smoke`` runs a tiny version on the CPU.
Results go to DIR/engine.json and DIR/system.json, section by section, as they complete.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gpu_steady  # this folder, beside this script
import gpu_system
import numpy as np
import onnxruntime as ort

from bench.log_mel import log_mel_distance
from synthesis.engine import Engine, EngineItem, EngineOptions, Scales, filler_ids, gpu_present
from ttsfarm.cli.sweep import (
    corpus_items,
    gpu_memory_mib,
    mixed_batches,
    short_latency,
    sweep,
    time_batches,
)
from ttsfarm.core.voices import resolve_voice

CORPUS = Path(__file__).resolve().parent / "corpus.txt"
STATE = Path("/tmp/ttsfarm-suite-best.json")
EXACT = Scales(0.0, 1.0, 0.0)
SWEEP_SIZES = [1, 2, 4, 8, 16, 32, 64]
NC1D = (("cudnn_conv1d_pad_to_nc1d", "1"),)
HEUR_B = (("cudnn_conv_algo_search", "EXHAUSTIVE"),)
"""With one shape per session, the slower, more thorough cuDNN heuristic (mode B) is paid once."""

VARIANTS: dict[str, dict[str, Any]] = {
    "stock": {"precision": "fp32", "shape_buckets": False},
    "buckets": {"precision": "fp32", "shape_buckets": True},
    "buckets+fp16": {"precision": "fp16", "shape_buckets": True},
    "buckets+fp16+nc1d": {"precision": "fp16", "shape_buckets": True, "cuda_options": NC1D},
    "buckets+fp16+heurB": {"precision": "fp16", "shape_buckets": True, "cuda_options": HEUR_B},
    "buckets+heurB": {"precision": "fp32", "shape_buckets": True, "cuda_options": HEUR_B},
    "buckets+nc1d": {"precision": "fp32", "shape_buckets": True, "cuda_options": NC1D},
}


class Suite:
    """Runs sections against a deadline; each result is saved as soon as it exists."""

    def __init__(self, out: Path, name: str, budget: float) -> None:
        self.path = out / f"{name}.json"
        self.deadline = time.monotonic() + budget
        self.results: dict[str, Any] = {}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def section(self, name: str, needs: float, work: Callable[[], Any]) -> Any:
        if self.left() < needs:
            self.results[name] = {"skipped": f"{self.left():.0f} s left, needs {needs:.0f}"}
            print(f"== {name}: skipped", flush=True)
            self.save()
            return None
        started = time.monotonic()
        print(f"== {name}", flush=True)
        try:
            value = work()
            self.results[name] = {"seconds": time.monotonic() - started, "result": value}
        except Exception as error:
            traceback.print_exc()
            self.results[name] = {"seconds": time.monotonic() - started, "error": repr(error)}
            value = None
        self.save()
        print(json.dumps(self.results[name], default=str)[:1500], flush=True)
        return value

    def save(self) -> None:
        self.path.write_text(json.dumps(self.results, indent=1, default=str), encoding="utf-8")


def options_for(name: str, provider: str) -> EngineOptions:
    return EngineOptions(provider=provider, **VARIANTS[name])  # type: ignore[arg-type]


def environment() -> dict[str, Any]:
    smi = ""
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return {
        "onnxruntime": ort.__version__,
        "providers": ort.get_available_providers(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "gpu": smi.strip(),
        "gpu_mib_before": gpu_memory_mib(),
        "gpu_present": gpu_present(),
    }


def shape_probe(engine: Engine, items: list[EngineItem], runs: int) -> dict[str, Any]:
    """Is a new input shape what costs? Same shape each run, against lengths that change."""
    short = min(items, key=lambda item: len(item.phoneme_ids))
    other = sorted(items, key=lambda item: len(item.phoneme_ids))[len(items) // 2]
    engine.run([short], EXACT)
    same = time_batches(engine, [[short]] * runs, EXACT)
    alternating = time_batches(engine, [[short], [other]] * (runs // 2), EXACT)
    noisy = time_batches(engine, [[short]] * runs, engine.default_scales())
    return {
        "same_shape_p50_ms": same.p50_ms,
        "alternating_p50_ms": alternating.p50_ms,
        "noise_on_p50_ms": noisy.p50_ms,
    }


def run_variant(
    name: str, provider: str, items: list[EngineItem], batches: int, reference: list[EngineItem]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    started = time.perf_counter()
    engine = Engine.load(resolve_voice("joe"), options_for(name, provider))
    load = time.perf_counter() - started
    result: dict[str, Any] = {"load_s": load, "provider": engine.provider, "precision": engine.precision}
    if name == "stock":
        result["shape_probe"] = shape_probe(engine, items, 20)
    probe = short_latency(engine, 30)
    result["short_p50_ms"], result["short_p99_ms"] = probe.p50_ms, probe.p99_ms
    mixed = mixed_batches(items, 8, batches)
    time_batches(engine, mixed, engine.default_scales())  # builds the sessions this mix needs
    timing = time_batches(engine, mixed, engine.default_scales())
    result["b8"] = {
        "audio_per_second": timing.audio_per_second,
        "p50_ms": timing.p50_ms,
        "p99_ms": timing.p99_ms,
        "padding": timing.padding,
    }
    waves = engine.run(reference, EXACT)
    result.update(
        precision_fallbacks=engine.precision_fallbacks,
        sessions=engine.sessions_built,
        session_s=engine.session_seconds,
        overflows=engine.frame_overflows,
        gpu_mib=gpu_memory_mib(),
    )
    del engine
    gc.collect()
    return result, waves


def accuracy(outputs: dict[str, list[np.ndarray]], sample_rate: int) -> dict[str, Any]:
    """Each variant's deterministic audio against the stock session's, item by item."""
    reference = outputs["stock"]
    found: dict[str, Any] = {}
    for name, waves in outputs.items():
        if name == "stock":
            continue
        same_length = all(len(a) == len(b) for a, b in zip(reference, waves, strict=True))
        entry: dict[str, Any] = {"same_lengths": same_length}
        if same_length:
            entry["log_mel_mean"] = float(
                np.mean([log_mel_distance(a, b, sample_rate) for a, b in zip(reference, waves, strict=True)])
            )
            entry["relative_l2_max"] = float(
                max(np.linalg.norm(a - b) / np.linalg.norm(a) for a, b in zip(reference, waves, strict=True))
            )
        found[name] = entry
    return found


def memory_scaling(options: EngineOptions, sizes: list[int], ids: int) -> list[dict[str, Any]]:
    """Latency and GPU memory of full-length batches past the sweep, run whole (no splitting)."""
    engine = Engine.load(resolve_voice("joe"), dataclasses.replace(options, max_batch_frames=1 << 40))
    rows: list[dict[str, Any]] = []
    item = EngineItem(filler_ids(engine.voice, ids))
    for size in sizes:
        try:
            engine.run([item] * size, engine.default_scales())
            timing = time_batches(engine, [[item] * size] * 3, engine.default_scales())
            rows.append(
                {
                    "batch": size,
                    "ids": ids,
                    "frames": engine.last_bucket.frames if engine.last_bucket else None,
                    "p50_ms": timing.p50_ms,
                    "audio_per_second": timing.audio_per_second,
                    "gpu_mib": gpu_memory_mib(),
                }
            )
        except Exception as error:
            rows.append({"batch": size, "ids": ids, "error": str(error)[:300]})
    return rows


def best_sweep(suite: Suite, engine: Engine, items: list[EngineItem], smoke: bool, batches: int) -> None:
    sizes = [1, 2] if smoke else SWEEP_SIZES
    name = "sweep best"
    suite.section(name, 90, lambda: [row.to_dict() for row in sweep(engine, items, sizes, batches)])
    big = [2] if smoke else [96, 128, 160, 192, 256]
    suite.section("memory scaling", 30, lambda: memory_scaling(engine.options, big, 400))


def engine_part(args: argparse.Namespace) -> None:
    suite = Suite(args.out, "engine", args.budget)
    provider = "cpu" if args.smoke else "cuda"
    batches = 2 if args.smoke else 20
    suite.section("environment", 0, environment)
    voice = resolve_voice("joe")
    items = corpus_items(voice, CORPUS.read_text(encoding="utf-8"))
    reference = items[:8]
    outputs: dict[str, list[np.ndarray]] = {}
    scores: dict[str, float] = {}
    names = ["stock", "buckets"] if args.smoke else list(VARIANTS)
    for name in names:

        def one(name: str = name) -> dict[str, Any]:
            result, waves = run_variant(name, provider, items, batches, reference)
            outputs[name] = waves
            scores[name] = result["b8"]["audio_per_second"]
            return result

        suite.section(f"variant {name}", 30, one)
    if "stock" in outputs:
        suite.section("accuracy", 5, lambda: accuracy(outputs, voice.sample_rate))
    best = max(scores, key=lambda name: scores[name]) if scores else "buckets+fp16"
    STATE.write_text(json.dumps({"best": best}), encoding="utf-8")
    suite.results["best"] = best
    best_sweep(suite, Engine.load(voice, options_for(best, provider)), items, args.smoke, batches)
    print("best:", best, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("part", choices=["engine", "system", "final", "reuse", "steady", "confirm"])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    parser.add_argument("--budget", type=float, default=540.0, help="Seconds before sections are skipped.")
    parser.add_argument("--smoke", action="store_true", help="A tiny run on the CPU, to check the script.")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part == "engine":
        engine_part(args)
    elif args.part == "final":
        gpu_system.final_part(args, CORPUS, Suite)
    elif args.part == "confirm":
        gpu_steady.confirm_part(args, CORPUS, Suite)
    elif args.part == "steady":
        gpu_steady.steady_part(args, CORPUS, Suite)
    elif args.part == "reuse":
        gpu_system.final_part(args, CORPUS, Suite, name="reuse")
    else:
        best = json.loads(STATE.read_text())["best"] if STATE.is_file() else "buckets+fp16"
        gpu_system.system_part(args, best, options_for, Suite, CORPUS)


if __name__ == "__main__":
    main()
