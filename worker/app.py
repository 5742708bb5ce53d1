"""The worker's Celery app: ``celery -A worker.app worker --pool threads -c 16``.

Settings come from the environment and ``configs/`` at import. The synthesizer (model,
batcher) is built once per worker process when the worker starts, so the first job is warm.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

from celery.concurrency import get_implementation
from celery.exceptions import Reject
from celery.signals import (
    task_postrun,
    task_received,
    worker_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)
from celery.worker.control import inspect_command

from synthesis.build import build_synthesizer
from synthesis.pipeline import Synthesizer
from synthesis.scratch import sweep
from ttsfarm.farm.celeryconf import make_celery, queued_jobs
from ttsfarm.farm.registry import JobRegistry
from ttsfarm.settings import NO_BROKER_MESSAGE, PROBE_TIMEOUT_SECONDS, Settings
from ttsfarm.storage import Storage, open_storage
from worker.health import EngineHealth
from worker.leases import Leases
from worker.metrics import WorkerMetrics, start_metrics

log = logging.getLogger(__name__)

settings = Settings.load()
if not settings.farm_mode:
    # Imported by `celery -A worker.app ...` (worker, flower, inspect): one line, not Celery's
    # traceback of a failed app import.
    raise SystemExit(f"ttsfarm: {NO_BROKER_MESSAGE}")
if settings.prewarm is None:
    settings = replace(settings, prewarm=True)  # a farm worker builds its GPU sessions before jobs come
app = make_celery(settings)
app.conf.include = ["worker.tasks"]


class WorkerResources:
    """What every task in this process shares: the synthesizer, the storage, the registry."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._synthesizer: Synthesizer | None = None
        self._storage: Storage | None = None
        self._registry: JobRegistry | None = None
        self._leases: Leases | None = None
        self.stopping = threading.Event()
        """Set once a stop's grace ran out: running jobs go back to the queue."""
        self.health: EngineHealth | None = None
        self.metrics: WorkerMetrics | None = None
        """Set once the synthesizer is built, unless ``metrics_port`` is 0."""

    @property
    def synthesizer(self) -> Synthesizer:
        with self._lock:
            if self._synthesizer is None:
                sweep(self.settings.temp_dir)  # temp files of workers that were killed
                self._synthesizer = build_synthesizer(self.settings)
                self._synthesizer.frontend.start()
                engine = self._synthesizer.batcher.engine(self._synthesizer.voice(self.settings.voice))
                batcher = self._synthesizer.batcher
                log.info(
                    "engine ready: voice %s on %s (device %d), %s, %s; batches of up to %d, %d runners, "
                    "%d text processes (warm-up %.2f s)",
                    engine.voice.name,
                    engine.provider,
                    engine.options.device_id,
                    engine.precision,
                    type(engine).__name__,
                    batcher.max_batch,
                    batcher.runners,
                    self._synthesizer.frontend.processes,
                    engine.warmup_seconds,
                )
                self.health = EngineHealth(self._synthesizer, self.settings.voice)
                self.metrics = start_metrics(
                    self._synthesizer,
                    self.settings.metrics_port,
                    self.settings.metrics_address,
                    self.settings.gpu,
                    self._queue_length,
                )
            return self._synthesizer

    @property
    def storage(self) -> Storage:
        with self._lock:
            if self._storage is None:
                self._storage = open_storage(self.settings, create_bucket=True)
            return self._storage

    def _queue_length(self) -> int:
        return queued_jobs(app, self.settings.queue)

    def close(self) -> None:
        """Finish the engine runs in progress and stop the engine's threads and text processes:
        a process that exits mid-run aborts in onnxruntime's destructors."""
        with self._lock:
            synthesizer, self._synthesizer = self._synthesizer, None
        if synthesizer is not None:
            synthesizer.close()

    def stop_after(self, grace: float) -> None:
        """Running jobs get ``grace`` seconds to finish; then they are handed back to the queue."""
        log.warning(
            "stopping: no new jobs; running jobs have %.0f s to finish (TTSFARM_STOP_GRACE_SECONDS), "
            "then go back to the queue",
            grace,
        )
        timer = threading.Timer(grace, self.stopping.set)
        timer.daemon = True
        timer.start()

    @property
    def leases(self) -> Leases:
        with self._lock:
            if self._leases is None:
                self._leases = Leases(
                    self.settings.broker_url or "",
                    self.settings.visibility_timeout_seconds,
                    self.settings.redis_tls(),
                )
            return self._leases

    @property
    def registry(self) -> JobRegistry:
        with self._lock:
            if self._registry is None:
                self._registry = JobRegistry(self.settings.backend_url or "", self.settings.redis_tls())
            return self._registry


resources = WorkerResources(settings)


@inspect_command()  # type: ignore[untyped-decorator]
def ttsfarm_stats(state: Any) -> dict[str, Any]:
    """``celery inspect ttsfarm_stats``: what this worker's batcher has done."""
    synthesizer = resources.synthesizer
    stats = synthesizer.batcher.stats
    engines = synthesizer.batcher.engines
    return {
        "provider": next(iter(engines.values())).provider if engines else None,
        "max_batch": synthesizer.batcher.max_batch,
        "runners": synthesizer.batcher.runners,
        "text_processes": synthesizer.frontend.processes,
        "batches": stats.batches,
        "items": stats.items,
        "mean_batch_size": round(stats.mean_batch_size, 3),
        "padding_ratio": round(stats.padding_ratio, 4),
        "busy_seconds": round(stats.busy_seconds, 3),
    }


@inspect_command(args=[("timeout", float)])  # type: ignore[untyped-decorator]
def ttsfarm_health(state: Any, timeout: float = PROBE_TIMEOUT_SECONDS) -> dict[str, Any]:
    """``ttsfarm-healthcheck worker NAME``: ok if the engine ran a batch lately or runs one now."""
    resources.synthesizer  # noqa: B018 - built (and with it the health probe) if it was not yet
    assert resources.health is not None
    return resources.health.check(timeout)


@worker_init.connect  # type: ignore[untyped-decorator]
def _check_pool(sender: Any = None, **_: Any) -> None:
    """One engine, its batches and its metrics live in one process: jobs must run as its threads."""
    pool = get_implementation(getattr(sender, "pool_cls", "threads")).__module__
    if not pool.endswith((".thread", ".solo")):
        log.error(
            "this worker runs jobs in a %s pool: ttsfarm workers need --pool threads (as `ttsfarm worker` "
            "starts them), else each child process loads its own engine and /metrics sees none of its jobs",
            pool.rsplit(".", 1)[-1] or "unknown",
        )


@task_received.connect  # type: ignore[untyped-decorator]
def _lease(request: Any = None, **_: Any) -> None:
    """From receipt to the end of the task, the message stays ours (``worker/leases.py``)."""
    resources.leases.hold(request.id, request.message.delivery_tag)


@task_postrun.connect  # type: ignore[untyped-decorator]
def _end_lease(task_id: str = "", **_: Any) -> None:
    resources.leases.release(task_id)


@worker_shutting_down.connect  # type: ignore[untyped-decorator]
def _stop_with_grace(**_: Any) -> None:
    """SIGTERM (``docker stop``): Celery's warm shutdown takes no new jobs and waits for the
    running ones; past the grace they stop at their next segment and are handed back at once."""
    resources.stop_after(resources.settings.stop_grace_seconds)


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _close(**_: Any) -> None:
    resources.close()


class _HandBackInOneLine(logging.Filter):
    """A job handed back to the queue is expected: Celery's line says so, without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, Reject) and error.requeue:
            record.exc_info, record.exc_text = None, None
        return True


logging.getLogger("celery.app.trace").addFilter(_HandBackInOneLine())


@worker_ready.connect  # type: ignore[untyped-decorator]
def _load_model_at_start(**_: Any) -> None:
    """Load and warm the default voice before the first job arrives."""
    resources.storage  # noqa: B018 - building them is the point
    resources.synthesizer  # noqa: B018
