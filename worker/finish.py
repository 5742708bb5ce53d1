"""A finish job on a worker: the chapter's parts fetched from storage, finished in one of the
worker's finishing processes (``ttsfarm.core.finisher``), and the chapter's files stored."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Final

from synthesis.scratch import job_folder
from ttsfarm.core.encoding import PIECE_CODECS
from ttsfarm.core.errors import PermanentError, raise_if_cancelled
from ttsfarm.core.finisher import finish_chapter, memory_needed
from ttsfarm.core.finishing import FinishRequest, PartAudio
from ttsfarm.core.jobs import CONTENT_TYPES, JobResult, audio_key
from ttsfarm.core.processes import HelperPool
from ttsfarm.storage import Storage, fetch_checked

FETCHES_AT_ONCE: Final = 8
"""Parts of one chapter downloaded at the same time."""

Locate = Callable[[str], tuple[Storage, str]]
"""The storage that holds a location (a part's result says where it is), and the key there."""


def finish_here(
    request: FinishRequest,
    pool: HelperPool,
    storage: Storage,
    locate: Locate,
    cancelled: Callable[[], bool],
    temp_dir: str | None = None,
) -> JobResult:
    """Fetch the parts, finish the chapter in ``pool`` and store its files in ``storage``; the
    result names where they are."""
    with job_folder(temp_dir) as folder:  # locked to this process: swept if it is killed
        started = time.perf_counter()
        sources = _fetch_parts(request.parts, folder, locate, cancelled)
        fetched = time.perf_counter()
        out = folder / "out"
        out.mkdir()
        finished = pool.run_in(
            folder, finish_chapter, request, sources, out, cancelled=cancelled, holds=memory_needed(request)
        )
        raise_if_cancelled(cancelled)
        storing = time.perf_counter()
        chapter = storage.put(
            Path(finished.location),
            audio_key(request.job_id, finished.format),
            CONTENT_TYPES[finished.format],
            finished.sha256,
        )
        pieces = []
        for piece in finished.pieces:
            key = audio_key(request.job_id, piece.codec)
            stored = storage.put(
                Path(piece.location), key, PIECE_CODECS[piece.codec].content_type, piece.sha256
            )
            pieces.append(replace(piece, location=stored.location))
        timings = {
            "fetch": round(fetched - started, 4),
            **finished.timings,
            "store": round(time.perf_counter() - storing, 4),
        }
    return replace(
        finished, location=chapter.location, url=chapter.url, pieces=tuple(pieces), timings=timings
    )


def _fetch_parts(
    parts: tuple[PartAudio, ...], folder: Path, locate: Locate, cancelled: Callable[[], bool]
) -> list[Path]:
    """Download every part into ``folder``, each checked against its SHA-256."""

    def fetch(numbered: tuple[int, PartAudio]) -> Path:
        number, part = numbered
        raise_if_cancelled(cancelled)
        source = locate(part.location)
        target = folder / f"part-{number:04d}{Path(source[1]).suffix}"
        if not fetch_checked(source, target, part.sha256):
            raise PermanentError(
                f"part {number + 1} of the chapter ({part.location}) is not the audio that was made: "
                "make the book again"
            )
        return target

    with ThreadPoolExecutor(FETCHES_AT_ONCE, thread_name_prefix="ttsfarm-fetch") as fetches:
        return list(fetches.map(fetch, enumerate(parts)))
