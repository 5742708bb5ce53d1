"""What every task of a worker process shares: the synthesizer, the storage and its gate, the
registry, the message leases, the health probe and the metrics, each built once on first use."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial

from celery import Celery
from celery.worker import state as worker_state

from synthesis.build import build_synthesizer
from synthesis.pipeline import Synthesizer
from synthesis.scratch import sweep
from ttsfarm.core.settings import Settings
from ttsfarm.farm.celeryconf import finish_queue, queued_jobs
from ttsfarm.farm.registry import JobRegistry
from ttsfarm.storage import Storage, open_storage, storage_at
from worker.health import EngineHealth
from worker.leases import Leases
from worker.metrics import WorkerMetrics, start_metrics
from worker.storage_gate import StorageGate

log = logging.getLogger(__name__)


class WorkerResources:
    """What every task in this process shares: the synthesizer, the storage, the registry."""

    def __init__(
        self, settings: Settings, app: Celery, build: Callable[[Settings], Synthesizer] | None = None
    ) -> None:
        self.settings = settings
        self.app = app
        self.taking_jobs = threading.Event()
        """Set once Celery says the worker is ready: its engine's preparation begins then."""
        self._build = build or partial(build_synthesizer, prepare_after=self.taking_jobs)
        """Makes the synthesizer: the engine in this process, or a consumer's (``worker/consumers.py``)."""
        self._lock = threading.Lock()
        self._synthesizer: Synthesizer | None = None
        self._storage: Storage | None = None
        self._registry: JobRegistry | None = None
        self._leases: Leases | None = None
        self._sources: dict[str, Storage] = {}
        self._sources_lock = threading.Lock()
        self.gate = StorageGate(
            lambda: self.storage, [settings.queue, finish_queue(settings.queue)], self._make_bucket
        )
        """Closed while the storage cannot be written: the worker takes no jobs meanwhile."""
        self.exit_status: int | None = None
        """The Celery worker's exit status, once it has shut down."""
        self.stop_asked = False
        """Set when a signal asked the worker to stop (its exit status is then Celery's)."""
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
                self._synthesizer = self._build(self.settings)
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
                    engine.kind,
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
                self._storage = open_storage(self.settings)
            return self._storage

    def _make_bucket(self) -> None:
        """With ``s3_create_bucket``, the bucket is made (if missing) before the storage is probed:
        a store that starts after the worker gets its bucket once it answers."""
        ensure_bucket = getattr(self.storage, "ensure_bucket", None)
        if self.settings.s3_create_bucket and ensure_bucket is not None:
            ensure_bucket()

    def locate(self, location: str) -> tuple[Storage, str]:
        """The storage that holds ``location`` (a part a finish job reads) and its key there,
        opened once per bucket or folder."""
        with self._sources_lock:  # boto3 makes clients safely from one thread at a time
            return storage_at(location, self.settings, self._sources)

    def _queue_length(self) -> int:
        return queued_jobs(self.app, self.settings.queue)

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
                    held=lambda task_id: task_id in worker_state.requests,
                )
            return self._leases

    @property
    def registry(self) -> JobRegistry:
        with self._lock:
            if self._registry is None:
                self._registry = JobRegistry(self.settings.backend_url or "", self.settings.redis_tls())
            return self._registry
