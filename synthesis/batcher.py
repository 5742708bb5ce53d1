"""The dynamic batcher: the one caller of the engines in a worker process.

Jobs submit segments from any thread and get a future back. Runner threads form batches
and run them: up to ``max_batch`` items that share voice and scales, waiting at most
``max_wait`` seconds after the oldest item arrived for more to come, and picking items of
similar length so that little padding is computed. With two runners one batch is formed,
padded and handed out while the other runs, so the GPU does not wait on the host between
batches (``Engine`` decides how many of their runs may be on the device at once).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidGraph, InvalidProtobuf, NoSuchFile

from synthesis.batching import BatcherStats, BatchObserver, BusyClock
from synthesis.engine import EngineItem, EngineOutOfMemory, Scales, Spoken
from synthesis.engines import VoiceEngine
from ttsfarm.core.errors import PermanentError, VoiceNotFound
from ttsfarm.core.voices import Voice

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH: Final = 8
DEFAULT_MAX_WAIT: Final = 0.080
"""Seconds to wait for more items after the oldest waiting one arrived."""
DEFAULT_MAX_PADDING_RATIO: Final = 0.15
"""A batch gives up its farthest-length items until at most this share of it is padding:
padding is computed like real work, so on a CPU a padded batch is slower than none."""
MAX_HALVINGS: Final = 2
"""How often an out-of-memory batch is halved before its items run one by one."""

NOT_A_VOICE_ERRORS: Final = (
    DecodeError,
    InvalidProtobuf,
    InvalidGraph,
    NoSuchFile,
    FileNotFoundError,
    PermissionError,
    ValueError,
)
"""What loading a model file that is not a Piper voice raises: protobuf that does not parse (onnx,
onnxruntime), a graph onnxruntime rejects, or one without a Piper voice's parts (``synthesis.graph``)."""

BatchKey = tuple[str, Scales]


@dataclass
class _Pending:
    key: BatchKey
    voice: Voice
    item: EngineItem
    future: Future[Spoken]
    enqueued_at: float


class Batcher:
    """Groups segments from every job in flight into batches for the engines it owns."""

    def __init__(
        self,
        load_engine: Callable[[Voice], VoiceEngine],
        max_batch: int = DEFAULT_MAX_BATCH,
        max_wait: float = DEFAULT_MAX_WAIT,
        max_padded_ids: int | None = None,
        max_padding_ratio: float = DEFAULT_MAX_PADDING_RATIO,
        runners: int = 1,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        if runners < 1:
            raise ValueError("runners must be at least 1")
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.max_padded_ids = max_padded_ids
        self.max_padding_ratio = max_padding_ratio
        self.runners = runners
        self._stats = BatcherStats()
        self._stats_lock = threading.Lock()
        self._busy = BusyClock(self._stats, self._stats_lock)
        self._load_engine = load_engine
        self._engines: dict[str, VoiceEngine] = {}
        self._engines_lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._cond = threading.Condition()
        self._closed = False
        self._observers: list[BatchObserver] = []
        self._threads = [
            threading.Thread(target=self._loop, name=f"ttsfarm-batcher-{n}", daemon=True)
            for n in range(runners)
        ]
        for thread in self._threads:
            thread.start()

    def __enter__(self) -> Batcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def observe(self, observer: BatchObserver) -> None:
        """Call ``observer(lengths, seconds)`` after each engine run that succeeded (metrics)."""
        self._observers.append(observer)

    @property
    def stats(self) -> BatcherStats:
        """A copy of the counters, taken under their lock."""
        stages: Counter[str] = Counter()
        for engine in self.engines.values():
            stages.update(engine.stage_totals())
        with self._stats_lock:
            return replace(
                self._stats, batch_sizes=Counter(self._stats.batch_sizes), stage_seconds=dict(stages)
            )

    @property
    def engine_process(self) -> int:
        return os.getpid()

    @property
    def engines(self) -> dict[str, VoiceEngine]:
        """The engines loaded so far, by model path."""
        return dict(self._engines)

    def engine(self, voice: Voice) -> VoiceEngine:
        """The engine of ``voice``, loaded on first use and kept for the process."""
        key = str(voice.model_path)  # two voices may share a name, never a model file
        with self._engines_lock:
            engine = self._engines.get(key)
            if engine is None:
                engine = self._engines[key] = self._load(voice)
            return engine

    def _load(self, voice: Voice) -> VoiceEngine:
        try:
            return self._load_engine(voice)
        except NOT_A_VOICE_ERRORS as error:
            raise VoiceNotFound(
                f"voice {voice.name!r}: {voice.model_path} is not a Piper voice model ({error}): "
                "give a Piper .onnx voice with its .onnx.json beside it"
            ) from None

    def submit(self, voice: Voice, item: EngineItem, scales: Scales) -> Future[Spoken]:
        """Queue one utterance; the future holds its waveform (float32, trimmed) and durations."""
        future: Future[Spoken] = Future()
        pending = _Pending((str(voice.model_path), scales), voice, item, future, time.monotonic())
        with self._cond:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            self._pending.append(pending)
            self._cond.notify()
        return future

    def close(self) -> None:
        """Stop the runner threads and the engines' background work; whatever still waits fails."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()
        for pending in self._pending:
            pending.future.cancel()
        self._pending.clear()
        for engine in self.engines.values():
            engine.close()  # its preparation, if still going

    def _loop(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            live = [p for p in batch if p.future.set_running_or_notify_cancel()]
            if not live:
                continue
            try:
                self.engine(live[0].voice)  # a model that cannot load fails the batch once, not per item
                self._execute(live, halvings=0)
            except PermanentError as error:  # a voice that cannot load: each job logs why it failed
                log.debug("batch of %d failed: %s", len(live), error)
                _fail(live, error)
            except Exception as error:  # never let a runner thread die: jobs would hang
                log.exception("batch of %d failed", len(live))
                _fail(live, error)

    def _next_batch(self) -> list[_Pending] | None:
        """The next batch to run, or None once closed. Any runner may take the items another
        one was waiting on, so the oldest item is looked up again after every wait."""
        with self._cond:
            while not self._closed:
                if not self._pending:
                    self._cond.wait()
                    continue
                oldest = self._pending[0]
                remaining = oldest.enqueued_at + self.max_wait - time.monotonic()
                ready = sum(1 for p in self._pending if p.key == oldest.key)
                if ready >= self.max_batch or remaining <= 0:
                    batch = self._choose(oldest)
                    chosen = {id(p) for p in batch}
                    self._pending = [p for p in self._pending if id(p) not in chosen]
                    if self._pending:
                        self._cond.notify()  # another runner may form the next batch now
                    return batch
                self._cond.wait(remaining)
            return None

    def _choose(self, oldest: _Pending) -> list[_Pending]:
        """The oldest item and up to ``max_batch - 1`` compatible ones closest to it in length."""
        compatible = sorted(
            (p for p in self._pending if p.key == oldest.key), key=lambda p: len(p.item.phoneme_ids)
        )
        size = min(self.max_batch, len(compatible))
        where = next(i for i, p in enumerate(compatible) if p is oldest)
        best_start, best_spread = 0, None
        for start in range(max(0, where - size + 1), min(where, len(compatible) - size) + 1):
            spread = len(compatible[start + size - 1].item.phoneme_ids) - len(
                compatible[start].item.phoneme_ids
            )
            if best_spread is None or spread < best_spread:
                best_start, best_spread = start, spread
        batch = compatible[best_start : best_start + size]
        while len(batch) > 1 and self._too_costly(batch):
            # drop the item farthest from the oldest in length, never the oldest itself
            far = max(
                (p for p in batch if p is not oldest),
                key=lambda p: abs(len(p.item.phoneme_ids) - len(oldest.item.phoneme_ids)),
            )
            batch.remove(far)
        return batch

    def _too_costly(self, batch: list[_Pending]) -> bool:
        """Over the padded-ids budget, or more padding than ``max_padding_ratio``."""
        lengths = [len(p.item.phoneme_ids) for p in batch]
        padded = len(lengths) * max(lengths)
        if self.max_padded_ids is not None and padded > self.max_padded_ids:
            return True
        return 1 - sum(lengths) / padded > self.max_padding_ratio

    def _execute(self, batch: list[_Pending], halvings: int) -> None:
        voice, scales = batch[0].voice, batch[0].key[1]
        try:
            engine = self.engine(voice)
            started = time.perf_counter()
            with self._busy:
                spoken = engine.speak([p.item for p in batch], scales)
            seconds = time.perf_counter() - started
        except EngineOutOfMemory:
            self._after_out_of_memory(batch, halvings)
            return
        except Exception as error:
            if len(batch) > 1:  # find the bad item: one bad item never fails the others
                for pending in batch:
                    self._execute([pending], halvings=MAX_HALVINGS)
            else:
                log.exception("synthesis failed for one segment")
                batch[0].future.set_exception(error)
            return
        lengths = [len(p.item.phoneme_ids) for p in batch]
        with self._stats_lock:
            self._stats.record(lengths, seconds)
        log.debug("batch of %d on %s", len(batch), engine.provider)
        for pending, item in zip(batch, spoken, strict=True):
            pending.future.set_result(item)
        for observer in self._observers:
            observer(lengths, seconds)

    def _after_out_of_memory(self, batch: list[_Pending], halvings: int) -> None:
        if len(batch) > 1:
            if halvings < MAX_HALVINGS:
                log.warning("out of memory at batch %d: halving", len(batch))
                middle = len(batch) // 2
                self._execute(batch[:middle], halvings + 1)
                self._execute(batch[middle:], halvings + 1)
            else:
                for pending in batch:
                    self._execute([pending], MAX_HALVINGS)
            return
        pending = batch[0]
        try:
            pending.future.set_result(self._run_in_halves(pending))
        except Exception as error:
            log.error("segment of %d phoneme ids failed: %s", len(pending.item.phoneme_ids), error)
            pending.future.set_exception(error)

    def _run_in_halves(self, pending: _Pending) -> Spoken:
        """Last resort for an item too long for memory: speak it as two utterances (their
        durations do not line up with the item's ids, so none are given)."""
        engine = self.engine(pending.voice)
        scales = pending.key[1]
        left, right = split_phoneme_ids(pending.item.phoneme_ids, pending.voice)
        log.warning("out of memory on one segment: splitting it in two")
        waves = [
            engine.speak([EngineItem(part, pending.item.speaker_id)], scales)[0].audio
            for part in (left, right)
        ]
        return Spoken(np.concatenate(waves), None)


def _fail(batch: list[_Pending], error: Exception) -> None:
    for pending in batch:
        if not pending.future.done():
            pending.future.set_exception(error)


def split_phoneme_ids(ids: Sequence[int], voice: Voice) -> tuple[list[int], list[int]]:
    """Split a BOS…EOS id sequence in two at the word gap nearest its middle."""
    id_map = voice.phoneme_id_map
    bos, eos, pad, space = id_map["^"], id_map["$"], id_map["_"], id_map[" "]
    inner = list(ids[len(bos) + len(pad) : len(ids) - len(eos)])
    middle = len(inner) // 2
    gaps = [i for i, value in enumerate(inner) if [value] == space]
    cut = min(gaps, key=lambda i: abs(i - middle)) if gaps else middle - middle % 2
    left = [*bos, *pad, *inner[:cut], *eos]
    right = [*bos, *pad, *inner[cut + len(space) + len(pad) if gaps else cut :], *eos]
    return left, right
