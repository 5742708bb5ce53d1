"""End-to-end benchmark: many jobs in flight through one synthesizer, text in, encoded audio out.

Jobs run as a worker runs them: ``in_flight`` at a time, the next one starting as soon as one
finishes, each with its own text (the corpus rotated to start at another paragraph, so jobs
do not move in step). Running more jobs than are in flight at once makes the figure a steady
state rather than one wave that starts and ends together.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from synthesis.pipeline import Synthesizer
from ttsfarm.core.breaks import split_paragraphs
from ttsfarm.core.jobs import JobRequest, JobResult, SynthesisOptions
from ttsfarm.storage import LocalStorage


@dataclass(frozen=True)
class EndToEnd:
    """What a run of jobs took, wall clock, from the first request to the last stored file."""

    jobs: int
    in_flight: int
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
    """Wall time during which at least one engine run was in progress."""

    @property
    def audio_per_second(self) -> float:
        return self.audio_seconds / self.wall_seconds

    @property
    def speech_per_second(self) -> float:
        return self.speech_seconds / self.wall_seconds


def speech_seconds(result: JobResult) -> float:
    return sum(segment.end - segment.start for segment in result.segments)


def rotated_texts(text: str, jobs: int) -> list[str]:
    """``jobs`` texts of the same length: ``text`` starting at successive paragraphs."""
    paragraphs = [p for p in split_paragraphs(text.strip()) if p.strip()]
    return [
        "\n\n".join(paragraphs[n % len(paragraphs) :] + paragraphs[: n % len(paragraphs)])
        for n in range(jobs)
    ]


def end_to_end(
    synthesizer: Synthesizer,
    texts: list[str],
    in_flight: int,
    audio_format: str,
    options: SynthesisOptions | None = None,
) -> EndToEnd:
    """Run one job per text, ``in_flight`` at a time, each in its own thread as a worker would."""
    options = options or SynthesisOptions()
    before = synthesizer.batcher.stats
    batches_before, items_before, busy_before = before.batches, before.items, before.busy_seconds
    real_before, padded_before = before.real_ids, before.padded_ids
    with tempfile.TemporaryDirectory(prefix="ttsfarm-bench-") as folder:
        storage = LocalStorage(folder)

        def job(index: int) -> JobResult:
            request = JobRequest(texts[index], options, audio_format)
            return synthesizer.synthesize(request, storage, f"job-{index}.{audio_format}")

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=in_flight) as pool:
            results = list(pool.map(job, range(len(texts))))
        wall = time.perf_counter() - started
    stats = synthesizer.batcher.stats
    batches = stats.batches - batches_before
    padded = stats.padded_ids - padded_before
    return EndToEnd(
        jobs=len(texts),
        in_flight=in_flight,
        audio_format=audio_format,
        wall_seconds=wall,
        audio_seconds=sum(result.duration for result in results),
        speech_seconds=sum(speech_seconds(result) for result in results),
        batches=batches,
        mean_batch=(stats.items - items_before) / batches if batches else 0.0,
        padding=1.0 - (stats.real_ids - real_before) / padded if padded else 0.0,
        engine_seconds=stats.busy_seconds - busy_before,
    )
