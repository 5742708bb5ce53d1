"""The system half of the GPU suite: end to end, piper --cuda, cold start, profiles (see gpu_suite.py)."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.end_to_end import end_to_end
from synthesis.batcher import Batcher
from synthesis.engine import Engine, EngineItem, EngineOptions
from synthesis.pipeline import Synthesizer
from ttsfarm.cli.sweep import corpus_items, mixed_batches, short_latency, sweep
from ttsfarm.core.voices import resolve_voice

ROOT = Path(__file__).resolve().parent.parent


def e2e(engine: Engine, text: str, jobs: int, audio_format: str, max_batch: int) -> dict[str, Any]:
    with Batcher(lambda voice: engine, max_batch=max_batch) as batcher:
        synthesizer = Synthesizer(batcher)
        result = end_to_end(synthesizer, [text] * jobs, jobs, audio_format)  # one wave, all at once
    return {
        **dataclasses.asdict(result),
        "max_batch": max_batch,
        "audio_per_second": result.audio_per_second,
        "speech_per_second": result.speech_per_second,
    }


def wav_seconds(path: Path) -> float:
    with wave.open(str(path), "rb") as handle:
        return handle.getnframes() / handle.getframerate()


def piper_in_process(text: str) -> dict[str, Any]:
    from piper import PiperVoice

    voice = resolve_voice("joe")
    started = time.perf_counter()
    piper = PiperVoice.load(voice.model_path, config_path=voice.config_path, use_cuda=True)
    loaded = time.perf_counter()
    samples = sum(len(chunk.audio_int16_array) for chunk in piper.synthesize(text))
    done = time.perf_counter()
    seconds = samples / voice.sample_rate
    return {
        "load_s": loaded - started,
        "synth_s": done - loaded,
        "audio_s": seconds,
        "audio_per_second": seconds / (done - loaded),
        "providers": piper.session.get_providers(),
    }


def piper_cli(corpus: Path) -> dict[str, Any]:
    voice = resolve_voice("joe")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "piper.wav"
        command = [
            sys.executable,
            "-m",
            "piper",
            "-m",
            str(voice.model_path),
            "--cuda",
            "-i",
            str(corpus),
            "-f",
            str(out),
        ]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        seconds = wav_seconds(out) if out.is_file() else 0.0
    return {
        "command": " ".join(
            ["python", "-m", "piper", "-m", "MODEL", "--cuda", "-i", "corpus.txt", "-f", "out.wav"]
        ),
        "wall_s": wall,
        "audio_s": seconds,
        "audio_per_second": seconds / wall,
        "rc": done.returncode,
        "stderr_tail": done.stderr[-400:],
    }


def drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def cold_start(folder: Path, drop: bool, provider: str) -> dict[str, Any]:
    voice = resolve_voice("joe")
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / voice.model_path.name
    shutil.copyfile(voice.model_path, model)
    shutil.copyfile(voice.config_path, model.with_suffix(".onnx.json"))
    dropped = drop_caches() if drop else False
    started = time.perf_counter()
    script = str(ROOT / "benchmarks" / "cold_start.py")
    env = {**os.environ, "TTSFARM_PROVIDER": provider}
    child = subprocess.run(
        [sys.executable, script, str(model)], capture_output=True, text=True, check=False, cwd=ROOT, env=env
    )
    wall = time.perf_counter() - started
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {"stderr_tail": child.stderr[-400:]}
    return {"folder": str(folder), "caches_dropped": dropped, "process_wall_s": wall, **report}


def profile(options: EngineOptions, items: list[EngineItem], label: str) -> dict[str, Any]:
    """Per-operator and per-module host time of batch-8 runs, from onnxruntime's profiler."""
    engine = Engine.load(
        resolve_voice("joe"),
        dataclasses.replace(
            options, profile_prefix=str(Path(tempfile.gettempdir()) / f"ttsfarm-profile-{label}")
        ),
    )
    batches = mixed_batches(items, 8, 4)
    for batch in batches:
        engine.run(batch, engine.default_scales())
    files = engine.end_profiling()
    by_op: Counter[str] = Counter()
    by_module: Counter[str] = Counter()
    runs: list[float] = []
    for file in files:
        for event in json.loads(Path(file).read_text()):
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
                by_op[event["args"].get("op_name", "?")] += event["dur"]
                parts = event["name"][: -len("_kernel_time")].split("/")
                by_module[parts[1] if len(parts) > 2 else "(root)"] += event["dur"]
            elif event.get("cat") == "Session" and event["name"] == "model_run":
                runs.append(event["dur"] / 1000)
        Path(file).unlink()
    del engine
    gc.collect()
    return {
        "runs_ms": runs,
        "by_op_ms": {k: v / 1000 for k, v in by_op.most_common(15)},
        "by_module_ms": {k: v / 1000 for k, v in by_module.most_common(12)},
    }


def cuda_graph_attempt(options: EngineOptions) -> dict[str, Any]:
    graphed = dataclasses.replace(options, cuda_options=(("enable_cuda_graph", "1"),))
    try:
        engine = Engine.load(resolve_voice("joe"), graphed)
        engine.run([EngineItem(engine.voice.phoneme_id_map["^"] * 3)], engine.default_scales())
        return {"ran": True}
    except Exception as error:
        return {"ran": False, "error": str(error)[:600]}


def end_to_end_sections(suite: Any, engine: Engine, text: str, smoke: bool) -> None:
    jobs = 2 if smoke else 32
    suite.section("e2e warm-up", 10, lambda: e2e(engine, text, 2 if smoke else 8, "flac", 8))
    suite.section("e2e flac b8", 30, lambda: e2e(engine, text, jobs, "flac", 8))
    suite.section("e2e mp3 b8", 30, lambda: e2e(engine, text, jobs, "mp3", 8))
    if not smoke:
        suite.section("e2e flac b16", 40, lambda: e2e(engine, text, 64, "flac", 16))
        suite.section("e2e flac b32", 40, lambda: e2e(engine, text, 64, "flac", 32))


def system_part(
    args: argparse.Namespace,
    best: str,
    options_for: Callable[[str, str], EngineOptions],
    suite_type: Any,
    corpus: Path,
) -> None:
    provider = "cpu" if args.smoke else "cuda"
    options = options_for(best, provider)
    suite = suite_type(args.out, "system", args.budget)
    text = corpus.read_text(encoding="utf-8")
    smoke = args.smoke
    suite.results["options"] = repr(options)
    end_to_end_sections(suite, Engine.load(resolve_voice("joe"), options), text, smoke)
    gc.collect()
    if not smoke:
        suite.section("piper in-process cuda", 60, lambda: piper_in_process(text))
        suite.section("piper cli cuda", 60, lambda: piper_cli(corpus))
    shm = Path("/dev/shm/ttsfarm-voices")
    disk = Path(tempfile.gettempdir()) / "ttsfarm-voices"
    for round_ in (1, 2):
        suite.section(f"cold start disk {round_}", 30, lambda: cold_start(disk, not smoke, provider))
        suite.section(f"cold start shm {round_}", 30, lambda: cold_start(shm, not smoke, provider))
    suite.section("cold start disk, warm cache", 30, lambda: cold_start(disk, False, provider))
    items = corpus_items(resolve_voice("joe"), text)
    suite.section("profile stock", 30, lambda: profile(options_for("stock", provider), items, "stock"))
    suite.section("profile best", 30, lambda: profile(options, items, "best"))
    stock = Engine.load(resolve_voice("joe"), options_for("stock", provider))
    sizes = [1, 2] if smoke else [1, 2, 4, 8, 16, 32, 64]
    batches = 2 if smoke else 10
    suite.section("sweep stock", 60, lambda: [row.to_dict() for row in sweep(stock, items, sizes, batches)])
    suite.section("cuda graph", 20, lambda: cuda_graph_attempt(options))


def final_part(args: argparse.Namespace, corpus: Path, suite_type: Any, name: str = "final") -> None:
    """The default engine (what a worker builds) after warm-up: end to end against engine only.

    ``name="reuse"`` (run 4) stops after the batch-8 sections."""
    suite = suite_type(args.out, name, args.budget)
    text = corpus.read_text(encoding="utf-8")
    voice = resolve_voice("joe")
    items = corpus_items(voice, text)
    provider = "cpu" if args.smoke else "cuda"
    started = time.perf_counter()
    engine = Engine.load(voice, EngineOptions(provider=provider))
    suite.results["load_s"] = time.perf_counter() - started
    suite.results["options"] = repr(engine.options)
    suite.section("prepare b8", 10, lambda: {"runs": engine.prepare([8]), **engine_counters(engine)})
    jobs = 2 if args.smoke else 32
    suite.section("e2e flac b8 first pass", 25, lambda: e2e(engine, text, jobs, "flac", 8))
    suite.section("e2e flac b8 steady", 25, lambda: e2e(engine, text, jobs, "flac", 8))
    suite.section("counters after e2e", 0, lambda: engine_counters(engine))
    batches = 2 if args.smoke else 20
    suite.section("engine b8", 15, lambda: [row.to_dict() for row in sweep(engine, items, [8], batches)])
    if name == "final":
        suite.section("short", 5, lambda: dataclasses.asdict(short_latency(engine, 30)))
        suite.section("e2e flac b8 steady again", 30, lambda: e2e(engine, text, jobs, "flac", 8))
        suite.section("e2e mp3 b8 steady", 45, lambda: e2e(engine, text, jobs, "mp3", 8))
        suite.section("e2e flac b32 first pass", 45, lambda: e2e(engine, text, 64, "flac", 32))
        suite.section("e2e flac b32 steady", 45, lambda: e2e(engine, text, 64, "flac", 32))
        suite.section(
            "engine b32", 30, lambda: [row.to_dict() for row in sweep(engine, items, [32], batches)]
        )
    suite.section("counters at end", 0, lambda: engine_counters(engine))


def engine_counters(engine: Engine) -> dict[str, Any]:
    return {
        "sessions": engine.sessions_built,
        "session_s": engine.session_seconds,
        "precision_fallbacks": engine.precision_fallbacks,
        "frame_overflows": engine.frame_overflows,
    }
