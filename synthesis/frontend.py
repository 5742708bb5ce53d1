"""The text front end: a job's text in, its segments out in order, made as they are needed.

Segmenting is Python (pysbd) and phonemizing is espeak-ng, which holds the interpreter lock and
takes a process-wide lock of its own. On a GPU the engine speaks faster than one interpreter can
phonemize, and job threads doing it starve the batcher of the interpreter lock, so there the
work goes to a pool of processes (``text_processes``), a few chunks of paragraphs ahead of the
job. Elsewhere it runs in the job's own thread, one sentence at a time.

Both read the text aloud the same way before phonemizing (numbers, dates and abbreviations in
words for English voices: :class:`synthesis.phonemes.Phonemizer`); the segments keep the text
as written.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Final

from synthesis.phonemes import Phonemizer
from synthesis.text import DEFAULT_MAX_PHONEME_IDS, Segment, Segmenter, normalize
from ttsfarm.core.breaks import split_paragraphs
from ttsfarm.core.errors import TransientError
from ttsfarm.core.processes import HelperPool
from ttsfarm.core.voices import Voice

log = logging.getLogger(__name__)

CHUNK_CHARACTERS: Final = 2_000
"""Paragraphs are sent to the pool in chunks of about this many characters (a few segments)."""
CHUNKS_AHEAD: Final = 3
"""Chunks of one job being segmented at once: enough to keep its batches fed, few enough
that the segments waiting in memory stay a small part of any text."""

_process_segmenters: dict[tuple[str, int, bool], Segmenter] = {}
"""The segmenters of one pool process (each process has its own espeak-ng)."""


def _segment_chunk(
    voice: Voice, max_phoneme_ids: int, paragraphs: list[str], ends_text: bool, normalize_text: bool
) -> list[Segment]:
    """Runs in a pool process: the segments of some paragraphs, numbered from 0."""
    key = (str(voice.model_path), max_phoneme_ids, normalize_text)
    segmenter = _process_segmenters.get(key)
    if segmenter is None:
        phonemizer = Phonemizer(voice, normalize_text)
        segmenter = _process_segmenters[key] = Segmenter(phonemizer, max_phoneme_ids)
    return list(segmenter.paragraph_segments(paragraphs, ends_text))


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
    """Makes the segments of any job's text; share one per process between job threads.

    ``normalize_text`` off sends the text to espeak-ng as written (measurements compare both)."""

    def __init__(
        self,
        max_phoneme_ids: int = DEFAULT_MAX_PHONEME_IDS,
        processes: int = 0,
        normalize_text: bool = True,
    ) -> None:
        if processes < 0:
            raise ValueError("processes must be 0 (segment in the job's thread) or more")
        self.max_phoneme_ids = max_phoneme_ids
        self.processes = processes
        self.normalize_text = normalize_text
        self._segmenters: dict[str, Segmenter] = {}
        self._lock = threading.Lock()
        self._pool = HelperPool(processes, what="text") if processes else None

    @property
    def restarts(self) -> int:
        """Times a text process died and the pool was replaced."""
        return self._pool.restarts if self._pool is not None else 0

    def __enter__(self) -> TextFrontend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the pool's processes now rather than with the first job."""
        if self._pool is not None:
            self._pool.start()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def segmenter(self, voice: Voice) -> Segmenter:
        """The in-thread segmenter of ``voice``."""
        key = str(voice.model_path)
        with self._lock:
            if key not in self._segmenters:
                phonemizer = Phonemizer(voice, self.normalize_text)
                self._segmenters[key] = Segmenter(phonemizer, self.max_phoneme_ids)
            return self._segmenters[key]

    def segments(self, voice: Voice, text: str) -> Iterator[Segment]:
        """Ordered segments of ``text``, made lazily as the iterator is consumed."""
        if self._pool is None:
            return self.segmenter(voice).segments(text)
        return self._pooled(self._pool, voice, split_paragraphs(normalize(text)))

    def _pooled(self, pool: HelperPool, voice: Voice, paragraphs: list[str]) -> Iterator[Segment]:
        pending: deque[Future[list[Segment]]] = deque()
        running = pool.pool
        try:
            yield from self._in_order(pool, voice, paragraphs, pending)
        except BrokenProcessPool:  # from a result: a process died
            pool.replace_broken(running)
            raise TransientError("a text process stopped while segmenting: retry the job") from None
        finally:
            for future in pending:
                future.cancel()

    def _in_order(
        self,
        pool: HelperPool,
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
                    pool.submit(
                        _segment_chunk,
                        voice,
                        self.max_phoneme_ids,
                        next_chunk,
                        following is None,
                        self.normalize_text,
                    )
                )
                next_chunk = following
            for segment in pending.popleft().result():
                yield dataclasses.replace(segment, index=index)
                index += 1
