"""Renderers: the one hook between the audiobook builder and whatever makes the audio.

The builder hands a renderer a book's parts to speak, then each chapter to finish as soon as its
parts are spoken, so chapters are mastered and encoded while later parts are still spoken.
:class:`LocalRenderer` speaks parts in this process and finishes chapters in a pool of helper
processes; a farm renderer (``producer.audiobook``) submits both as farm jobs, whose ids are
stable keys: the same part or chapter gets the same job on every run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from ttsfarm.audiobook.part_cache import PartCache
from ttsfarm.audiobook.parts import Part
from ttsfarm.core.breaks import estimate_segments
from ttsfarm.core.errors import PermanentError
from ttsfarm.core.finisher import finish_chapter, memory_needed
from ttsfarm.core.finishing import FinishRequest
from ttsfarm.core.jobs import JobRequest, JobResult
from ttsfarm.core.processes import HelperPool
from ttsfarm.core.voices import Voice
from ttsfarm.storage import LocalStorage

if TYPE_CHECKING:
    from synthesis.pipeline import Progress, Synthesizer

PartProgress = Callable[[str, int, float], None]
"""Called as a part advances: (the part's name, segments done so far, seconds of audio so far)."""

LOCAL_CONCURRENCY: Final = 2
"""Parts spoken at once in-process at least (a CPU batches one segment at a time): one part's
encoding overlaps the next one's synthesis."""


class PartFailed(PermanentError):
    """A part could not be made; :attr:`part` says which (the builder names its place in the book)."""

    def __init__(self, part: Part, message: str) -> None:
        super().__init__(message)
        self.part = part


class Renderer(Protocol):
    """Speaks parts into lossless audio with per-segment times, and finishes chapters."""

    @property
    def keeps_parts(self) -> bool:
        """Whether parts are made here and kept in the book's part cache (else they live where
        they are made, and the cache is not read: a farm's workers cannot read this disk)."""
        ...

    def sample_rate(self, voice: str) -> int:
        """The rate of ``voice`` (a :class:`~ttsfarm.core.errors.VoiceNotFound` if there is none)."""
        ...

    def check(self, request: JobRequest) -> int:
        """Raise a :class:`~ttsfarm.core.errors.PermanentError` if ``request`` cannot be spoken
        (unknown voice or speaker, nothing to say); else return how many segments it will
        have (an estimate will do: it only sizes the progress bar)."""
        ...

    def render(
        self,
        parts: Sequence[tuple[Part, JobRequest]],
        cache: PartCache,
        progress: PartProgress,
        stop: threading.Event,
    ) -> Iterator[tuple[Part, JobResult]]:
        """Speak every part, yielding each with its result as it is done (in any order); a part
        that fails raises :class:`PartFailed`. A renderer that makes parts here keeps them in
        ``cache``. Once ``stop`` is set, or the caller stops iterating, parts in progress stop."""
        ...

    @property
    def finish_concurrency(self) -> int:
        """How many chapters the builder may hand to :meth:`finish` at once."""
        ...

    def finish(self, request: FinishRequest, folder: Path, should_stop: Callable[[], bool]) -> JobResult:
        """Finish one chapter (``ttsfarm.core.finisher``); the result's files are in ``folder``.
        Stops (:class:`~ttsfarm.core.errors.Cancelled`) once ``should_stop()`` returns true."""
        ...


@runtime_checkable
class VoiceLookup(Protocol):
    """A renderer that can also say what a voice is (to warn about a book in a language its
    voice does not speak): optional, as it says nothing about making audio."""

    def voice(self, name: str) -> Voice:
        """The voice called ``name`` (a :class:`~ttsfarm.core.errors.VoiceNotFound` if there is none)."""
        ...


class LocalRenderer:
    """Speaks parts with this process's synthesizer; finishes chapters in helper processes."""

    def __init__(
        self, synthesizer: Synthesizer, finishing: HelperPool, concurrency: int | None = None
    ) -> None:
        self.synthesizer = synthesizer
        self.finishing = finishing
        self.concurrency = concurrency or max(LOCAL_CONCURRENCY, synthesizer.batcher.max_batch)
        """Parts spoken at once: enough to fill the batcher's batches (32 on a GPU)."""

    @property
    def keeps_parts(self) -> bool:
        return True

    def sample_rate(self, voice: str) -> int:
        return self.synthesizer.voice(voice).sample_rate

    def voice(self, name: str) -> Voice:
        return self.synthesizer.voice(name)

    def check(self, request: JobRequest) -> int:
        self.synthesizer.check(request)
        return estimate_segments(request.text)

    def render(
        self,
        parts: Sequence[tuple[Part, JobRequest]],
        cache: PartCache,
        progress: PartProgress,
        stop: threading.Event,
    ) -> Iterator[tuple[Part, JobResult]]:
        abandoned = threading.Event()  # the caller stopped iterating: parts in progress stop too

        def halted() -> bool:
            return stop.is_set() or abandoned.is_set()

        def speak(part: Part, request: JobRequest) -> JobResult:
            def report(state: Progress) -> None:
                progress(part.name, state.segments_done, state.audio_seconds)

            target = cache.temp_path(part)
            try:
                result = self.synthesizer.synthesize(
                    request, LocalStorage(target.parent), target.name, progress=report, cancelled=halted
                )
                return cache.store(part, target, result)
            finally:
                target.unlink(missing_ok=True)

        executor = ThreadPoolExecutor(max(1, self.concurrency), thread_name_prefix="ttsfarm-part")
        try:
            futures: dict[Future[JobResult], Part] = {
                executor.submit(speak, part, request): part for part, request in parts
            }
            for future in as_completed(futures):
                try:
                    result = future.result()
                except PermanentError as error:
                    raise PartFailed(futures[future], str(error)) from error
                yield futures[future], result
        finally:  # done, failed, interrupted or abandoned: parts in progress stop, none is kept half made
            abandoned.set()
            executor.shutdown(wait=True, cancel_futures=True)

    @property
    def finish_concurrency(self) -> int:
        return self.finishing.processes

    def finish(self, request: FinishRequest, folder: Path, should_stop: Callable[[], bool]) -> JobResult:
        sources = [Path(part.location) for part in request.parts]
        return self.finishing.run_in(
            folder,
            finish_chapter,
            request,
            sources,
            folder,
            cancelled=should_stop,
            holds=memory_needed(request),
        )
