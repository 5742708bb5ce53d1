"""The steady-state part of the GPU suite (``gpu_suite.py steady``): end to end against the
engine-only ceiling, one engine, the host-side options switched on one at a time.

Every end-to-end pass runs ``JOBS`` jobs, ``IN_FLIGHT`` at a time, each the corpus rotated to
start at another paragraph (``worker/bench_e2e.py``), through a batcher with the GPU defaults
of ``worker/local.py``. The variants differ only in the host side: runner threads, engine runs
at once, and where text is segmented (job threads, or a pool of processes).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from ttsfarm.voices import resolve_voice
from worker.batcher import Batcher
from worker.bench import concurrent_ceiling, corpus_items, short_latency, sweep
from worker.bench_e2e import end_to_end, rotated_texts
from worker.engine import Engine, EngineOptions
from worker.frontend import TextFrontend
from worker.local import GPU_MAX_PADDED_IDS
from worker.pipeline import Synthesizer

IN_FLIGHT = 32
JOBS = 64


@dataclasses.dataclass(frozen=True)
class HostSide:
    """One end-to-end variant: how the host feeds the engine."""

    runners: int
    runs: int
    text_processes: int
    switch_interval: float | None = None
    """``sys.setswitchinterval`` for the pass (None: Python's default, 5 ms)."""

    @property
    def label(self) -> str:
        text = f"text in {self.text_processes} processes" if self.text_processes else "text in job threads"
        extra = f", switch {self.switch_interval * 1000:g} ms" if self.switch_interval else ""
        return f"{self.runners} runner(s), {self.runs} run(s) at once, {text}{extra}"


BEFORE = HostSide(runners=1, runs=1, text_processes=0)
"""The pipeline as it was: one batching thread, text segmented in the job threads."""
DEFAULT = HostSide(runners=3, runs=3, text_processes=4)
"""The GPU defaults of ``worker/local.py`` (runs 5 and 6 had 2 runners and 2 runs at once)."""
CONFIRM_RUNS = (3, 4)
"""Runs at once compared by ``confirm`` (run 6 compared 1, 2 and 3)."""
CONFIRM_JOBS = 128
CEILING_PASSES = 3
"""``confirm`` runs every corpus segment this many times per ceiling figure."""


def e2e(
    engine: Engine,
    frontends: dict[int, TextFrontend],
    host: HostSide,
    batch: int,
    texts: list[str],
    audio_format: str = "flac",
) -> dict[str, Any]:
    engine.limit_runs(host.runs)
    default_interval = sys.getswitchinterval()
    if host.switch_interval:
        sys.setswitchinterval(host.switch_interval)
    try:
        with Batcher(
            lambda voice: engine,
            max_batch=batch,
            max_padded_ids=GPU_MAX_PADDED_IDS,
            max_padding_ratio=1.0,
            runners=host.runners,
        ) as batcher:
            result = end_to_end(
                Synthesizer(batcher, frontends[host.text_processes]), texts, IN_FLIGHT, audio_format
            )
    finally:
        sys.setswitchinterval(default_interval)
    return {
        **dataclasses.asdict(result),
        "variant": host.label,
        "max_batch": batch,
        "audio_per_second": result.audio_per_second,
        "speech_per_second": result.speech_per_second,
        "engine_busy_share": result.engine_seconds / result.wall_seconds,
    }


def ceiling(engine: Engine, items: list[Any], batch: int, count: int, threads: int = 2) -> dict[str, Any]:
    timing = concurrent_ceiling(engine, items, batch, count, threads)
    return {**dataclasses.asdict(timing), "audio_per_second": timing.audio_per_second}


def steady_part(args: argparse.Namespace, corpus: Path, suite_type: Any) -> None:
    suite = suite_type(args.out, "steady", args.budget)
    smoke = args.smoke
    text = corpus.read_text(encoding="utf-8")
    voice = resolve_voice("joe")
    items = corpus_items(voice, text)
    texts = rotated_texts(text[:1500] if smoke else text, 4 if smoke else JOBS)
    sizes = [1, 2] if smoke else [8, 32]
    started = time.perf_counter()
    engine = Engine(voice, EngineOptions(provider="cpu" if smoke else "cuda"))
    suite.results["load_s"] = time.perf_counter() - started
    suite.results["options"] = repr(engine.options)
    suite.results["jobs"], suite.results["in_flight"] = len(texts), IN_FLIGHT
    suite.section("prepare", 10, lambda: {"runs": engine.prepare(sizes), "sessions": engine.sessions_built})
    frontends = {0: TextFrontend(), 4: TextFrontend(processes=2 if smoke else 4)}
    frontends[4].start()
    small, large = sizes
    count = 2 if smoke else 20
    suite.section("engine sweep", 30, lambda: [row.to_dict() for row in sweep(engine, items, sizes, count)])
    engine.limit_runs(2)
    for batch in sizes:
        suite.section(f"ceiling b{batch}, 2 threads", 10, lambda b=batch: ceiling(engine, items, b, count))
    suite.section("e2e warm-up", 20, lambda: e2e(engine, frontends, DEFAULT, large, texts[:8]))
    passes = [
        (DEFAULT, large),
        (BEFORE, large),
        (DEFAULT, small),
        (BEFORE, small),
        (HostSide(2, 1, 4), large),
        (HostSide(1, 1, 4), large),
        (dataclasses.replace(DEFAULT, switch_interval=0.001), large),
    ]
    for host, batch in passes:
        suite.section(
            f"e2e b{batch}: {host.label}", 40, lambda h=host, b=batch: e2e(engine, frontends, h, b, texts)
        )
    suite.section(
        f"e2e b{large} mp3: {DEFAULT.label}",
        60,
        lambda: e2e(engine, frontends, DEFAULT, large, texts[: len(texts) // 2], "mp3"),
    )
    engine.limit_runs(1)
    suite.section("short", 5, lambda: dataclasses.asdict(short_latency(engine, 30)))
    counters = {
        "sessions": "sessions_built",
        "overflows": "frame_overflows",
        "fallbacks": "precision_fallbacks",
    }
    suite.section("counters", 0, lambda: {name: getattr(engine, field) for name, field in counters.items()})
    for frontend in frontends.values():
        frontend.close()


def confirm_part(args: argparse.Namespace, corpus: Path, suite_type: Any) -> None:
    """Rounds of the full-corpus ceiling (every segment as identical-length batches, several
    runs at once) against end to end with as many runners and runs, at batch 8 and 32."""
    suite = suite_type(args.out, "confirm", args.budget)
    smoke = args.smoke
    text = corpus.read_text(encoding="utf-8")
    voice = resolve_voice("joe")
    items = corpus_items(voice, text[:1500] if smoke else text)
    texts = rotated_texts(text[:1500] if smoke else text, 4 if smoke else CONFIRM_JOBS)
    sizes = [1, 2] if smoke else [8, 32]
    engine = Engine(voice, EngineOptions(provider="cpu" if smoke else "cuda"))
    suite.section("prepare", 10, lambda: {"runs": engine.prepare(sizes), "sessions": engine.sessions_built})
    frontends = {4: TextFrontend(processes=2 if smoke else 4)}
    frontends[4].start()
    for batch in sizes:  # warm-up: the sessions and plans every pass below needs
        engine.limit_runs(2)
        ceiling(engine, items, batch, len(items), threads=2)
    suite.section("e2e warm-up", 20, lambda: e2e(engine, frontends, DEFAULT, sizes[-1], texts[:8]))
    count = len(items) * (1 if smoke else CEILING_PASSES)
    for round_ in range(1, 3):
        for batch in sizes:
            for runs in CONFIRM_RUNS:
                engine.limit_runs(runs)
                suite.section(
                    f"round {round_} ceiling b{batch}, {runs} at once",
                    15,
                    lambda b=batch, t=runs: ceiling(engine, items, b, count, t),
                )
                host = HostSide(runners=runs, runs=runs, text_processes=4)
                suite.section(
                    f"round {round_} e2e b{batch}: {host.label}",
                    30,
                    lambda h=host, b=batch: e2e(engine, frontends, h, b, texts),
                )
    frontends[4].close()
