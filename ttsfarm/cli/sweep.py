"""``ttsfarm bench``'s batch-size sweep over a realistic mix of segment lengths (the scripts in
``benchmarks/`` use it too).

For each batch size three figures, all from the same engine:

- *mixed*: the corpus's segments in a shuffled (arrival) order, cut into batches of that size and
  run one after the other: latency per batch, audio seconds per second, padding;
- *ceiling*: each batch holds one segment repeated, so nothing is padding (engine only);
- *batcher*: every segment submitted to a real :class:`~synthesis.batcher.Batcher` at once, which
  groups similar lengths; the gap to the ceiling is what batching costs.
"""

from __future__ import annotations

import logging
import random
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np

from synthesis.batcher import DEFAULT_MAX_WAIT, Batcher
from synthesis.engine import EngineItem, Scales
from synthesis.engines import VoiceEngine
from synthesis.phonemes import Phonemizer
from synthesis.text import DEFAULT_MAX_PHONEME_IDS, Segmenter
from ttsfarm.core.voices import Voice

log = logging.getLogger(__name__)

SHUFFLE_SEED: Final = 2024
SHORT_SENTENCE: Final = "Good morning, how are you?"
"""The batch-1 latency probe: a short sentence (about 1.5 s of speech)."""
MEMORY_QUERY: Final = ("nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits")
MS: Final = 1000.0


@dataclass(frozen=True)
class Timing:
    """What one series of batches took."""

    batches: int
    items: int
    audio_seconds: float
    busy_seconds: float
    p50_ms: float
    p99_ms: float
    padding: float
    """Share of the computed phoneme positions that were padding (bucket padding included)."""

    @property
    def audio_per_second(self) -> float:
        return self.audio_seconds / self.busy_seconds if self.busy_seconds else 0.0


@dataclass(frozen=True)
class BatcherTiming:
    """What the batcher did with the same segments."""

    audio_per_second: float
    mean_batch: float
    padding: float


@dataclass(frozen=True)
class SweepRow:
    """One line of the table."""

    batch: int
    mixed: Timing
    ceiling: Timing
    batcher: BatcherTiming
    gpu_mib: float | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["mixed"]["audio_per_second"] = self.mixed.audio_per_second
        data["ceiling"]["audio_per_second"] = self.ceiling.audio_per_second
        return data


def corpus_items(voice: Voice, text: str, max_ids: int = DEFAULT_MAX_PHONEME_IDS) -> list[EngineItem]:
    """The text's segments as the pipeline makes them, in a fixed shuffled order."""
    segmenter = Segmenter(Phonemizer(voice), max_ids)
    items = [EngineItem(segment.phoneme_ids) for segment in segmenter.segments(text)]
    random.Random(SHUFFLE_SEED).shuffle(items)
    return items


def cycle(items: Sequence[EngineItem], count: int) -> list[EngineItem]:
    """``count`` items, going round ``items`` as often as needed."""
    return [items[index % len(items)] for index in range(count)]


def gpu_memory_mib(device_id: int = 0) -> float | None:
    """Memory in use on the GPU (all processes), or None without an NVIDIA driver."""
    if shutil.which(MEMORY_QUERY[0]) is None:
        return None
    try:
        out = subprocess.run([*MEMORY_QUERY, f"--id={device_id}"], capture_output=True, text=True, timeout=10)
        return float(out.stdout.strip().splitlines()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def time_batches(engine: VoiceEngine, batches: Sequence[Sequence[EngineItem]], scales: Scales) -> Timing:
    """Run the batches one after the other; per-batch latency and total throughput."""
    latencies: list[float] = []
    audio = 0
    real = padded = 0
    for batch in batches:
        lengths = [len(item.phoneme_ids) for item in batch]
        rows, width = engine.padded_shape(lengths, scales.length_scale)
        real += sum(lengths)
        padded += rows * width
        started = time.perf_counter()
        waves = engine.run(batch, scales)
        latencies.append(time.perf_counter() - started)
        audio += sum(len(wave) for wave in waves)
    return Timing(
        batches=len(batches),
        items=sum(len(batch) for batch in batches),
        audio_seconds=audio / engine.voice.sample_rate,
        busy_seconds=float(sum(latencies)),
        p50_ms=float(np.percentile(latencies, 50)) * MS,
        p99_ms=float(np.percentile(latencies, 99)) * MS,
        padding=1.0 - real / padded if padded else 0.0,
    )


def mixed_batches(items: Sequence[EngineItem], batch: int, count: int) -> list[list[EngineItem]]:
    pool = cycle(items, batch * count)
    return [pool[start : start + batch] for start in range(0, len(pool), batch)]


def ceiling_batches(items: Sequence[EngineItem], batch: int, count: int) -> list[list[EngineItem]]:
    return [[item] * batch for item in cycle(items, count)]


def concurrent_ceiling(
    engine: VoiceEngine, items: Sequence[EngineItem], batch: int, count: int, threads: int
) -> Timing:
    """The ceiling series split over ``threads`` threads calling the engine at once (as the
    batcher's runners do); throughput is over wall time, latency per batch as each thread saw it."""
    batches = ceiling_batches(items, batch, count)
    shares = [batches[n::threads] for n in range(threads)]
    scales = engine.default_scales()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        timings = list(pool.map(lambda share: time_batches(engine, share, scales), shares))
    wall = time.perf_counter() - started
    return Timing(
        batches=len(batches),
        items=sum(t.items for t in timings),
        audio_seconds=sum(t.audio_seconds for t in timings),
        busy_seconds=wall,
        p50_ms=float(np.median([t.p50_ms for t in timings])),
        p99_ms=max(t.p99_ms for t in timings),
        padding=0.0,
    )


def run_batcher(
    engine: VoiceEngine,
    items: Sequence[EngineItem],
    batch: int,
    scales: Scales,
    max_wait: float = DEFAULT_MAX_WAIT,
) -> BatcherTiming:
    """Submit every item at once to a real batcher over ``engine``; wall-clock throughput."""
    with Batcher(lambda voice: engine, max_batch=batch, max_wait=max_wait) as batcher:
        started = time.perf_counter()
        futures = [batcher.submit(engine.voice, item, scales) for item in items]
        samples = sum(len(future.result().audio) for future in futures)
        wall = time.perf_counter() - started
        stats = batcher.stats
    return BatcherTiming(
        audio_per_second=samples / engine.voice.sample_rate / wall,
        mean_batch=stats.mean_batch_size,
        padding=stats.padding_ratio,
    )


def sweep(
    engine: VoiceEngine,
    items: Sequence[EngineItem],
    batch_sizes: Sequence[int],
    batches_per_size: int,
    scales: Scales | None = None,
    report: Callable[[SweepRow], None] | None = None,
) -> list[SweepRow]:
    """The whole table. Each size is warmed up first (bucket sessions built, kernels planned)."""
    scales = scales or engine.default_scales()
    rows: list[SweepRow] = []
    for batch in batch_sizes:
        engine.prepare([batch])
        mixed = mixed_batches(items, batch, batches_per_size)
        time_batches(engine, mixed[:2], scales)  # warm-up, not counted
        row = SweepRow(
            batch=batch,
            mixed=time_batches(engine, mixed, scales),
            ceiling=time_batches(engine, ceiling_batches(items, batch, batches_per_size), scales),
            batcher=run_batcher(engine, cycle(items, batch * batches_per_size), batch, scales),
            gpu_mib=gpu_memory_mib(engine.options.device_id) if engine.on_gpu else None,
        )
        log.info("batch %d: %.0f audio s/s", batch, row.mixed.audio_per_second)
        rows.append(row)
        if report is not None:
            report(row)
    return rows


def short_latency(engine: VoiceEngine, runs: int, scales: Scales | None = None) -> Timing:
    """Batch-1 latency of :data:`SHORT_SENTENCE` (sessions prepared, after one untimed run)."""
    scales = scales or engine.default_scales()
    item = EngineItem(Phonemizer(engine.voice).ids(SHORT_SENTENCE))
    engine.prepare([1])
    engine.run([item], scales)
    return time_batches(engine, [[item]] * runs, scales)


TABLE_HEADER: Final = (
    "| batch | P50 ms | P99 ms | audio s/s | RTF | GPU MiB | padding "
    "| ceiling audio s/s | batcher audio s/s | batcher padding | batcher mean batch |"
)


def table_line(row: SweepRow) -> str:
    mixed = row.mixed
    rtf = 1.0 / mixed.audio_per_second if mixed.audio_per_second else float("inf")
    memory = f"{row.gpu_mib:.0f}" if row.gpu_mib is not None else "-"
    return (
        f"| {row.batch} | {mixed.p50_ms:.1f} | {mixed.p99_ms:.1f} | {mixed.audio_per_second:.1f} "
        f"| {rtf:.4f} | {memory} | {mixed.padding:.1%} | {row.ceiling.audio_per_second:.1f} "
        f"| {row.batcher.audio_per_second:.1f} | {row.batcher.padding:.1%} | {row.batcher.mean_batch:.2f} |"
    )


def format_table(rows: Sequence[SweepRow]) -> str:
    separator = "|" + "---|" * TABLE_HEADER.count("|")
    separator = separator[: -len("---|")]
    return "\n".join([TABLE_HEADER, separator, *(table_line(row) for row in rows)])
