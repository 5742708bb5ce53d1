"""The text front end: a job's text in, its segments out in order, made as they are needed.

Segmenting is Python (pysbd) and phonemizing is espeak-ng, which holds the interpreter lock and
takes a process-wide lock of its own. On a GPU the engine speaks faster than one interpreter can
phonemize, and job threads doing it starve the batcher of the interpreter lock, so there the
work goes to a pool of processes (``text_processes``), a few chunks of paragraphs ahead of the
job. Elsewhere it runs in the job's own thread, one sentence at a time.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Final

from synthesis.phonemes import Phonemizer
from synthesis.text import DEFAULT_MAX_PHONEME_IDS, Segment, Segmenter, normalize
from ttsfarm.breaks import split_paragraphs
from ttsfarm.errors import TransientError
from ttsfarm.voices import Voice

log = logging.getLogger(__name__)

CHUNK_CHARACTERS: Final = 2_000
"""Paragraphs are sent to the pool in chunks of about this many characters (a few segments)."""
CHUNKS_AHEAD: Final = 3
"""Chunks of one job being segmented at once: enough to keep its batches fed, few enough
that the segments waiting in memory stay a small part of any text."""

_process_segmenters: dict[tuple[str, int], Segmenter] = {}
"""The segmenters of one pool process (each process has its own espeak-ng)."""


def _segment_chunk(
    voice: Voice, max_phoneme_ids: int, paragraphs: list[str], ends_text: bool
) -> list[Segment]:
    """Runs in a pool process: the segments of some paragraphs, numbered from 0."""
    key = (str(voice.model_path), max_phoneme_ids)
    segmenter = _process_segmenters.get(key)
    if segmenter is None:
        segmenter = _process_segmenters[key] = Segmenter(Phonemizer(voice), max_phoneme_ids)
    return list(segmenter.paragraph_segments(paragraphs, ends_text))


def _ready() -> bool:
    return True


PARENT_CHECK_SECONDS: Final = 1.0
"""How often a text process checks that the process that started it is still there."""


def _new_pool(processes: int) -> ProcessPoolExecutor:
    # spawn, not fork: the worker has threads and may hold a GPU context
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(processes, context, initializer=_exit_with_parent, initargs=(os.getpid(),))


def _exit_with_parent(parent: int) -> None:
    """Run in each text process: end it once the worker that started it is gone.

    A worker killed outright (SIGKILL, the OOM killer) cannot stop its pool, and the pool's
    processes keep each other's pipes open, so they would wait for work for good.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, name="ttsfarm-parent-watch", daemon=True).start()


def chunk_paragraphs(paragraphs: Sequence[str], size: int = CHUNK_CHARACTERS) -> Iterator[list[str]]:
    """Consecutive paragraphs grouped into chunks of at least ``size`` characters (the last may
    be shorter); a paragraph is never split."""
    chunk: list[str] = []
    characters = 0
    for paragraph in paragraphs:
        chunk.append(paragraph)
        characters += len(paragraph)
        if characters >= size:
            yield chunk
            chunk, characters = [], 0
    if chunk:
        yield chunk


class TextFrontend:
    """Makes the segments of any job's text; share one per process between job threads."""

    def __init__(self, max_phoneme_ids: int = DEFAULT_MAX_PHONEME_IDS, processes: int = 0) -> None:
        if processes < 0:
            raise ValueError("processes must be 0 (segment in the job's thread) or more")
        self.max_phoneme_ids = max_phoneme_ids
        self.processes = processes
        self._segmenters: dict[str, Segmenter] = {}
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self.restarts = 0
        """Times a text process died and the pool was replaced."""
        if processes:
            self._pool = _new_pool(processes)

    def __enter__(self) -> TextFrontend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the pool's processes now rather than with the first job."""
        if self._pool is not None:
            for future in [self._pool.submit(_ready) for _ in range(self.processes)]:
                future.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def segmenter(self, voice: Voice) -> Segmenter:
        """The in-thread segmenter of ``voice``."""
        key = str(voice.model_path)
        with self._lock:
            if key not in self._segmenters:
                self._segmenters[key] = Segmenter(Phonemizer(voice), self.max_phoneme_ids)
            return self._segmenters[key]

    def segments(self, voice: Voice, text: str) -> Iterator[Segment]:
        """Ordered segments of ``text``, made lazily as the iterator is consumed."""
        if self._pool is None:
            return self.segmenter(voice).segments(text)
        return self._pooled(self._pool, voice, split_paragraphs(normalize(text)))

    def _replace_broken(self, broken: ProcessPoolExecutor) -> None:
        """A pool process died (killed, out of memory): later jobs get a new pool."""
        with self._lock:
            if self._pool is broken:
                log.error("a text process died: starting a new pool of %d", self.processes)
                broken.shutdown(wait=False, cancel_futures=True)
                self._pool = _new_pool(self.processes)
                self.restarts += 1

    def _pooled(self, pool: ProcessPoolExecutor, voice: Voice, paragraphs: list[str]) -> Iterator[Segment]:
        pending: deque[Future[list[Segment]]] = deque()
        try:
            yield from self._in_order(pool, voice, paragraphs, pending)
        except BrokenProcessPool:  # from submit or from a result: a process died either way
            self._replace_broken(pool)
            raise TransientError("a text process stopped while segmenting: retry the job") from None
        finally:
            for future in pending:
                future.cancel()

    def _in_order(
        self,
        pool: ProcessPoolExecutor,
        voice: Voice,
        paragraphs: list[str],
        pending: deque[Future[list[Segment]]],
    ) -> Iterator[Segment]:
        """Chunks go to the pool up to :data:`CHUNKS_AHEAD` ahead; segments come back in order."""
        chunks = chunk_paragraphs(paragraphs)
        next_chunk = next(chunks, None)
        index = 0
        while next_chunk is not None or pending:
            while next_chunk is not None and len(pending) < CHUNKS_AHEAD:
                following = next(chunks, None)
                pending.append(
                    pool.submit(_segment_chunk, voice, self.max_phoneme_ids, next_chunk, following is None)
                )
                next_chunk = following
            for segment in pending.popleft().result():
                yield dataclasses.replace(segment, index=index)
                index += 1
