"""What a job's pipeline sees of a batcher: its protocol, and the figures it keeps.

:class:`SegmentBatcher` is :class:`synthesis.batcher.Batcher` in the engine's process, or
``synthesis.engine_link.RemoteBatcher`` in a consumer process of a shared engine.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from synthesis.engine_base import EngineOptions
from synthesis.items import EngineItem, Scales, Spoken
from ttsfarm.core.voices import Voice

BatchObserver = Callable[[Sequence[int], float], None]
"""Told each engine run's item lengths (phoneme ids) and wall seconds."""


@dataclass
class BatcherStats:
    """What the batcher has done so far; ``busy_seconds`` is the time at least one batch ran."""

    batches: int = 0
    items: int = 0
    real_ids: int = 0
    padded_ids: int = 0
    busy_seconds: float = 0.0
    run_seconds: float = 0.0
    """The durations of the engine runs that succeeded, added up: with several runners at once,
    more than ``busy_seconds`` (which counts failed runs too)."""
    batch_sizes: Counter[int] = field(default_factory=Counter)
    """How many batches ran at each size: bounded by ``max_batch``, however long the worker runs."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    """The engines' time in each stage so far (``stage_totals()`` of each; empty for an
    engine of one session): set a batch's time apart into the front, the graph lane's work and
    the waiting between them."""

    @property
    def mean_batch_size(self) -> float:
        return self.items / self.batches if self.batches else 0.0

    @property
    def padding_ratio(self) -> float:
        """Share of computed phoneme positions that were padding."""
        return 1.0 - self.real_ids / self.padded_ids if self.padded_ids else 0.0

    def record(self, lengths: Sequence[int], seconds: float) -> None:
        self.batches += 1
        self.run_seconds += seconds
        self.items += len(lengths)
        self.real_ids += sum(lengths)
        self.padded_ids += max(lengths) * len(lengths)
        self.batch_sizes[len(lengths)] += 1


class BusyClock:
    """Wall time during which at least one engine run was in progress."""

    def __init__(self, stats: BatcherStats, lock: threading.Lock) -> None:
        self._stats = stats
        self._lock = lock
        """The batcher's stats lock: ``busy_seconds`` is written under it."""
        self._running = 0
        self._since = 0.0

    def __enter__(self) -> None:
        with self._lock:
            if self._running == 0:
                self._since = time.perf_counter()
            self._running += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                self._stats.busy_seconds += time.perf_counter() - self._since


class EngineInfo(Protocol):
    """What the rest of a worker reads of a loaded engine: a :data:`VoiceEngine`, or the facts a
    consumer process was told of the engine in its host (``synthesis.engine_link``)."""

    @property
    def voice(self) -> Voice: ...
    @property
    def options(self) -> EngineOptions: ...
    @property
    def provider(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def warmup_seconds(self) -> float: ...
    @property
    def on_gpu(self) -> bool: ...
    @property
    def kind(self) -> str: ...
    def default_scales(self) -> Scales: ...


class SegmentBatcher(Protocol):
    """What a job's pipeline needs of a batcher: :class:`Batcher` in this process, or
    ``synthesis.engine_link.RemoteBatcher`` for the one engine of a process that serves several."""

    @property
    def max_batch(self) -> int: ...
    @property
    def runners(self) -> int: ...
    @property
    def stats(self) -> BatcherStats: ...
    @property
    def engines(self) -> Mapping[str, EngineInfo]: ...
    @property
    def engine_process(self) -> int:
        """The process id of the engine's process: consumers of one engine report the same."""
        ...

    def engine(self, voice: Voice) -> EngineInfo: ...
    def submit(self, voice: Voice, item: EngineItem, scales: Scales) -> Future[Spoken]: ...
    def observe(self, observer: BatchObserver) -> None: ...
    def close(self) -> None: ...
