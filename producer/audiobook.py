"""Audiobooks on the farm: parts of chapters become synthesis jobs, each chapter a finish job as
soon as its parts are spoken, and the finished book is uploaded.

Each part is submitted with its content hash as idempotency key, and each chapter with the hash
of its finish request, so a rerun after an interrupt attaches to the jobs already queued or done
instead of queueing second ones.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final

from producer.client import Client, JobSpec, download
from ttsfarm.audiobook.manifest import MANIFEST_NAME, Manifest
from ttsfarm.audiobook.part_cache import PartCache
from ttsfarm.audiobook.parts import Part
from ttsfarm.audiobook.render import PartFailed, PartProgress
from ttsfarm.core.breaks import estimate_segments
from ttsfarm.core.errors import (
    Cancelled,
    JobFailed,
    JobNotFound,
    StorageUnavailable,
    TransientError,
    TtsfarmError,
)
from ttsfarm.core.finishing import FinishRequest
from ttsfarm.core.jobs import CONTENT_TYPES as JOB_CONTENT_TYPES
from ttsfarm.core.jobs import JobRequest, JobResult, JobStatus, check_text, wait_until_done
from ttsfarm.core.voices import Voice
from ttsfarm.storage import Storage, fetch_checked

log = logging.getLogger(__name__)

PARTS_IN_FLIGHT: Final = 512
"""Parts queued on the farm at once: minutes of a GPU's work, so that no worker waits for this
producer; more are queued as these are done."""
FINISHES_AT_ONCE: Final = 16
"""Chapters finished on the farm at once. Each holds a job place of a worker while it waits for
one of that worker's finishing processes."""
POLL_SECONDS: Final = 0.25
QUEUE_RETRY_SECONDS: Final = 2.0
"""How long a producer waits after the farm refused parts (a full queue, a broker blip)."""
"""How often the parts and chapters in flight are looked at (all parts in one Redis round trip)."""
BOOKS_PREFIX: Final = "books"
CONTENT_TYPES: Final = {
    ".m4b": "audio/mp4",
    ".srt": "application/x-subrip",
    ".json": "application/json",
    ".jpg": "image/jpeg",
    ".png": "image/png",
    **{f".{name}": kind for name, kind in JOB_CONTENT_TYPES.items()},
}


class FarmRenderer:
    """Renders book parts and finishes chapters as farm jobs (see
    :class:`ttsfarm.audiobook.render.Renderer`). Parts live on the farm, under job ids made from
    their content: a run after an interrupt finds the parts already made there, so nothing of a
    part is kept here."""

    def __init__(
        self,
        client: Client,
        parts_in_flight: int = PARTS_IN_FLIGHT,
        finish_concurrency: int = FINISHES_AT_ONCE,
    ) -> None:
        self.client = client
        self.parts_in_flight = parts_in_flight
        self._finish_concurrency = finish_concurrency

    @property
    def keeps_parts(self) -> bool:
        return False

    def voice(self, name: str) -> Voice:
        """The farm's voice ``name``, as its workers have it (to warn about a book's language)."""
        return self.client.voices.voice(name)

    def sample_rate(self, voice: str) -> int:
        return self.client.voices.check(voice, None).sample_rate

    def check(self, request: JobRequest) -> int:
        check_text(request.text)
        self.client.voices.check(request.options.voice, request.options.speaker)
        return estimate_segments(request.text)

    def render(
        self,
        parts: Sequence[tuple[Part, JobRequest]],
        cache: PartCache,
        progress: PartProgress,
        stop: threading.Event,
    ) -> Iterator[tuple[Part, JobResult]]:
        pending = deque(parts)
        flying: dict[str, list[Part]] = {}  # a job id, and the parts of the same text it speaks
        try:
            while pending or flying:
                if stop.is_set():
                    raise Cancelled("the audiobook was interrupted")
                self._queue_more(pending, flying)
                finished = False
                for status in self.client.statuses(list(flying)):
                    same = flying[status.job_id]
                    for part in same:
                        progress(part.name, status.segments_done, status.audio_seconds)
                    if status.state == "unknown" or status.settled:
                        del flying[status.job_id]
                        finished = True
                        try:
                            result = status.outcome()
                        except (JobFailed, JobNotFound, Cancelled) as error:
                            raise PartFailed(same[0], str(error)) from None
                        for part in same:
                            yield part, result
                if not finished:
                    time.sleep(POLL_SECONDS)
        finally:  # done, failed or interrupted: nothing left running for nobody
            for job_id in flying:
                with contextlib.suppress(TtsfarmError):
                    self.client.cancel(job_id)

    def _queue_more(self, pending: deque[tuple[Part, JobRequest]], flying: dict[str, list[Part]]) -> None:
        """Queue parts while there is room. A full queue or a broker blip leaves them pending for
        the next look: what was queued before it is found again by its key then."""
        room = self.parts_in_flight - len(flying)
        batch = [pending.popleft() for _ in range(min(room, len(pending)))]
        if not batch:
            return
        try:
            ids = self.client.submit_many([_spec(request) for _, request in batch])
        except TransientError as error:
            log.warning("could not queue %d parts now (%s): trying again", len(batch), error)
            pending.extendleft(reversed(batch))
            time.sleep(QUEUE_RETRY_SECONDS)
            return
        for job_id, (part, _) in zip(ids, batch, strict=True):
            flying.setdefault(job_id, []).append(part)

    @property
    def finish_concurrency(self) -> int:
        return self._finish_concurrency

    def finish(self, request: FinishRequest, folder: Path, should_stop: Callable[[], bool]) -> JobResult:
        job_id = self.client.submit_finish(request, key=f"finish:{request.fingerprint()}")

        def follow(status: JobStatus) -> None:
            if not status.done and should_stop():
                self.client.cancel(job_id)
                raise Cancelled("the audiobook was interrupted")

        result = wait_until_done(job_id, self.client.status, poll=POLL_SECONDS, on_status=follow).outcome()
        chapter = folder / f"chapter.{result.format}"
        download(result, chapter, self.client.audio(result))
        pieces = []
        for piece in result.pieces:
            target = folder / f"chapter.{piece.codec}"
            if not fetch_checked(self.client.locate(piece.location), target, piece.sha256):
                raise StorageUnavailable(
                    f"the {piece.codec} piece of job {job_id} did not arrive whole: run again"
                )
            pieces.append(replace(piece, location=str(target)))
        return replace(result, location=str(chapter), url=None, pieces=tuple(pieces))


def _spec(request: JobRequest) -> JobSpec:
    options = request.options
    return JobSpec(
        request.text,
        voice=options.voice,
        speaker=options.speaker,
        length_scale=options.length_scale,
        format=request.format,
        key=request.job_id,
        noise_scale=options.noise_scale,
        noise_w=options.noise_w,
        loudness=request.loudness,
    )


def upload_book(outdir: Path, manifest: Manifest, storage: Storage) -> str:
    """Put every file of a finished book under ``books/<book key>/``; returns that prefix.
    The manifest goes last, so a listed manifest means the whole book is there."""
    prefix = f"{BOOKS_PREFIX}/{manifest.book_key}"
    for output in manifest.outputs():
        path = outdir / output.file
        content_type = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
        if not storage.exists(f"{prefix}/{output.file}", output.sha256):
            storage.put(path, f"{prefix}/{output.file}", content_type, output.sha256)
    storage.put_bytes((outdir / MANIFEST_NAME).read_bytes(), f"{prefix}/{MANIFEST_NAME}", "application/json")
    return prefix
