"""Running one farm job: the plain-Python body behind the Celery tasks.

Idempotent: the result is stored beside the output (``<job_id>.json``) after the output; a job
delivered again after it finished (a worker died before acknowledging) returns that result
without synthesizing or writing anything a second time.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import numpy as np

from synthesis.pipeline import Progress, Synthesizer
from ttsfarm.core.errors import BrokerUnavailable, Cancelled, WorkerStopping
from ttsfarm.core.jobs import JobRequest, JobResult, audio_key, result_key
from ttsfarm.farm.registry import JobRegistry
from ttsfarm.storage import Storage

log = logging.getLogger(__name__)
T = TypeVar("T")

PROGRESS_INTERVAL_SECONDS: Final = 0.5
"""Least time between two progress writes of one job, and between two looks for a cancel."""
FINAL_STATE_PATIENCE_SECONDS: Final = 600.0
"""How long a job's final state (succeeded, failed, cancelled) is written again while Redis is
down. Its audio is stored by then: one worker thread waiting is cheaper than a record that says
``running`` for good, or a retry message that cannot be queued either."""
FINAL_STATE_RETRY_MAX_SECONDS: Final = 5.0


class _Throttle:
    """Calls through at most once per interval (and always for the final call)."""

    def __init__(self, interval: float, checked_now: bool = False) -> None:
        self.interval, self._last = interval, time.monotonic() if checked_now else 0.0

    def due(self, final: bool = False) -> bool:
        now = time.monotonic()
        if final or now - self._last >= self.interval:
            self._last = now
            return True
        return False


Work = Callable[[Callable[[Progress], None], Callable[[], bool]], JobResult]
"""A job's work: given a progress callback and the cancel check, it stores its output and
returns the result."""


def run_job(
    request: JobRequest,
    synthesizer: Synthesizer,
    storage: Storage,
    registry: JobRegistry,
    stopping: Callable[[], bool] | None = None,
) -> JobResult:
    """Synthesize ``request`` into storage, keeping the registry up to date (:func:`run_recorded`).
    A streamed request's audio is published as it is made, and its stream closed with how the
    attempt ended (``succeeded``, or ``stopped``: failed, cancelled, or going to be retried)."""
    key = audio_key(request.job_id, request.format)
    job_id = request.job_id

    def publish(samples: np.ndarray) -> None:
        registry.publish_audio(job_id, samples)  # a Redis blip fails the attempt: it is retried

    listener = publish if request.stream else None

    def work(progress: Callable[[Progress], None], cancelled: Callable[[], bool]) -> JobResult:
        return synthesizer.synthesize(request, storage, key, progress, cancelled, listener=listener)

    if not request.stream:
        return run_recorded(job_id, work, storage, registry, stopping)
    try:
        result = run_recorded(job_id, work, storage, registry, stopping)
    except BaseException:
        best_effort(registry.end_audio, job_id, "stopped")
        raise
    best_effort(registry.end_audio, job_id, "succeeded")
    return result


def run_recorded(
    job_id: str,
    work: Work,
    storage: Storage,
    registry: JobRegistry,
    stopping: Callable[[], bool] | None = None,
) -> JobResult:
    """Run a job's ``work``, keeping the registry up to date, and store its result beside its output.

    Raises :class:`Cancelled` when the job was cancelled, :class:`WorkerStopping` (before any
    output is stored) once ``stopping()`` is true, and lets permanent and transient errors
    through for the caller to record or retry.
    """
    recorded = registry.start(job_id)  # the record before: state, attempts, a cancel request
    if recorded.state == "succeeded" and recorded.result is not None:  # start left it so
        log.info("job %s was already done: returning its recorded result", job_id)
        return recorded.result  # delivered again: a late cancel or a storage outage must not undo it
    if recorded.cancel_requested:  # start left it so
        raise Cancelled("the job was cancelled before it started")
    # A job that no worker started before cannot have stored a result: look only otherwise
    # (a redelivery, a retry, or a record lost with Redis), saving a storage read per job.
    first_start = recorded.state == "queued" and recorded.attempts == 0
    finished = None if first_start else storage.get_bytes(result_key(job_id))
    if finished is not None:  # stored, but the worker died before recording it
        result = JobResult.from_dict(json.loads(finished))
        log.info("job %s was already done: returning its stored result", job_id)
        until_recorded(registry.succeeded, job_id, result)
        return result
    progress_throttle = _Throttle(PROGRESS_INTERVAL_SECONDS)
    cancel_throttle = _Throttle(PROGRESS_INTERVAL_SECONDS, checked_now=True)  # just read above
    cancel_seen = False

    def on_progress(progress: Progress) -> None:
        if progress.segments_done == progress.segments_total:
            return  # the success record says it, one write later (a short job writes no progress)
        if progress_throttle.due():
            best_effort(
                registry.progressed,
                job_id,
                progress.segments_done,
                progress.segments_total,
                progress.audio_seconds,
            )

    def cancelled() -> bool:  # one Redis read per half second at most, not one per segment
        nonlocal cancel_seen
        if stopping is not None and stopping():
            raise WorkerStopping("the worker is stopping: the job goes back to the queue")
        if not cancel_seen and cancel_throttle.due():
            cancel_seen = bool(best_effort(registry.cancel_requested, job_id))
        return cancel_seen

    result = work(on_progress, cancelled)
    storage.put_bytes(json.dumps(result.to_dict()).encode(), result_key(job_id), "application/json")
    until_recorded(registry.succeeded, job_id, result)
    return result


def best_effort(write: Callable[..., T], *args: Any) -> T | None:
    """A registry call whose failure must not end the job (progress, a cancel look-up, a
    note before a retry): a Redis blip is logged and the job goes on."""
    try:
        return write(*args)
    except BrokerUnavailable as error:
        log.warning("job registry unreachable (%s): going on without it", error)
        return None


def until_recorded(write: Callable[..., T], *args: Any, patience: float = FINAL_STATE_PATIENCE_SECONDS) -> T:
    """A registry write that must land (a job's final state): while Redis cannot be reached it is
    tried again, backing off up to a few seconds, for at most ``patience`` seconds."""
    deadline = time.monotonic() + patience
    delay = PROGRESS_INTERVAL_SECONDS
    while True:
        try:
            return write(*args)
        except BrokerUnavailable as error:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("job registry unreachable (%s): recording %s again in %.1f s", error, args[0], delay)
            time.sleep(delay)
            delay = min(delay * 2, FINAL_STATE_RETRY_MAX_SECONDS)
