"""Renderers: the one hook between the audiobook builder and whatever makes the audio.

The builder hands a renderer one part at a time (from up to ``concurrency`` threads) and
caches what comes back, so a renderer needs no state of its own about the book.
:class:`LocalRenderer` speaks parts in this process; a farm renderer submits each part as a
job (``request.job_id`` is a stable idempotency key: the same part gets the same id on every
run), waits for it and fetches the audio to ``target``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from ttsfarm.breaks import estimate_segments
from ttsfarm.jobs import JobRequest, JobResult
from ttsfarm.storage import LocalStorage

if TYPE_CHECKING:
    from synthesis.pipeline import Progress, Synthesizer

PartProgress = Callable[[int, float], None]
"""Called as a part advances: (segments done so far, seconds of audio so far)."""

LOCAL_CONCURRENCY: Final = 2
"""Parts spoken at once in-process: their segments share batches, and one part's encoding
overlaps the next one's synthesis."""


class Renderer(Protocol):
    """Turns one part's text into one lossless audio file with per-segment times."""

    @property
    def concurrency(self) -> int:
        """How many parts the builder may hand over at once."""
        ...

    def check(self, request: JobRequest) -> int:
        """Raise a :class:`~ttsfarm.errors.PermanentError` if ``request`` cannot be spoken
        (unknown voice or speaker, nothing to say); else return how many segments it will
        have (an estimate will do: it only sizes the progress bar)."""
        ...

    def render(
        self, request: JobRequest, target: Path, progress: PartProgress, cancelled: Callable[[], bool]
    ) -> JobResult:
        """Write ``request`` as ``request.format`` audio to ``target`` and return its result.

        Segment times in the result are relative to the start of the file. The builder moves
        ``target`` into its cache afterwards; a renderer must not keep it open. Stop early
        (raise :class:`~ttsfarm.errors.Cancelled`) once ``cancelled()`` returns true."""
        ...


class LocalRenderer:
    """Speaks parts with this process's synthesizer."""

    def __init__(self, synthesizer: Synthesizer, concurrency: int = LOCAL_CONCURRENCY) -> None:
        self.synthesizer = synthesizer
        self._concurrency = concurrency

    @property
    def concurrency(self) -> int:
        return self._concurrency

    def check(self, request: JobRequest) -> int:
        self.synthesizer.check(request)
        return estimate_segments(request.text)

    def render(
        self, request: JobRequest, target: Path, progress: PartProgress, cancelled: Callable[[], bool]
    ) -> JobResult:
        def report(state: Progress) -> None:
            progress(state.segments_done, state.audio_seconds)

        return self.synthesizer.synthesize(
            request, LocalStorage(target.parent), target.name, progress=report, cancelled=cancelled
        )
