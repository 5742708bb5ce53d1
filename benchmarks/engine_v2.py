"""Engine v2 (staged, CUDA graphs) or the single-session engine (v1), one engine per process.

    python benchmarks/engine_v2.py --engine v2 --out DIR [--budget 420] [--sizes 8 32 64]
    python benchmarks/engine_v2.py --engine v1 --out DIR     # the single-session engine
    python benchmarks/engine_v2.py --compare DIR/engine_v1.json DIR/engine_v2.json
    python benchmarks/engine_v2.py --engine v2 --out DIR2 --layout nhwc   # TTSFARM_CUDA_LAYOUT=nhwc
    python benchmarks/engine_v2.py --engine v2 --out DIR --smoke      # tiny, on the CPU
    python benchmarks/engine_v2.py --engine v2 --out DIR --name exported --exported-positions

Each engine runs in its own process (their GPU arenas cannot be shared: ``synthesis.sessions``);
run the two one after the other on the same machine and compare. Sections, each saved to
DIR/engine_ENGINE.json as soon as it is done:

- ``load``: the engine's load and ``prepare`` (sessions built, graphs captured) for the sizes;
- ``accuracy``: with noise off, every corpus segment in batches of 32 against the fp32
  single-session engine with the same padded shapes, on the voice's graph as exported: item
  lengths must be identical, and the log-mel distance is reported (docs/benchmarks.md holds
  fp16 to at most 0.015); and every segment alone against the reference, with how many
  one-row buckets fell back to fp32;
- ``concurrency bN``: with noise off, corpus batches run by 3 threads at once, five times,
  against the same batches run one at a time: every item's length must be the same, with no
  errors (a check that the stages do not overwrite each other's buffers);
- ``engine bN tT``: speech audio seconds per second, engine only, at batch N: corpus segments
  grouped by length as the batcher groups them, batches in shuffled order, run by T threads at
  once (3, as a GPU worker's runners, and 1); P50/P99 batch latency; for v2 also the time spent
  in each stage;
- ``quality``: the texts of ``benchmarks/quality_texts.txt`` spoken by the engine (voice
  defaults, noise on), written as WAV files into DIR/quality-ENGINE.tar for
  ``benchmarks/quality.py``;
- ``in-process e2e``: jobs through the worker's own pipeline (batcher, text processes, FLAC), no
  Celery or Redis, 32 and 64 in flight.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tarfile
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnxruntime as ort
import soundfile as sf

from bench.end_to_end import end_to_end, rotated_texts
from bench.log_mel import log_mel_distance
from synthesis.batcher import Batcher
from synthesis.build import CUDA_LAYOUTS
from synthesis.engine import Engine, EngineItem, EngineOptions, Scales
from synthesis.engines import VoiceEngine
from synthesis.frontend import TextFrontend
from synthesis.phonemes import Phonemizer
from synthesis.pipeline import Synthesizer
from synthesis.staged import StagedEngine
from ttsfarm.cli.sweep import corpus_items, gpu_memory_mib
from ttsfarm.core.voices import resolve_voice

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus.txt"
QUALITY_TEXTS = HERE / "quality_texts.txt"
EXACT = Scales(0.0, 1.0, 0.0)
SEED = 7
THREADS = 3


class Results:
    def __init__(self, path: Path, budget: float) -> None:
        self.path, self.deadline, self.data = path, time.monotonic() + budget, {}  # type: ignore[var-annotated]

    def section(self, name: str, work: Callable[[], Any]) -> Any:
        if time.monotonic() > self.deadline:
            self.data[name] = {"skipped": "out of time"}
            return None
        print(f"== {name}", flush=True)
        started = time.monotonic()
        try:
            value = work()
            self.data[name] = {"seconds": round(time.monotonic() - started, 2), "result": value}
        except Exception as error:
            traceback.print_exc()
            self.data[name] = {"seconds": round(time.monotonic() - started, 2), "error": repr(error)}
            value = None
        self.path.write_text(json.dumps(self.data, indent=1, default=str))
        print(json.dumps(self.data[name], default=str)[:3000], flush=True)
        return value


def grouped_batches(items: Sequence[EngineItem], size: int, copies: int) -> list[list[EngineItem]]:
    """Items sorted by length and cut into batches (as the batcher groups them), shuffled."""
    pool = sorted([*items] * copies, key=lambda item: len(item.phoneme_ids))
    batches = [pool[start : start + size] for start in range(0, len(pool), size)]
    random.Random(SEED).shuffle(batches)
    return batches


def throughput(engine: VoiceEngine, batches: list[list[EngineItem]], threads: int) -> dict[str, Any]:
    scales = engine.default_scales()
    latencies: list[float] = []
    samples = 0

    def one(batch: list[EngineItem]) -> int:
        started = time.perf_counter()
        waves = engine.run(batch, scales)
        latencies.append(time.perf_counter() - started)
        return sum(len(wave) for wave in waves)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        samples = sum(pool.map(one, batches))
    wall = time.perf_counter() - started
    audio = samples / engine.voice.sample_rate
    return {
        "batches": len(batches),
        "audio_s": round(audio, 1),
        "wall_s": round(wall, 3),
        "audio_per_s": round(audio / wall, 1),
        "p50_ms": round(float(np.percentile(latencies, 50)) * 1000, 1),
        "p99_ms": round(float(np.percentile(latencies, 99)) * 1000, 1),
    }


def accuracy(
    engines: dict[str, VoiceEngine], reference: VoiceEngine, items: list[EngineItem]
) -> dict[str, Any]:
    batches = [items[start : start + 32] for start in range(0, len(items), 32)]
    truth = [wave for batch in batches for wave in reference.run(batch, EXACT)]
    rate = reference.voice.sample_rate
    found: dict[str, Any] = {}
    for name, engine in engines.items():
        waves = [wave for batch in batches for wave in engine.run(batch, EXACT)]
        same = sum(len(a) == len(b) for a, b in zip(waves, truth, strict=True))
        distances = [
            log_mel_distance(b, a, rate) for a, b in zip(waves, truth, strict=True) if len(a) == len(b)
        ]
        fallbacks = engine.precision_fallbacks
        alone = [engine.run([item], EXACT)[0] for item in items]  # one row: where fp16 may have no plan
        pairs = zip(alone, truth, strict=True)
        alone_distances = [log_mel_distance(b, a, rate) for a, b in pairs if len(a) == len(b)]
        found[name] = {
            "items": len(items),
            "same_length": same,
            "log_mel_mean": round(float(np.mean(distances)), 5),
            "log_mel_max": round(float(np.max(distances)), 5),
            "alone_same_length": sum(len(a) == len(b) for a, b in zip(alone, truth, strict=True)),
            "alone_log_mel_max": round(max(alone_distances), 5),
            "alone_fp32_fallbacks": engine.precision_fallbacks - fallbacks,
        }
    return found


def concurrency(engine: VoiceEngine, batches: list[list[EngineItem]], passes: int) -> dict[str, Any]:
    """With the noise off, the same batches run by 3 threads at once must give every item the
    length they give one at a time: stages that overwrite each other's buffers show up here
    (as wrong lengths, or durations that are not numbers)."""
    alone = [[len(wave) for wave in engine.run(batch, EXACT)] for batch in batches]
    errors: list[str] = []

    def lengths(batch: list[EngineItem]) -> list[int] | None:
        try:
            return [len(wave) for wave in engine.run(batch, EXACT)]
        except Exception as error:  # what a wrong buffer makes of the durations, counted
            errors.append(repr(error)[:120])
            return None

    mismatched = 0
    for _ in range(passes):
        with ThreadPoolExecutor(THREADS) as pool:
            together = list(pool.map(lengths, batches))
        mismatched += sum(a != b for a, b in zip(alone, together, strict=True))
    runs = passes * len(batches)
    return {"batches": runs, "mismatched": mismatched, "errors": len(errors), "first_errors": errors[:3]}


def quality(engines: dict[str, VoiceEngine], out: Path, smoke: bool) -> dict[str, Any]:
    texts = [line.strip() for line in QUALITY_TEXTS.read_text().splitlines() if line.strip()]
    texts = texts[:3] if smoke else texts
    voice = next(iter(engines.values())).voice
    phonemizer = Phonemizer(voice)
    found: dict[str, Any] = {}
    with tarfile.open(out / f"quality-{next(iter(engines))}.tar", "w") as tar:
        for name, engine in engines.items():
            items = [EngineItem(phonemizer.ids(text)) for text in texts]
            waves = engine.run(items, engine.default_scales())
            for index, wave in enumerate(waves):
                buffer = io.BytesIO()
                sf.write(buffer, wave, voice.sample_rate, format="WAV", subtype="PCM_16")
                info = tarfile.TarInfo(f"{name}/{index:04d}.wav")
                info.size = buffer.tell()
                buffer.seek(0)
                tar.addfile(info, buffer)
            found[name] = {"texts": len(texts), "seconds": round(sum(map(len, waves)) / voice.sample_rate, 1)}
    return found


def in_process(engine: VoiceEngine, jobs: int, in_flight: int, runners: int) -> dict[str, Any]:
    """Jobs through the worker's own pipeline in this process (no Celery, no Redis), FLAC."""
    with (
        Batcher(lambda voice: engine, max_batch=32, runners=runners, max_padded_ids=16_384) as batcher,
        TextFrontend(processes=runners + 1) as frontend,
    ):
        synthesizer = Synthesizer(batcher, frontend)
        result = end_to_end(synthesizer, rotated_texts(CORPUS.read_text(), jobs), in_flight, "flac")
    return {
        "jobs": jobs,
        "audio_per_s": round(result.audio_per_second, 1),
        "speech_per_s": round(result.speech_per_second, 1),
        "mean_batch": round(result.mean_batch, 2),
        "engine_busy": round(result.engine_seconds / result.wall_seconds, 3),
    }


def compare(paths: list[Path]) -> None:
    """Print the engine series of several result files side by side."""
    found = {path.stem: json.loads(path.read_text()) for path in paths}
    print("| series | " + " | ".join(f"{name} audio s/s | P50 / P99 ms" for name in found) + " |")
    print("|---|" + "---|---|" * len(found))
    series = sorted({key for data in found.values() for key in data if key.startswith("engine ")})
    for key in sorted(series, key=lambda k: (int(k.split()[1][1:]), k)):
        cells = []
        for data in found.values():
            result = data.get(key, {}).get("result") or {}
            cells += [str(result.get("audio_per_s")), f"{result.get('p50_ms')} / {result.get('p99_ms')}"]
        print(f"| {key[7:]} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--engine", choices=["v1", "v2"], default="v2")
    parser.add_argument("--budget", type=float, default=420.0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--copies", type=int, default=12, help="corpus copies per engine series")
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[THREADS, 1],
        help="threads running batches at once, one series each (the engine allows the most of them)",
    )
    parser.add_argument("--jobs", type=int, default=160, help="jobs of the in-process end to end")
    parser.add_argument(
        "--layout",
        choices=list(CUDA_LAYOUTS),
        default="nchw",
        help="the waveform layout (TTSFARM_CUDA_LAYOUT's nchw or nhwc; auto is the worker's choice)",
    )
    parser.add_argument(
        "--cuda-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an onnxruntime CUDA provider option for the waveform sessions (repeatable; experiments)",
    )
    parser.add_argument(
        "--exported-positions",
        action="store_true",
        help="the text encoder's relative positions as the voice exports them (before the gathers)",
    )
    parser.add_argument("--name", default="", help="suffix of the result file, for variants of one engine")
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU")
    parser.add_argument("--compare", type=Path, nargs="+", help="print these result files side by side")
    args = parser.parse_args()
    if args.compare:
        compare(args.compare)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    label = f"{args.engine}-{args.name}" if args.name else args.engine
    if min(args.threads) < 1:
        parser.error("--threads takes counts of 1 or more")
    if any("=" not in option for option in args.cuda_option):
        parser.error("--cuda-option takes KEY=VALUE")
    extra_cuda = tuple((key, value) for key, _, value in (o.partition("=") for o in args.cuda_option))
    results = Results(args.out / f"engine_{label}.json", args.budget)
    provider = "cpu" if args.smoke else "cuda"
    voice = resolve_voice("joe")
    items = corpus_items(voice, CORPUS.read_text())
    if args.smoke:
        items, args.sizes, args.copies = items[:6], [2], 1
    results.section("environment", lambda: {"onnxruntime": ort.__version__, "gpu_mib": gpu_memory_mib()})
    engines: dict[str, VoiceEngine] = {}
    options = EngineOptions(
        provider=provider,
        concurrent_runs=max(args.threads),
        waveform_cuda_options=(*CUDA_LAYOUTS[args.layout], *extra_cuda),
        gathered_positions=not args.exported_positions,
    )
    kind = StagedEngine if args.engine == "v2" else Engine

    def load() -> dict[str, Any]:
        started = time.perf_counter()
        engine = engines[label] = kind(voice, options)
        loaded = time.perf_counter() - started
        prepared = engine.prepare(args.sizes)
        return {
            "load_s": round(loaded, 2),
            "prepare_s": round(time.perf_counter() - started - loaded, 2),
            "prepared": prepared,
            "provider": engine.provider,
            "sessions": engine.sessions_built,
            "session_s": round(engine.session_seconds, 2),
            "capture_s": round(getattr(engine, "capture_seconds", 0.0), 2),
            "precision_fallbacks": engine.precision_fallbacks,
            "gpu_mib": gpu_memory_mib(),
        }

    results.section("load", load)
    exact = EngineOptions(provider=provider, precision="fp32", shape_buckets=True, gathered_positions=False)
    results.section("accuracy", lambda: accuracy(engines, Engine.load(voice, exact), items))
    engine = engines[label]
    for size in args.sizes:
        batches = grouped_batches(items, size, 2)
        results.section(f"concurrency b{size}", partial(concurrency, engine, batches, 2 if args.smoke else 5))
    for size in args.sizes:
        for threads in args.threads:
            batches = grouped_batches(items, size, args.copies)
            before = engine.stage_totals()
            results.section(f"engine b{size} t{threads}", partial(throughput, engine, batches, threads))
            if before:  # each series' own time in each stage
                results.data[f"engine b{size} t{threads}"]["stage_seconds"] = {
                    name: round(seconds - before[name], 3) for name, seconds in engine.stage_totals().items()
                }
    results.section("quality", lambda: quality(engines, args.out, args.smoke))
    jobs = 4 if args.smoke else args.jobs
    for in_flight in (2,) if args.smoke else (32, 64):
        run = partial(in_process, engine, jobs, in_flight, 1 if args.smoke else THREADS)
        results.section(f"in-process e2e {in_flight} in flight", run)
    results.section("after", lambda: {"gpu_mib": gpu_memory_mib()})


if __name__ == "__main__":
    main()
