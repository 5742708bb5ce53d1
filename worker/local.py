"""Building the in-process synthesizer from settings (used by the CLI and by workers)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

from ttsfarm.settings import Settings
from worker.batcher import Batcher
from worker.engine import Engine, EngineOptions, Provider
from worker.pipeline import Synthesizer
from worker.voices import Voice


def engine_options(settings: Settings) -> EngineOptions:
    if settings.provider not in ("auto", "cuda", "cpu"):
        raise ValueError(f"provider must be auto, cuda or cpu, not {settings.provider!r}")
    return EngineOptions(
        provider=cast(Provider, settings.provider),
        device_id=settings.gpu,
        cpu_threads=settings.cpu_threads,
    )


def build_synthesizer(settings: Settings) -> Synthesizer:
    options = engine_options(settings)

    def load_engine(voice: Voice) -> Engine:
        return Engine(voice, options)

    batcher = Batcher(
        load_engine,
        max_batch=settings.max_batch,
        max_wait=settings.max_wait_ms / 1000,
        max_padded_ids=settings.max_padded_ids,
        max_padding_ratio=settings.max_padding_ratio,
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
