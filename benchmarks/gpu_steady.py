"""The steady-state part of the GPU suite (``gpu_suite.py steady``): end to end against the
engine-only ceiling, one engine, the host-side options switched on one at a time.

Every end-to-end pass runs ``JOBS`` jobs, ``IN_FLIGHT`` at a time, each the corpus rotated to
start at another paragraph (``bench/end_to_end.py``), through a batcher with the GPU defaults
of ``synthesis/build.py``. The variants differ only in the host side: runner threads, engine runs
at once, and where text is segmented (job threads, or a pool of processes).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
from pathlib import Path
from typing import Any

from gpu_system import engine_counters  # this folder, beside this script

from bench.end_to_end import end_to_end, rotated_texts
from synthesis.batcher import Batcher
from synthesis.build import GPU_MAX_PADDED_IDS
from synthesis.engine import Engine, EngineOptions
from synthesis.frontend import TextFrontend
from synthesis.pipeline import Synthesizer
from ttsfarm.cli.sweep import concurrent_ceiling, corpus_items, short_latency, sweep
from ttsfarm.core.voices import resolve_voice

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
"""The GPU defaults of ``synthesis/build.py`` (runs 5 and 6 had 2 runners and 2 runs at once)."""
CONFIRM_RUNS = (3, 4)
"""Runs at once compared by ``confirm`` (run 6 compared 1, 2 and 3)."""
CONFIRM_JOBS = 128
CEILING_PASSES = 3
"""``confirm`` runs every corpus segment this many times per ceiling figure."""


class RunLimited:
    """The engine seen through at most ``runs`` runs at once: the passes vary what a worker sets
    once (``EngineOptions.concurrent_runs``), on one engine and its built sessions."""

    def __init__(self, engine: Engine, runs: int) -> None:
        self.engine = engine
        self._slots = threading.BoundedSemaphore(max(runs, 1))

    def speak(self, items: Any, scales: Any) -> Any:
        with self._slots:
            return self.engine.speak(items, scales)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


MOST_RUNS = max(DEFAULT.runs, *CONFIRM_RUNS)


class Bench:
    """One engine, the corpus and the text front ends, shared by every pass of a part."""

    def __init__(self, args: argparse.Namespace, corpus: Path, suite_type: Any, name: str, jobs: int) -> None:
        smoke = args.smoke
        text = corpus.read_text(encoding="utf-8")[: 1500 if smoke else None]
        voice = resolve_voice("joe")
        self.suite = suite_type(args.out, name, args.budget)
        self.items = corpus_items(voice, text)
        self.texts = rotated_texts(text, 4 if smoke else jobs)
        self.sizes = [1, 2] if smoke else [8, 32]
        options = EngineOptions(provider="cpu" if smoke else "cuda", concurrent_runs=MOST_RUNS)
        self.engine = engine = Engine.load(voice, options)
        self.suite.results.update(options=repr(engine.options), jobs=len(self.texts), in_flight=IN_FLIGHT)
        self.suite.section(
            "prepare", 10, lambda: {"runs": engine.prepare(self.sizes), **engine_counters(engine)}
        )
        self.in_thread = TextFrontend()
        self.pool = TextFrontend(processes=2 if smoke else DEFAULT.text_processes)
        self.pool.start()

    def close(self) -> None:
        self.suite.section("counters", 0, lambda: engine_counters(self.engine))
        self.pool.close()

    def e2e(self, host: HostSide, batch: int, texts: list[str], audio_format: str = "flac") -> dict[str, Any]:
        default_interval = sys.getswitchinterval()
        if host.switch_interval:
            sys.setswitchinterval(host.switch_interval)
        frontend = self.pool if host.text_processes else self.in_thread
        try:
            with Batcher(
                lambda voice: RunLimited(self.engine, host.runs),
                max_batch=batch,
                max_padded_ids=GPU_MAX_PADDED_IDS,
                max_padding_ratio=1.0,
                runners=host.runners,
            ) as batcher:
                result = end_to_end(Synthesizer(batcher, frontend), texts, IN_FLIGHT, audio_format)
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

    def ceiling(self, batch: int, count: int, runs: int) -> dict[str, Any]:
        """Identical-length batches from ``runs`` threads at once (``bench.sweep``)."""
        timing = concurrent_ceiling(RunLimited(self.engine, runs), self.items, batch, count, runs)
        return {**dataclasses.asdict(timing), "audio_per_second": timing.audio_per_second}


def steady_part(args: argparse.Namespace, corpus: Path, suite_type: Any) -> None:
    bench = Bench(args, corpus, suite_type, "steady", JOBS)
    suite, engine, texts = bench.suite, bench.engine, bench.texts
    small, large = bench.sizes
    count = 2 if args.smoke else 20
    suite.section(
        "engine sweep", 30, lambda: [row.to_dict() for row in sweep(engine, bench.items, bench.sizes, count)]
    )
    for batch in bench.sizes:
        suite.section(f"ceiling b{batch}, 2 threads", 10, lambda b=batch: bench.ceiling(b, count, runs=2))
    suite.section("e2e warm-up", 20, lambda: bench.e2e(DEFAULT, large, texts[:8]))
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
        suite.section(f"e2e b{batch}: {host.label}", 40, lambda h=host, b=batch: bench.e2e(h, b, texts))
    half = texts[: len(texts) // 2]
    suite.section(f"e2e b{large} mp3: {DEFAULT.label}", 60, lambda: bench.e2e(DEFAULT, large, half, "mp3"))
    suite.section("short", 5, lambda: dataclasses.asdict(short_latency(engine, 30)))
    bench.close()


def confirm_part(args: argparse.Namespace, corpus: Path, suite_type: Any) -> None:
    """Rounds of the full-corpus ceiling (every segment as identical-length batches, several
    runs at once) against end to end with as many runners and runs, at batch 8 and 32."""
    bench = Bench(args, corpus, suite_type, "confirm", CONFIRM_JOBS)
    suite, texts = bench.suite, bench.texts
    for batch in bench.sizes:  # warm-up: the sessions and plans every pass below needs
        bench.ceiling(batch, len(bench.items), runs=2)
    suite.section("e2e warm-up", 20, lambda: bench.e2e(DEFAULT, bench.sizes[-1], texts[:8]))
    count = len(bench.items) * (1 if args.smoke else CEILING_PASSES)
    for round_ in range(1, 3):
        for batch in bench.sizes:
            for runs in CONFIRM_RUNS:
                suite.section(
                    f"round {round_} ceiling b{batch}, {runs} at once",
                    15,
                    lambda b=batch, r=runs: bench.ceiling(b, count, r),
                )
                host = HostSide(runners=runs, runs=runs, text_processes=DEFAULT.text_processes)
                suite.section(
                    f"round {round_} e2e b{batch}: {host.label}",
                    30,
                    lambda h=host, b=batch: bench.e2e(h, b, texts),
                )
    bench.close()
