"""Building the in-process synthesizer from settings (used by the CLI and by workers).

Batching defaults depend on where the engine runs, from the H200 and CPU measurements in
``docs/benchmarks.md``: on a GPU, batches of up to 32 (the knee of the throughput curve), a
budget of 16,384 padded phoneme ids per batch, and no padding cap (batches are padded to
fixed shape buckets anyway). On a CPU a batch is no faster per item than single items and
any padding is lost work (batch 8 ran 8-10% slower than batch 1, batch 8 with under 2%
padding 4% slower), so CPU workers default to one segment per run; set ``max_batch`` to
batch anyway (at most 15% padding then).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, cast

from ttsfarm.errors import InvalidInput
from ttsfarm.settings import Settings
from ttsfarm.voices import Voice
from worker.batcher import DEFAULT_MAX_PADDING_RATIO, Batcher
from worker.engine import Engine, EngineOptions, Precision, Provider
from worker.pipeline import Synthesizer
from worker.sessions import wants_cuda

GPU_MAX_BATCH: Final = 32
CPU_MAX_BATCH: Final = 1
GPU_MAX_PADDED_IDS: Final = 16_384
SHAPE_BUCKETS: Final[dict[str, bool | None]] = {"auto": None, "on": True, "off": False}


@dataclass(frozen=True)
class BatchPolicy:
    """The batcher's limits, resolved for the device the engine runs on."""

    max_batch: int
    max_padded_ids: int | None
    max_padding_ratio: float

    @classmethod
    def for_settings(cls, settings: Settings, on_gpu: bool) -> BatchPolicy:
        """Each limit from the settings where set, else this device's default."""
        if on_gpu:
            defaults = cls(GPU_MAX_BATCH, GPU_MAX_PADDED_IDS, 1.0)
        else:
            defaults = cls(CPU_MAX_BATCH, None, DEFAULT_MAX_PADDING_RATIO)
        if settings.max_batch is not None and settings.max_batch < 1:
            raise InvalidInput(f"TTSFARM_MAX_BATCH must be at least 1, not {settings.max_batch}")
        return cls(
            max_batch=defaults.max_batch if settings.max_batch is None else settings.max_batch,
            max_padded_ids=defaults.max_padded_ids
            if settings.max_padded_ids is None
            else settings.max_padded_ids,
            max_padding_ratio=defaults.max_padding_ratio
            if settings.max_padding_ratio is None
            else settings.max_padding_ratio,
        )


def engine_options(settings: Settings) -> EngineOptions:
    if settings.provider not in ("auto", "cuda", "cpu"):
        raise InvalidInput(f"TTSFARM_PROVIDER must be auto, cuda or cpu, not {settings.provider!r}")
    if settings.precision not in ("auto", "fp16", "fp32"):
        raise InvalidInput(f"TTSFARM_PRECISION must be auto, fp16 or fp32, not {settings.precision!r}")
    if settings.shape_buckets not in SHAPE_BUCKETS:
        raise InvalidInput(f"TTSFARM_SHAPE_BUCKETS must be auto, on or off, not {settings.shape_buckets!r}")
    return EngineOptions(
        provider=cast(Provider, settings.provider),
        device_id=settings.gpu,
        cpu_threads=settings.cpu_threads,
        precision=cast(Precision, settings.precision),
        shape_buckets=SHAPE_BUCKETS[settings.shape_buckets],
    )


def build_synthesizer(settings: Settings) -> Synthesizer:
    options = engine_options(settings)
    policy = BatchPolicy.for_settings(settings, wants_cuda(options.provider))

    def load_engine(voice: Voice) -> Engine:
        engine = Engine(voice, options)
        if settings.prewarm and engine.on_gpu:
            engine.prepare([policy.max_batch])
        return engine

    batcher = Batcher(
        load_engine,
        max_batch=policy.max_batch,
        max_wait=settings.max_wait_ms / 1000,
        max_padded_ids=policy.max_padded_ids,
        max_padding_ratio=policy.max_padding_ratio,
    )
    return Synthesizer(
        batcher,
        max_phoneme_ids=settings.max_phoneme_ids,
        voices_dir=settings.voices_dir,
        temp_dir=settings.temp_dir,
    )


@contextmanager
def local_synthesizer(settings: Settings) -> Iterator[Synthesizer]:
    synthesizer = build_synthesizer(settings)
    try:
        yield synthesizer
    finally:
        synthesizer.batcher.close()
