"""Running one farm job: the plain-Python body behind the Celery task.

Idempotent: the result is stored beside the audio (``<job_id>.json``) after the audio; a job
delivered again after it finished (a worker died before acknowledging) returns that result
without synthesizing or writing anything a second time.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Final

from ttsfarm.errors import Cancelled
from ttsfarm.jobs import JobRequest, JobResult, audio_key, result_key
from ttsfarm.registry import JobRegistry
from ttsfarm.storage import Storage
from worker.pipeline import Progress, Synthesizer

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_SECONDS: Final = 0.5
"""Least time between two progress writes of one job."""


class _Throttle:
    """Calls through at most once per interval (and always for the final call)."""

    def __init__(self, interval: float) -> None:
        self.interval, self._last = interval, 0.0

    def due(self, final: bool = False) -> bool:
        now = time.monotonic()
        if final or now - self._last >= self.interval:
            self._last = now
            return True
        return False


def run_job(
    request: JobRequest, synthesizer: Synthesizer, storage: Storage, registry: JobRegistry
) -> JobResult:
    """Synthesize ``request`` into storage, keeping the registry up to date.

    Raises :class:`Cancelled` when the job was cancelled, and lets permanent and transient
    errors through for the caller to record or retry.
    """
    job_id = request.job_id
    if registry.cancel_requested(job_id):
        raise Cancelled("the job was cancelled before it started")
    registry.started(job_id)
    finished = storage.get_bytes(result_key(job_id))
    if finished is not None:
        result = JobResult.from_dict(json.loads(finished))
        log.info("job %s was already done: returning its stored result", job_id)
        registry.succeeded(job_id, result)
        return result
    progress_throttle = _Throttle(PROGRESS_INTERVAL_SECONDS)

    def on_progress(progress: Progress) -> None:
        final = progress.segments_done == progress.segments_total
        if progress_throttle.due(final):
            registry.progressed(
                job_id, progress.segments_done, progress.segments_total, progress.audio_seconds
            )

    def cancelled() -> bool:  # one HGET per segment, and once more before storing
        return registry.cancel_requested(job_id)

    result = synthesizer.synthesize(
        request, storage, audio_key(job_id, request.format), on_progress, cancelled
    )
    storage.put_bytes(json.dumps(result.to_dict()).encode(), result_key(job_id), "application/json")
    registry.succeeded(job_id, result)
    return result
