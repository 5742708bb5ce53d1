"""End-to-end benchmark: many jobs in flight through one synthesizer, text in, encoded audio out."""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ttsfarm.jobs import JobRequest, JobResult, SynthesisOptions
from ttsfarm.storage import LocalStorage
from worker.pipeline import Synthesizer


@dataclass(frozen=True)
class EndToEnd:
    """What a batch of jobs took, wall clock, from the first request to the last stored file."""

    jobs: int
    audio_format: str
    wall_seconds: float
    audio_seconds: float
    """Length of the stored audio, pauses between segments included."""
    speech_seconds: float
    """Length of the synthesized segments alone (what the engine produced)."""
    batches: int
    mean_batch: float
    padding: float
    engine_seconds: float
    """Time the batcher spent inside the engine; the rest of the wall time the GPU waited."""

    @property
    def audio_per_second(self) -> float:
        return self.audio_seconds / self.wall_seconds

    @property
    def speech_per_second(self) -> float:
        return self.speech_seconds / self.wall_seconds


def speech_seconds(result: JobResult) -> float:
    return sum(segment.end - segment.start for segment in result.segments)


def end_to_end(
    synthesizer: Synthesizer, text: str, jobs: int, audio_format: str, options: SynthesisOptions | None = None
) -> EndToEnd:
    """Run ``jobs`` copies of ``text`` at once, each in its own thread, as a worker would."""
    options = options or SynthesisOptions()
    before = synthesizer.batcher.stats
    batches_before, items_before, busy_before = before.batches, before.items, before.busy_seconds
    real_before, padded_before = before.real_ids, before.padded_ids
    with tempfile.TemporaryDirectory(prefix="ttsfarm-bench-") as folder:
        storage = LocalStorage(folder)

        def job(index: int) -> JobResult:
            request = JobRequest(text, options, audio_format)
            return synthesizer.synthesize(request, storage, f"job-{index}.{audio_format}")

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(job, range(jobs)))
        wall = time.perf_counter() - started
    stats = synthesizer.batcher.stats
    batches = stats.batches - batches_before
    padded = stats.padded_ids - padded_before
    return EndToEnd(
        jobs=jobs,
        audio_format=audio_format,
        wall_seconds=wall,
        audio_seconds=sum(result.duration for result in results),
        speech_seconds=sum(speech_seconds(result) for result in results),
        batches=batches,
        mean_batch=(stats.items - items_before) / batches if batches else 0.0,
        padding=1.0 - (stats.real_ids - real_before) / padded if padded else 0.0,
        engine_seconds=stats.busy_seconds - busy_before,
    )
