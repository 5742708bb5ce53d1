"""Audiobooks on the farm: parts of chapters become jobs, and the finished book is uploaded.

Each part is submitted with its content hash as idempotency key, so a rerun after an
interrupt attaches to the job already queued or done instead of queueing a second one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from producer.client import Client, JobSpec
from ttsfarm.audiobook.manifest import MANIFEST_NAME, Manifest
from ttsfarm.audiobook.render import PartProgress
from ttsfarm.breaks import estimate_segments
from ttsfarm.errors import Cancelled
from ttsfarm.jobs import CONTENT_TYPES as JOB_CONTENT_TYPES
from ttsfarm.jobs import JobRequest, JobResult, JobStatus, check_text, wait_until_done
from ttsfarm.storage import Storage

FARM_CONCURRENCY: Final = 32
"""Parts in flight on the farm at once: enough to fill several workers' batches."""
POLL_SECONDS: Final = 0.5
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
    """Renders book parts as farm jobs (see :class:`ttsfarm.audiobook.render.Renderer`)."""

    def __init__(self, client: Client, concurrency: int = FARM_CONCURRENCY) -> None:
        self.client = client
        self._concurrency = concurrency

    @property
    def concurrency(self) -> int:
        return self._concurrency

    def check(self, request: JobRequest) -> int:
        check_text(request.text)
        self.client.voices.check(request.options.voice, request.options.speaker)
        return estimate_segments(request.text)

    def render(
        self, request: JobRequest, target: Path, progress: PartProgress, cancelled: Callable[[], bool]
    ) -> JobResult:
        options = request.options
        spec = JobSpec(
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
        (job_id,) = self.client.submit_many([spec])

        def follow(status: JobStatus) -> None:
            progress(status.segments_done, status.audio_seconds)
            if not status.done and cancelled():
                self.client.cancel(job_id)
                raise Cancelled("the audiobook was interrupted")

        wait_until_done(job_id, self.client.status, poll=POLL_SECONDS, on_status=follow).outcome()
        return self.client.fetch(job_id, target)


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
