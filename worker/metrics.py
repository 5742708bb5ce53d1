"""Prometheus metrics of one worker process, served at ``/metrics`` on ``TTSFARM_METRICS_PORT``.

The worker runs its jobs as threads of one process (``--pool threads``, as ``ttsfarm worker``
starts it), so one registry in that process sees every job and batch: no multiprocess mode. Two
workers on one host (one per GPU, host networking) each need a port of their own.

The engine knows nothing of this module: the batcher reports each batch to an observer, the
Celery task reports each job, and what is read rather than counted (the worker's device, GPU
memory, text-pool restarts) is read at scrape time by :class:`_WorkerCollector`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from synthesis.gpus import GpuMemory
from ttsfarm.core.errors import SettingsError

if TYPE_CHECKING:
    from synthesis.pipeline import Synthesizer

log = logging.getLogger(__name__)

JOB_SECONDS_BUCKETS: Final = (
    0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 10800, 21600,
)  # fmt: skip
"""Queue wait and job duration: a one-sentence job (a tenth of a second) up to the longest job
a worker takes (about 3 hours), with room above."""
ENGINE_SECONDS_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BATCH_SIZE_BUCKETS: Final = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128)
PADDING_BUCKETS: Final = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0)
RTF_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)
"""Real-time factor: job wall time over audio time; a GPU worker under load is near 0.01."""
FINAL_STATES: Final = ("succeeded", "failed", "cancelled")
QueueLength = Callable[[], int]
"""Reads how many messages wait in the worker's queue (one ``LLEN`` on the broker)."""


class WorkerMetrics:
    """The metrics of one worker process, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)  # RSS, open files, CPU: memory growth is alertable
        r = self.registry
        self.jobs = Counter("ttsfarm_jobs", "Jobs that ended, by final state.", ["state"], registry=r)
        for state in FINAL_STATES:
            self.jobs.labels(state)  # present at 0 from the start, so rate() works from the first job
        self.retries = Counter("ttsfarm_job_retries", "Job attempts that ended in a retry.", registry=r)
        self.running = Gauge("ttsfarm_jobs_running", "Jobs running in this worker now.", registry=r)
        self.queue_wait = Histogram(
            "ttsfarm_job_queue_wait_seconds",
            "From submit to the start of the job's first attempt in this worker.",
            buckets=JOB_SECONDS_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "ttsfarm_job_duration_seconds",
            "Time one attempt of a job ran in this worker, by how it ended.",
            ["state"],
            buckets=JOB_SECONDS_BUCKETS,
            registry=r,
        )
        self.audio_seconds = Counter(
            "ttsfarm_audio_seconds", "Seconds of audio stored by succeeded jobs.", registry=r
        )
        self.rtf = Histogram(
            "ttsfarm_job_real_time_factor",
            "Job wall time over the audio time it produced (lower is faster).",
            buckets=RTF_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "ttsfarm_batch_size", "Segments per engine run.", buckets=BATCH_SIZE_BUCKETS, registry=r
        )
        self.padding = Histogram(
            "ttsfarm_batch_padding_ratio",
            "Share of a batch's phoneme positions that were padding.",
            buckets=PADDING_BUCKETS,
            registry=r,
        )
        self.engine_seconds = Histogram(
            "ttsfarm_engine_run_seconds",
            "Wall time of one engine run (one batch).",
            buckets=ENGINE_SECONDS_BUCKETS,
            registry=r,
        )

    def job_started(self, queue_wait: float | None) -> None:
        self.running.inc()
        if queue_wait is not None:
            self.queue_wait.observe(max(0.0, queue_wait))

    def job_ended(self, state: str, seconds: float, audio_seconds: float = 0.0) -> None:
        """One attempt ended: ``retried`` or one of :data:`FINAL_STATES`."""
        self.running.dec()
        self.duration.labels(state).observe(seconds)
        if state == "retried":
            self.retries.inc()
            return
        self.jobs.labels(state).inc()
        if state == "succeeded" and audio_seconds > 0:
            self.audio_seconds.inc(audio_seconds)
            self.rtf.observe(seconds / audio_seconds)

    def batch_ran(self, lengths: Sequence[int], seconds: float) -> None:
        """The batcher's observer: one engine run of items of these phoneme-id lengths."""
        self.batch_size.observe(len(lengths))
        padded = max(lengths) * len(lengths)
        self.padding.observe(1.0 - sum(lengths) / padded if padded else 0.0)
        self.engine_seconds.observe(seconds)

    def watch(
        self, synthesizer: Synthesizer, gpu_memory: GpuMemory | None, queue_length: QueueLength | None = None
    ) -> None:
        """Report the synthesizer's batches, and read its device and text pool at each scrape."""
        synthesizer.batcher.observe(self.batch_ran)
        self.registry.register(_WorkerCollector(synthesizer, gpu_memory, queue_length))

    def serve(self, port: int, address: str) -> None:
        """Serve ``/metrics`` from a daemon thread; a port in use is one clear error."""
        try:
            start_http_server(port, address, registry=self.registry)
        except OSError as error:
            raise SettingsError(
                f"cannot serve metrics on {address}:{port} ({error.strerror or error}): give each "
                "worker of a host its own TTSFARM_METRICS_PORT, or 0 to turn metrics off"
            ) from None
        log.info("metrics at http://%s:%d/metrics", address, port)


class _WorkerCollector(Collector):
    """What a scrape reads from the worker as it is: its device, GPU memory, text-pool restarts."""

    def __init__(
        self, synthesizer: Synthesizer, gpu_memory: GpuMemory | None, queue_length: QueueLength | None
    ) -> None:
        self._synthesizer = synthesizer
        self._gpu_memory = gpu_memory
        self._queue_length = queue_length

    def collect(self) -> Iterable[Metric]:
        engines = list(self._synthesizer.batcher.engines.values())
        info = GaugeMetricFamily(
            "ttsfarm_worker_engine",
            "1 for each voice engine loaded, labelled with where and how it runs.",
            labels=["voice", "provider", "device", "precision", "engine"],
        )
        for engine in engines:
            device = f"cuda:{engine.options.device_id}" if engine.on_gpu else "cpu"
            info.add_metric([engine.voice.name, engine.provider, device, engine.precision, engine.kind], 1)
        yield info
        on_gpu = GaugeMetricFamily(
            "ttsfarm_worker_on_gpu", "1 if every loaded engine runs on a GPU, 0 if any runs on the CPU."
        )
        on_gpu.add_metric([], 1 if engines and all(e.on_gpu for e in engines) else 0)
        yield on_gpu
        restarts = CounterMetricFamily(
            "ttsfarm_text_pool_restarts", "Times a text process died and its pool was started again."
        )
        restarts.add_metric([], self._synthesizer.frontend.restarts)
        yield restarts
        yield from self._queue()
        yield from self._gpu()

    def _queue(self) -> Iterable[Metric]:
        if self._queue_length is None:
            return
        try:
            length = self._queue_length()
        except Exception as error:  # the broker down: the scrape still answers, without this
            log.warning("cannot read the queue length: %s", error)
            return
        gauge = GaugeMetricFamily(
            "ttsfarm_queue_length", "Jobs waiting in the worker's queue (not yet taken by any worker)."
        )
        gauge.add_metric([], length)
        yield gauge

    def _gpu(self) -> Iterable[Metric]:
        if self._gpu_memory is None:
            return
        try:
            used, total = self._gpu_memory.read()
        except Exception as error:  # NVML raises its own untyped errors; a scrape must not fail
            log.warning("cannot read GPU memory: %s", error)
            return
        labels = [str(self._gpu_memory.index)]
        for name, value, text in (
            ("ttsfarm_gpu_memory_used_bytes", used, "Memory in use on the worker's GPU (all processes)."),
            ("ttsfarm_gpu_memory_total_bytes", total, "Memory of the worker's GPU."),
        ):
            gauge = GaugeMetricFamily(name, text, labels=["gpu"])
            gauge.add_metric(labels, value)
            yield gauge


def start_metrics(
    synthesizer: Synthesizer,
    port: int,
    address: str,
    cuda_device: int,
    queue_length: QueueLength | None = None,
) -> WorkerMetrics | None:
    """Serve this worker's metrics, or None when ``port`` is 0 (turned off)."""
    if port == 0:
        return None
    metrics = WorkerMetrics()
    on_gpu = any(engine.on_gpu for engine in synthesizer.batcher.engines.values())
    metrics.watch(synthesizer, _gpu_memory(cuda_device) if on_gpu else None, queue_length)
    metrics.serve(port, address)
    return metrics


def _gpu_memory(cuda_device: int) -> GpuMemory | None:
    try:
        return GpuMemory(cuda_device)
    except Exception as error:  # no NVML library or driver: the other metrics still matter
        log.warning("no GPU memory metrics (%s)", error)
        return None
