"""Building the in-process synthesizer from settings (used by the CLI and by workers).

Batching defaults depend on where the engine runs, from the H200 and CPU measurements
(docs/decisions/0006-batch-32-on-a-gpu.md, 0007-batch-1-on-a-cpu.md): on a GPU, batches of up
to 32 (the knee of the throughput curve), a budget of 16,384 padded phoneme ids per batch, and
no padding cap (batches are padded to fixed shape buckets anyway). On a CPU a batch is no
faster per item than single items and
any padding is lost work (batch 8 ran 15% slower than batch 1, and capped at 3% padding
still 4% slower), so CPU workers default to one segment per run; set ``max_batch`` to
batch anyway (at most 15% padding then).

On a GPU three runner threads form and run batches, three engine runs may be on the device
at once, and text is segmented by a pool of processes, so that the host keeps the GPU fed; on a
CPU all three stay at their simplest (one runner, one run, the job's own thread).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Final

from synthesis.batcher import DEFAULT_MAX_PADDING_RATIO, Batcher
from synthesis.engine import EngineOptions
from synthesis.engine_link import RemoteBatcher
from synthesis.engines import VoiceEngine, load_engine
from synthesis.frontend import TextFrontend
from synthesis.gpus import free_gpu_memory, gpu_count
from synthesis.pipeline import Synthesizer
from synthesis.sessions import NHWC, CudaOptions, cpu_count, wants_cuda
from ttsfarm.core.processes import HelperPool, Priority
from ttsfarm.core.settings import CudaLayout, EngineName, Settings
from ttsfarm.core.voices import Voice

GPU_MAX_BATCH: Final = 32
CPU_MAX_BATCH: Final = 1
GPU_MAX_PADDED_IDS: Final = 16_384
GPU_RUNNERS: Final = 3
GPU_CONCURRENT_RUNS: Final = 3
GPU_TEXT_PROCESSES: Final = 4
"""Text processes of a GPU worker at most: four kept one H200 fed (1.4-1.6 cores busy at about
4,000 stored audio s/s, docs/decisions/0008-text-processes.md); eight did no better."""
GPU_WORKER_CORES: Final = 5
"""Cores a GPU worker's own process keeps busy at full speed (4.5-4.8: Celery, batcher
runners, encoding, storage; docs/decisions/0008-text-processes.md). Text processes get what a GPU's
share of the host leaves."""
GPU_CONCURRENCY: Final = 32
CPU_CONCURRENCY: Final = 16
CUDA_LAYOUTS: Final[dict[str, CudaOptions]] = {"nchw": (), "nhwc": (NHWC,)}
"""Extra CUDA provider options of the staged engine's waveform sessions for each
``TTSFARM_CUDA_LAYOUT`` (``EngineOptions.waveform_cuda_options``). Never the sessions that predict
the durations: NHWC there changed 7 of 79 segment lengths (docs/decisions/0013-nhwc-waveform-auto.md)."""
NHWC_MIN_FREE_BYTES: Final = 120 * 2**30
"""``TTSFARM_CUDA_LAYOUT=auto`` takes NHWC where the GPU has at least this much memory free when
the engine loads, for batches of at most :data:`NHWC_MAX_BATCH`. NHWC keeps an arena per
captured waveform graph: at batch 32 a worker peaked at 76,319-83,385 MiB
(docs/decisions/0013-nhwc-waveform-auto.md,
against 27,497-31,525 MiB in NCHW) and the engine benchmark, with an fp32 engine of its own
beside it, at 105,311 MiB."""
NHWC_MAX_BATCH: Final = 32
"""The largest batch NHWC has been measured at. Larger batches capture larger graphs, each in an
arena of its own: batches 8, 32 and 64 prepared together, with the front captured too (every
graph on its own arena, as NHWC's are), ran an H200 out of memory
(docs/decisions/0013-nhwc-waveform-auto.md)."""


def gpu_text_processes(cores: int, gpus: int) -> int:
    """Text processes for one GPU worker on a host of ``cores`` cores and ``gpus`` GPUs (one
    worker each): what the worker's share of the cores leaves after its own process, 1 to 4."""
    share = cores // max(gpus, 1)
    return max(1, min(GPU_TEXT_PROCESSES, share - GPU_WORKER_CORES))


@dataclass(frozen=True)
class BatchPolicy:
    """The batcher's limits, resolved for the device the engine runs on."""

    max_batch: int
    max_padded_ids: int | None
    max_padding_ratio: float
    runners: int = 1
    concurrent_runs: int = 1
    text_processes: int = 0

    @classmethod
    def for_settings(cls, settings: Settings, on_gpu: bool) -> BatchPolicy:
        """Each limit from the settings where set, else this device's default."""
        if on_gpu:
            text_processes = gpu_text_processes(cpu_count(), gpu_count())
            defaults = cls(
                GPU_MAX_BATCH, GPU_MAX_PADDED_IDS, 1.0, GPU_RUNNERS, GPU_CONCURRENT_RUNS, text_processes
            )
        else:
            defaults = cls(CPU_MAX_BATCH, None, DEFAULT_MAX_PADDING_RATIO)

        def pick(value: int | None, default: int) -> int:
            return default if value is None else value

        return cls(
            max_batch=defaults.max_batch if settings.max_batch is None else settings.max_batch,
            max_padded_ids=defaults.max_padded_ids
            if settings.max_padded_ids is None
            else settings.max_padded_ids,
            max_padding_ratio=defaults.max_padding_ratio
            if settings.max_padding_ratio is None
            else settings.max_padding_ratio,
            runners=pick(settings.batch_runners, defaults.runners),
            concurrent_runs=pick(settings.concurrent_runs, defaults.concurrent_runs),
            text_processes=pick(settings.text_processes, defaults.text_processes),
        )


def worker_concurrency(settings: Settings, on_gpu: bool) -> int:
    """Jobs a farm worker runs at once: the setting, else the default for where it runs."""
    if settings.concurrency is not None:
        return settings.concurrency
    return GPU_CONCURRENCY if on_gpu else CPU_CONCURRENCY


def waveform_layout(setting: CudaLayout, max_batch: int, free_bytes: int | None) -> CudaOptions:
    """The waveform sessions' layout options: as set, or for ``auto`` NHWC where the GPU has
    ``free_bytes`` enough for it at ``max_batch`` (:data:`NHWC_MIN_FREE_BYTES`), else NCHW."""
    if setting != "auto":
        return CUDA_LAYOUTS[setting]
    roomy = free_bytes is not None and free_bytes >= NHWC_MIN_FREE_BYTES
    return CUDA_LAYOUTS["nhwc" if roomy and max_batch <= NHWC_MAX_BATCH else "nchw"]


def engine_options(settings: Settings, max_batch: int | None = None) -> EngineOptions:
    """The engine's options from settings (checked when the settings were made), for batches of
    up to ``max_batch`` (by default the setting's, else the GPU default)."""
    max_batch = max_batch or settings.max_batch or GPU_MAX_BATCH
    cuda_here = settings.provider != "cpu" and wants_cuda("auto")  # a GPU and a CUDA build
    free_bytes = free_gpu_memory(settings.gpu) if settings.cuda_layout == "auto" and cuda_here else None
    return EngineOptions(
        provider=settings.provider,
        device_id=settings.gpu,
        cpu_threads=settings.cpu_threads,
        precision=settings.precision,
        waveform_cuda_options=waveform_layout(settings.cuda_layout, max_batch, free_bytes),
    )


def build_synthesizer(
    settings: Settings, long_running: bool = True, prepare_after: threading.Event | None = None
) -> Synthesizer:
    """The synthesizer for ``settings``; a ``long_running`` one (a worker) keeps its memory at
    what its current batches need, a one-off command's is left at its peak, which is faster.
    With ``settings.prewarm``, each engine on a GPU is prepared in the background, from its load
    or, with ``prepare_after``, once that is set (a worker: once it takes jobs, so that the
    builds do not slow its start)."""
    on_gpu = wants_cuda(settings.provider)
    policy = BatchPolicy.for_settings(settings, on_gpu)
    options = replace(engine_options(settings, policy.max_batch), give_back_memory=long_running)
    # A warm-up run makes the GPU's first batch fast; on a CPU the first run is no slower.
    options = replace(options, concurrent_runs=policy.concurrent_runs, warmup=on_gpu)

    kind: EngineName = settings.engine

    def load_voice_engine(voice: Voice) -> VoiceEngine:
        engine = load_engine(voice, options, kind, policy.max_batch)
        if settings.prewarm and engine.on_gpu:  # jobs run meanwhile (synthesis.background)
            engine.prepare_later([policy.max_batch], after=prepare_after)
        return engine

    batcher = Batcher(
        load_voice_engine,
        max_batch=policy.max_batch,
        max_wait=settings.max_wait_ms / 1000,
        max_padded_ids=policy.max_padded_ids,
        max_padding_ratio=policy.max_padding_ratio,
        runners=policy.runners,
    )
    frontend = TextFrontend(settings.max_phoneme_ids, policy.text_processes)
    finishing = finishing_pool(settings) if long_running else None
    return Synthesizer(
        batcher, frontend, voices_dir=settings.voices_dir, temp_dir=settings.temp_dir, finishing=finishing
    )


def finishing_pool(settings: Settings, share: int = 1) -> HelperPool:
    """The processes that master and encode finished audio: the setting, else one per CPU, split
    between ``share`` processes of one worker. Beside a GPU they take only CPU time nothing else
    wants, so that the threads feeding the GPU never wait for them; on a CPU, where the engine's
    threads keep every core busy, they run at a low priority instead, so that they are not
    starved. They start with the first job that needs them."""
    processes = max(1, (settings.finish_processes or cpu_count()) // share)
    priority: Priority = "idle" if wants_cuda(settings.provider) else "low"
    return HelperPool(processes, priority, what="finishing")


def consumer_synthesizer(
    settings: Settings, address: str, authkey: bytes, on_lost: Callable[[], None] | None = None
) -> Synthesizer:
    """A consumer process's synthesizer: its own text processes, the host's engine and batcher
    (``synthesis.engine_link``). The consumers share the text processes a GPU worker would have."""
    batcher = RemoteBatcher(address, authkey, on_lost)
    processes = BatchPolicy.for_settings(settings, batcher.host.on_gpu).text_processes
    if settings.text_processes is None and batcher.host.on_gpu:  # the worker's share, split
        processes = max(1, processes // settings.consumers)
    frontend = TextFrontend(settings.max_phoneme_ids, processes)
    finishing = finishing_pool(settings, settings.consumers)
    return Synthesizer(
        batcher, frontend, voices_dir=settings.voices_dir, temp_dir=settings.temp_dir, finishing=finishing
    )


@contextmanager
def local_synthesizer(settings: Settings) -> Iterator[Synthesizer]:
    synthesizer = build_synthesizer(settings, long_running=False)
    try:
        yield synthesizer
    finally:
        synthesizer.close()
