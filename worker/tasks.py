"""Celery tasks: thin adapters that decode the message, run the job and return a dict."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery import Task
from celery.exceptions import Ignore, Reject
from kombu.exceptions import OperationalError

from ttsfarm.core.errors import (
    Cancelled,
    EngineOutOfMemory,
    PermanentError,
    TransientError,
    WorkerStopping,
)
from ttsfarm.core.finishing import FinishRequest
from ttsfarm.core.jobs import SUBMITTED_AT, JobRequest, JobResult
from ttsfarm.farm.celeryconf import FINISH_TASK_NAME, MAX_RETRIES, TASK_NAME
from worker.finish import finish_here
from worker.jobs import best_effort, run_job, run_recorded, until_recorded
from worker.storage_gate import StorageDown

if TYPE_CHECKING:
    from celery import Celery

    from worker.resources import WorkerResources

log = logging.getLogger(__name__)


def register_tasks(app: Celery, resources: WorkerResources) -> None:
    """Register the farm's tasks on ``app``; their runs share ``resources``."""

    # ``throws``: Celery logs a permanent error as expected (one INFO line, no traceback), not as a crash.
    @app.task(name=TASK_NAME, bind=True, max_retries=MAX_RETRIES, throws=(PermanentError,))  # type: ignore[untyped-decorator]
    def synthesize(self: Task, message: dict[str, Any]) -> dict[str, Any]:
        def run() -> JobResult:
            request = JobRequest.from_dict(message)
            return run_job(
                request,
                resources.synthesizer,
                resources.storage,
                resources.registry,
                resources.stopping.is_set,
            )

        return serve(self, resources, message, run, counts_audio=True)

    @app.task(name=FINISH_TASK_NAME, bind=True, max_retries=MAX_RETRIES, throws=(PermanentError,))  # type: ignore[untyped-decorator]
    def finish(self: Task, message: dict[str, Any]) -> dict[str, Any]:
        def run() -> JobResult:
            request = FinishRequest.from_dict(message)
            pool = resources.synthesizer.finishing
            if pool is None:
                raise PermanentError("this worker has no finishing processes: it cannot finish chapters")

            def work(_: object, cancelled: Callable[[], bool]) -> JobResult:
                return finish_here(
                    request, pool, resources.storage, resources.locate, cancelled, resources.settings.temp_dir
                )

            return run_recorded(
                request.job_id, work, resources.storage, resources.registry, resources.stopping.is_set
            )

        return serve(self, resources, message, run, counts_audio=False)


def serve(
    task: Task,
    resources: WorkerResources,
    message: dict[str, Any],
    run: Callable[[], JobResult],
    counts_audio: bool,
) -> dict[str, Any]:
    """Run one task's job and record how it ended: the adapter every task shares. A cancelled job
    is ignored; a stopping worker, or one whose storage cannot be written, hands it back; a
    transient error is retried with backoff, and a permanent one fails the job with its message."""
    job_id = str(message.get("job_id") or task.request.id)
    registry = resources.registry
    started, outcome, audio_seconds = time.monotonic(), "failed", 0.0
    if resources.metrics is not None:
        submitted = message.get(SUBMITTED_AT) if task.request.retries == 0 else None
        resources.metrics.job_started(time.time() - submitted if submitted else None)
    try:
        result = resources.gate.guard(run)
        outcome, audio_seconds = "succeeded", result.duration if counts_audio else 0.0
    except Cancelled:
        outcome = "cancelled"
        until_recorded(registry.cancelled, job_id)
        log.info("job %s cancelled", job_id)
        # Ignore sends no event, so monitors (Flower) would show the task started forever:
        # say it ended, as a revoked task, before leaving it.
        try:
            task.send_event("task-revoked", terminated=False, signum=None, expired=False)
        except OperationalError as error:  # the job is recorded as cancelled; only the monitor misses it
            log.warning("job %s: could not tell monitors it was cancelled: %s", job_id, error)
        raise Ignore() from None
    except WorkerStopping as error:  # the stop's grace ran out: another worker runs it from the start
        outcome = "retried"
        best_effort(registry.note_retry, job_id, str(error))
        log.warning("job %s: handed back to the queue (the worker is stopping)", job_id)
        raise Reject(error, requeue=True) from None
    except StorageDown as error:  # this worker takes no jobs until it can store them
        outcome = "retried"
        best_effort(registry.note_retry, job_id, error.public)
        log.warning("job %s: handed back to the queue (%s)", job_id, error)
        raise Reject(error, requeue=True) from None
    except TransientError as error:
        if task.request.retries < MAX_RETRIES:
            best_effort(registry.note_retry, job_id, error.public)  # the retry matters, not the note
            outcome = "retried"
            try:
                raise task.retry(
                    exc=error,
                    countdown=resources.settings.retry_backoff_seconds * 2**task.request.retries,
                ) from None
            except Reject as rejected:  # the retry could not be queued (broker down): Celery would
                # drop this message; it goes back to the queue instead, or comes back after the
                # visibility timeout if even that cannot reach the broker
                log.warning("job %s: its retry could not be queued (%s): handing it back", job_id, error)
                raise Reject(rejected.reason, requeue=True) from None
        until_recorded(registry.failed, job_id, f"{error.public} (gave up after {MAX_RETRIES} retries)")
        raise
    except EngineOutOfMemory as error:  # after halving, single items and splitting: no retry helps
        # (a PermanentError too: caught before the general clause below, for its hint)
        log.warning("job %s failed: out of memory on one segment: %s", job_id, error)
        until_recorded(
            registry.failed,
            job_id,
            "out of memory on one segment even after splitting it: the farm's operator may lower "
            "TTSFARM_MAX_PHONEME_IDS",
        )
        raise
    except PermanentError as error:  # bad input: the job's error says what to change
        log.warning("job %s failed: %s", job_id, error)
        until_recorded(registry.failed, job_id, error.public)
        raise
    except Exception:
        log.exception("job %s failed", job_id)
        until_recorded(
            registry.failed,
            job_id,
            f"internal error in the worker (its log has the details, under job {job_id})",
        )
        raise
    finally:
        if resources.metrics is not None:
            resources.metrics.job_ended(outcome, time.monotonic() - started, audio_seconds)
    # What Celery logs and Flower shows; the full result (with every segment's text and timing)
    # is in the job record and beside the audio.
    return {"job_id": job_id, "location": result.location, "duration": round(result.duration, 3)}
